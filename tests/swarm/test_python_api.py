"""The Python API (``from swarm import develop, judge, load_run``): the README's examples run as
written, errors are the CLI's typed errors, and ``import swarm`` stays light."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.errors import OptionError, UserInputError

ROOT = Path(__file__).resolve().parents[2]


def readme_python_blocks(section: str = "## Python API") -> list[str]:
    """The ```python blocks of one README section, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(section + "\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.S)


@pytest.mark.unit
def test_import_swarm_pulls_in_nothing_heavy() -> None:
    code = (
        "import sys, swarm; heavy = {'langgraph', 'langchain_core', 'backtrader', 'pandas'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.unit
def test_develop_is_the_same_callable_before_and_after_the_cli_module_loads() -> None:
    # The submodule swarm.develop shadows a lazy name: the module itself is the API.
    code = (
        "from swarm import develop as first; import swarm.develop as module; "
        "from swarm import develop as again, judge, load_run; "
        "print(first is module is again, callable(first), callable(judge), callable(load_run))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 4


@pytest.mark.unit
def test_readme_has_python_examples() -> None:
    blocks = readme_python_blocks()
    assert len(blocks) == 2 and "develop(" in blocks[0] and "judge(" in blocks[1]


@pytest.mark.unit
def test_unknown_option_names_the_near_flag(tmp_path) -> None:
    from swarm import develop

    with pytest.raises(OptionError, match="did you mean max_iterations") as info:
        develop(directive="momentum", max_iteration=1, out=tmp_path)
    assert isinstance(info.value, TypeError)
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"directive": "   ", "tickers": ["AAPL"]}, "--directive"),
        ({"directive": "momentum", "tickers": "AAPL", "variants": 0}, "--variants"),
        ({"directive": "momentum", "tickers": "AAPL", "start": "2019-13-01"}, "--start"),
        ({"directive": "momentum", "tickers": "ZZZZ"}, "--tickers"),
    ],
)
def test_bad_input_raises_the_cli_message(tmp_path, capsys, daily_dir, options, needle) -> None:
    from swarm import develop
    from swarm.develop import main

    with pytest.raises(UserInputError) as info:
        develop(**options, data_dir=daily_dir, offline=True, quiet=True, out=tmp_path / "api")
    argv = [
        f"--{k.replace('_', '-')}={','.join(v) if isinstance(v, list) else v}"
        for k, v in options.items()
    ]
    code = main(
        [
            *argv,
            "--data-dir",
            str(daily_dir),
            "--offline",
            "--quiet",
            "--out",
            str(tmp_path / "cli"),
        ]
    )
    assert code == 2 and needle in str(info.value)
    assert capsys.readouterr().err.strip() == f"error: {info.value}"
    assert not (tmp_path / "api").exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_readme_examples_run_as_written(tmp_path, monkeypatch, daily_dir) -> None:
    """Executed as the README prints them, from a folder laid out like the repo's (the corpus
    at ../shared/data/ohlcv/daily), so the section cannot rot."""
    from experiments.run_result import RunResult

    lab = tmp_path / "lab"
    lab.mkdir()
    (tmp_path / "shared" / "data" / "ohlcv").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "ohlcv" / "daily").symlink_to(daily_dir)
    monkeypatch.chdir(lab)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "cache"))
    namespace: dict[str, object] = {}
    for block in readme_python_blocks():
        exec(compile(block, "README.md", "exec"), namespace)
    result, checked = namespace["result"], namespace["checked"]
    assert isinstance(result, RunResult) and isinstance(checked, RunResult)
    assert result.entry_point == "swarm.develop" and checked.entry_point == "gate.judge"
    assert result.run_dir.parent == (lab / "runs").resolve()
    assert result.best is not None and result.best.family and result.best.metrics is not None
    assert result.n_trials >= 1 and result.route_history
    assert len(result.records("backtest")) == 2  # two variants on one symbol, one iteration
    assert result.manifest.argv[:2] == ["--directive", "momentum alpha in tech"]
    assert checked.judge is not None and checked.best is not None


def _api_options(daily_dir: Path, out: Path) -> dict[str, object]:
    return {
        "directive": "momentum",
        "tickers": ["AAPL"],
        "data_dir": daily_dir,
        "start": "2015-01-01",
        "end": "2019-12-31",
        "offline": True,
        "quiet": True,
        "memory_dir": "off",
        "out": out,
    }


@pytest.mark.integration
def test_a_crash_raises_run_failed_with_the_folder_kept(tmp_path, monkeypatch, daily_dir) -> None:
    import swarm.run as swarm_run
    from swarm import develop
    from swarm.errors import RunFailedError

    def crash(prepared):
        raise RuntimeError("boom")

    monkeypatch.setattr(swarm_run, "execute", crash)
    with pytest.raises(RunFailedError) as info:
        develop(**_api_options(daily_dir, tmp_path / "runs"))
    root = info.value.run_dir
    assert (root / "error.json").is_file() and isinstance(info.value.cause, RuntimeError)
    assert str(info.value).startswith("internal error: RuntimeError('boom'); run folder kept")
    assert f"python -m swarm.develop --resume {root}" in str(info.value)


@pytest.mark.integration
def test_ctrl_c_raises_a_keyboard_interrupt_naming_the_folder(
    tmp_path, monkeypatch, daily_dir
) -> None:
    import swarm.run as swarm_run
    from swarm import develop
    from swarm.errors import RunInterrupted

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(swarm_run, "execute", interrupted)
    with pytest.raises(RunInterrupted) as info:
        develop(**_api_options(daily_dir, tmp_path / "runs"))
    assert isinstance(info.value, KeyboardInterrupt) and info.value.run_dir.is_dir()
    assert f"--resume {info.value.run_dir}" in str(info.value)

    monkeypatch.setattr(swarm_run, "prepare", interrupted)
    with pytest.raises(RunInterrupted, match="before the run started") as before:
        develop(**_api_options(daily_dir, tmp_path / "runs"))
    assert before.value.run_dir is None


@pytest.mark.unit
@pytest.mark.corrupts_run_folder  # an unfinished folder on purpose
def test_load_run_says_what_to_pass(tmp_path) -> None:
    from experiments.run_result import RunFolderError
    from swarm import load_run

    with pytest.raises(RunFolderError, match="no manifest.json"):
        load_run(tmp_path)
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(RunFolderError, match="did not finish.*--resume"):
        load_run(tmp_path)


@pytest.mark.unit
def test_the_recorded_argv_parses_back_to_the_same_arguments(tmp_path) -> None:
    """The manifest's argv of an API call is a command line the CLI reads the same way."""
    from datetime import date

    from swarm.api_options import namespace_of
    from swarm.develop import build_parser

    options = {
        "directive": "momentum alpha in tech",
        "tickers": ["AAPL", "MSFT"],
        "start": date(2015, 1, 1),
        "data_dir": str(tmp_path),
        "max_iterations": 1,
        "variants": 2,
        "no_screen": True,
        "mask": False,
        "out": tmp_path / "runs",
    }
    parser = build_parser()
    args, argv = namespace_of(parser, options, api="develop")
    assert vars(parser.parse_args(argv)) == vars(args)
    assert args.tickers == "AAPL,MSFT" and args.start == "2015-01-01" and "--no-mask" in argv
    assert vars(namespace_of(parser, {}, api="develop")[0]) == vars(parser.parse_args([]))
