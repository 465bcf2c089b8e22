"""Shared fixtures: the real market-data corpus in ../shared/data (never copied here)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT.parent / "shared" / "data").resolve()
DAILY_DIR = SHARED_DATA / "ohlcv" / "daily"


def corpus_bars(symbol: str) -> pd.DataFrame:
    """A symbol's whole daily history from the corpus (float64 OHLCV, indexed by date)."""
    path = DAILY_DIR / f"{symbol}.csv"
    if not path.exists():
        pytest.skip(f"real corpus not found at {path}")
    df = pd.read_csv(path, parse_dates=["date"]).set_index("date")
    return df[["open", "high", "low", "close", "volume"]].astype("float64")


def read_real_bars(symbol: str, start: str, end: str) -> pd.DataFrame:
    """Real daily bars from the corpus, as the engine expects them (float64 OHLCV)."""
    path = DAILY_DIR / f"{symbol}.csv"
    if not path.exists():
        pytest.skip(f"real corpus not found at {path}")
    df = pd.read_csv(path, parse_dates=["date"]).set_index("date")
    df = df.loc[start:end, ["open", "high", "low", "close", "volume"]].astype("float64")
    df.index.name = "date"
    return df


@pytest.fixture(scope="session")
def daily_dir() -> Path:
    if not DAILY_DIR.exists():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    return DAILY_DIR


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return SHARED_DATA


def numba_cache_dir() -> str:
    """One numba kernel cache for every test run (``backtest.screen.numba_cache`` honours
    NUMBA_CACHE_DIR): compiled kernels are no input of a run (numba keys them by the source
    file and the signature and recompiles when either changes), and compiling the screen's
    kernels afresh in each run's empty cache home took some 25 s of every run that screens.
    Under the system's temp dir, never the user's home."""
    return str(Path(tempfile.gettempdir()) / f"swarm-lab-tests-numba-{os.getuid()}")


def tone_cache_dir() -> Path:
    """One headline-tone cache for every test run (``swarm.research.tone_cache``): no input
    of a run (each file is named by the digest of its texts and scorer), and scoring the
    corpus's 54,000 texts took ~15 s of every run in a fresh cache home. Under the system's
    temp dir, never the user's home."""
    return Path(tempfile.gettempdir()) / f"swarm-lab-tests-tones-{os.getuid()}"


@pytest.fixture(autouse=True, scope="session")
def _tones_off_home():
    """In-process runs keep headline tones in the tests' shared tone cache, never the user's
    (``swarm.research.tone_cache``; ``lab_runs.develop_env`` links a subprocess run's to it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("swarm.families.sentiment_momentum.default_tone_dir", tone_cache_dir)
        yield


@pytest.fixture(autouse=True)
def _isolated_memory(monkeypatch, tmp_path):
    """Tests never read or write the user's research memory under ~/.cache."""
    monkeypatch.setattr("swarm.memory.store.default_memory_dir", lambda: tmp_path / "memory")


@pytest.fixture(autouse=True, scope="session")
def _no_ledger_in_home(tmp_path_factory):
    """A run in a subprocess records its trials under XDG_DATA_HOME: never the user's. A test
    whose runs must not see each other gives each its own (``lab_runs.develop_env``)."""
    import os

    before = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    yield
    if before is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = before


@pytest.fixture(autouse=True)
def _isolated_ledger(monkeypatch, tmp_path_factory):
    """Tests never read or write the user's trial ledger across runs (~/.local/share); each
    test has its own, outside its tmp_path (which a test may expect to hold only its runs)."""
    folder = tmp_path_factory.mktemp("ledgers")
    monkeypatch.setattr("experiments.dataset_ledger.default_ledger_dir", lambda: folder)


# Every run folder the suite makes must validate against the models that wrote it
# (`python -m experiments.check`). A test that corrupts one on purpose opts out with
# ``@pytest.mark.corrupts_run_folder``.
_CHECKED: set[Path] = set()


def _run_folders(root: Path) -> list[Path]:
    """Develop-run folders under ``root`` not checked yet (an analysis folder of
    ``swarm.analyze`` has a manifest too, but is not a run)."""
    found = set()
    for manifest in root.rglob("manifest.json"):
        try:
            entry = json.loads(manifest.read_text(encoding="utf-8")).get("entry_point")
        except (OSError, ValueError, AttributeError):
            entry = None  # unreadable or not an object: check_run names what is wrong
        if entry != "swarm.analyze":
            found.add(manifest.parent)
    return sorted(found - _CHECKED)


def _check_folders(root: Path) -> list[str]:
    from experiments.check import check_run

    problems = []
    for folder in _run_folders(root):
        _CHECKED.add(folder)
        try:
            problem, _ = check_run(folder)
        except FileNotFoundError:  # removed meanwhile (a test cleaning up its own folders)
            continue
        if problem is not None:
            problems.append(f"{folder}: {problem}")
    return problems


@pytest.fixture(autouse=True)
def _run_folders_validate(request, tmp_path):
    yield
    if request.node.get_closest_marker("corrupts_run_folder"):
        for folder in _run_folders(tmp_path):  # broken on purpose: the session check skips it
            shutil.rmtree(folder, ignore_errors=True)
        return
    problems = _check_folders(tmp_path)
    assert not problems, "a run folder fails experiments.check:\n" + "\n".join(problems)


def pytest_sessionfinish(session, exitstatus):
    """Folders made by module- and session-scoped fixtures (tmp_path_factory) are checked
    once, when the session ends, by the process that owns the base temp dir (the xdist
    controller, which sees every worker's folders); a bad one fails the run."""
    if hasattr(session.config, "workerinput"):
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        base = factory.getbasetemp()
    except (OSError, ValueError):
        return
    problems = _check_folders(base)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "a run folder fails experiments.check:\n" + "\n".join(problems)
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def checkpoint_round_trip(caplog):
    """``values`` written into the develop graph's state through a real SQLite checkpoint (the
    state's allowlist as the serializer's) and read back; LangGraph's warnings land in
    ``caplog`` (a type off the allowlist comes back raw, with a "Blocked" warning)."""
    import logging
    import sqlite3

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    from swarm.state import DevelopState, checkpoint_allowlist

    def round_trip(values: dict) -> dict:
        g = StateGraph(DevelopState)
        g.add_node("put", lambda state: values)
        g.add_edge(START, "put")
        g.add_edge("put", END)
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        serde = JsonPlusSerializer(allowed_msgpack_modules=checkpoint_allowlist())
        app = g.compile(checkpointer=SqliteSaver(conn, serde=serde))
        cfg = {"configurable": {"thread_id": "t"}}
        with caplog.at_level(logging.WARNING):
            app.invoke({}, cfg)
            return app.get_state(cfg).values

    return round_trip
