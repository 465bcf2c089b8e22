"""Small develop runs shared by the run-folder tests (resume, reproducibility, notebook).

Each distinct run is made once per test session, even under pytest-xdist: the workers share
the session's base temp folder and take a file lock, so two workers never make the same run.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import numba_cache_dir, tone_cache_dir

from experiments.check import check_run
from experiments.tracker import read_records, strip_volatile

# One symbol, two folds, three variants, up to four iterations: REFINE, REFINE, RESEARCH,
# ABANDON on the real corpus at the time of writing (against the default buy-and-hold
# benchmark nothing passes, and a research round with gate feedback is on the path); the
# tests compare runs with each other and do not depend on the exact route.
SEED = 2


def reference_args(daily_dir: Path, seed: int = SEED) -> list[str]:
    return [
        "--directive",
        "momentum alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2013-01-01",
        "--end",
        "2018-12-31",
        "--variants",
        "3",
        "--folds",
        "2",
        "--max-iterations",
        "4",
        "--workers",
        "2",
        "--seed",
        str(seed),
        "--criteria",
        "sharpe>=0.8,min_trades>=10,dsr>=0.5",
        "--criteria-replace",
        "--offline",
    ]


def develop_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "swarm.develop", *args]


def develop_env(cache_home: Path) -> dict[str, str]:
    """The environment of a test run: its own user cache dir (XDG_CACHE_HOME), which holds the
    research memory and the data cache, and data dir (XDG_DATA_HOME: the trial ledger across
    runs). Both are inputs of a run, so runs that must agree start from the same (empty)
    memory and ledger, and no test writes to the user's home."""
    home = str(cache_home)
    _share_tones(cache_home)
    return os.environ | {
        "PYTHONHASHSEED": "0",
        "XDG_CACHE_HOME": home,
        "XDG_DATA_HOME": home,
        "NUMBA_CACHE_DIR": numba_cache_dir(),
    }


def _share_tones(cache_home: Path) -> None:
    """The run's ``tones`` folder (in its own cache home) is a link to ``tone_cache_dir``."""
    link = Path(cache_home) / "swarm-lab" / "tones"
    if not link.is_symlink() and not link.exists():
        tone_cache_dir().mkdir(parents=True, exist_ok=True)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(tone_cache_dir(), target_is_directory=True)


def run_develop(
    args: list[str], *, cache_home: Path, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        develop_cmd(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=develop_env(cache_home),
    )


def printed_run_dir(done: subprocess.CompletedProcess) -> Path:
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


def only_run_dir(out: Path) -> Path | None:
    dirs = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    assert len(dirs) <= 1, dirs
    return dirs[0] if dirs else None


def comparable(run_dir: Path) -> list[dict]:
    """The run's JSONL without timestamps and run ids: what equal runs agree on."""
    return strip_volatile(read_records(run_dir / "experiments.jsonl"))


def _paths_that_differ(a: object, b: object, at: str = "") -> list[str]:
    """The leaf paths where two JSON values differ (``alpha.deflated_alpha``, say)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            p
            for k in sorted(set(a) | set(b))
            for p in _paths_that_differ(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
        ]
    return [] if a == b else [at or "(value)"]


def describe_diff(got: list[dict], expected: list[dict], limit: int = 8) -> str:
    """Which records differ between two runs and where: missing or extra records by their
    identity (kind, iteration, variant, symbol), then the fields of those that changed."""
    from experiments.tracker import ID_FIELDS

    def by_id(records: list[dict]) -> dict[tuple, dict]:
        return {tuple(r.get(f) for f in ID_FIELDS): r for r in records}

    g, e = by_id(got), by_id(expected)
    lines = [f"{len(got)} records, {len(expected)} expected"]
    lines += [f"missing: {k}" for k in sorted(set(e) - set(g), key=str)][:limit]
    lines += [f"extra: {k}" for k in sorted(set(g) - set(e), key=str)][:limit]
    changed = [(k, _paths_that_differ(g[k], e[k])) for k in sorted(set(g) & set(e), key=str)]
    for k, paths in [(k, p) for k, p in changed if p][:limit]:
        shown = ", ".join(f"{p}: {_at(g[k], p)!r} != {_at(e[k], p)!r}" for p in paths[:6])
        lines.append(f"changed {k}: {shown}")
    return "\n".join(lines)


def _at(record: dict, path: str) -> object:
    value: object = record
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value if not isinstance(value, str | list | dict) else str(value)[:80]


def _count(run_dir: Path | None, query: str, *params: str) -> int:
    """A count from the run's checkpoint database, read-only; 0 while it is not there or busy."""
    db = run_dir / "checkpoints.sqlite" if run_dir else None
    if db is None or not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
        try:
            return conn.execute(query, params).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def n_checkpoints(run_dir: Path | None) -> int:
    """Checkpoints written so far."""
    return _count(run_dir, "SELECT count(*) FROM checkpoints")


def n_saved_tasks(run_dir: Path | None, channel: str) -> int:
    """Finished tasks whose writes LangGraph has saved, counted by a channel they write
    (a backtest task writes ``branch:to:gate``)."""
    return _count(run_dir, "SELECT count(DISTINCT task_id) FROM writes WHERE channel = ?", channel)


def _shared_root(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def shared_run(tmp_path_factory, name: str, args: list[str]) -> tuple[Path, float]:
    """(run folder, wall seconds) of ``develop args``, made once per session."""
    root = _shared_root(tmp_path_factory) / f"lab-run-{name}"
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        marker = root / "run.json"
        if marker.exists():
            info = json.loads(marker.read_text())
            return Path(info["run_dir"]), info["wall_s"]
        t0 = time.monotonic()
        done = run_develop([*args, "--out", str(root / "out")], cache_home=root / "cache")
        wall = time.monotonic() - t0
        run_dir = printed_run_dir(done)
        assert_valid_run(run_dir)
        marker.write_text(json.dumps({"run_dir": str(run_dir), "wall_s": wall}))
        return run_dir, wall


def assert_valid_run(run_dir: Path) -> None:
    """Every run folder a test makes must pass ``python -m experiments.check``."""
    problem, _ = check_run(run_dir)
    assert problem is None, f"python -m experiments.check {run_dir}: {problem}"
