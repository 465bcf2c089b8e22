"""The alternative data a run reads by default: the nearest folder at or above ``--data-dir``
laid out like the corpus (``swarm.cli_args.resolve_alt_data``), said on stderr; ``--alt-data
off`` opts out, and a given folder wins. Develop, research and analyze share the rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DAILY_DIR, SHARED_DATA

from swarm.cli_args import alt_data_line, resolve_alt_data
from swarm.develop import build_parser
from swarm.develop_config import config_from_args
from swarm.errors import UserInputError

pytestmark = pytest.mark.unit


def _layout(root: Path, folders: tuple[str, ...] = ("fundamentals", "analyst")) -> Path:
    for name in folders:
        (root / name).mkdir(parents=True)
    return root


def test_the_nearest_corpus_layout_above_the_data_dir_is_found(tmp_path):
    outer = _layout(tmp_path / "outer")
    inner = _layout(outer / "mid" / "inner", ("news", "social"))
    daily = inner / "ohlcv" / "daily"
    daily.mkdir(parents=True)
    assert resolve_alt_data(None, daily) == (inner.resolve(), True)
    # One corpus folder is not a layout: the search goes on up.
    lone = outer / "other" / "options"
    lone.mkdir(parents=True)
    assert resolve_alt_data(None, lone / "..") == (outer.resolve(), True)


def test_off_a_given_folder_and_no_layout(tmp_path):
    daily = _layout(tmp_path / "data") / "daily"
    daily.mkdir()
    assert resolve_alt_data("off", daily) == (None, False)
    assert resolve_alt_data(Path("off"), daily) == (None, False)
    given = _layout(tmp_path / "given", ("news", "options"))
    assert resolve_alt_data(given, daily) == (given.resolve(), False)
    bare = tmp_path / "bare" / "daily"
    bare.mkdir(parents=True)
    assert resolve_alt_data(None, bare) == (None, False)
    assert resolve_alt_data(None, None) == (None, False)
    with pytest.raises(UserInputError, match=r"--alt-data: .*missing is not a folder.*or off"):
        resolve_alt_data(tmp_path / "missing", daily)


def test_the_progress_line_says_where_the_folder_came_from(tmp_path):
    assert alt_data_line(None, False) is None
    found = alt_data_line(tmp_path, True)
    assert found is not None and "--alt-data off leaves it out" in found
    assert alt_data_line(tmp_path, False) == f"alt data: {tmp_path} (--alt-data)"


def _config(*extra: str):
    args = [
        "--directive",
        "momentum alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(DAILY_DIR),
        "--offline",
        *extra,
    ]
    return config_from_args(build_parser().parse_args(args))[0]


def test_a_develop_run_on_the_corpus_reads_the_corpus_alt_data_unless_off():
    if not DAILY_DIR.is_dir():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    found = _config()
    assert found.alt_data == SHARED_DATA.resolve() and found.alt_data_found
    off = _config("--alt-data", "off")
    assert off.alt_data is None and not off.alt_data_found
    given = _config("--alt-data", str(SHARED_DATA))
    assert given.alt_data == SHARED_DATA.resolve() and not given.alt_data_found


@pytest.mark.integration
def test_analyze_reads_the_corpus_alt_data_by_default_and_not_when_off(tmp_path):
    """The desk's fundamentals and sentiment analysts speak on the corpus by default (rows
    known by the date's close); with --alt-data off they abstain, as before."""
    if not DAILY_DIR.is_dir():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    notes = {}
    for label, extra in (("default", []), ("off", ["--alt-data", "off"])):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "swarm.analyze",
                "--ticker",
                "AAPL",
                "--date",
                "2015-06-01",
                "--data-dir",
                str(DAILY_DIR),
                "--memory-dir",
                "off",
                "--out",
                str(tmp_path / label),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        folder = Path(done.stdout.strip().splitlines()[-1])
        decision = json.loads((folder / "decision.json").read_text())
        notes[label] = {n["role"]: n["abstained"] for n in decision["analysts"]}
        manifest = json.loads((folder / "manifest.json").read_text())
        if label == "default":
            assert "alt data: " in done.stderr and "--alt-data off" in done.stderr
            assert manifest["alt_data"] == str(SHARED_DATA.resolve())
            assert manifest["alt_data_found"] is True
        else:
            assert "alt data: " not in done.stderr and manifest["alt_data"] is None
    assert notes["default"]["fundamentals"] is False and notes["default"]["sentiment"] is False
    assert notes["off"]["fundamentals"] is True and notes["off"]["sentiment"] is True


def test_the_dry_run_plan_names_the_alt_data(tmp_path, capsys, monkeypatch):
    from swarm.develop import main

    if not DAILY_DIR.is_dir():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    argv = ["--directive", "momentum in tech", "--data-dir", str(DAILY_DIR), "--offline"]
    assert main([*argv, "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["alt_data"] == str(SHARED_DATA.resolve()) and plan["alt_data_found"] is True
    assert main([*argv, "--dry-run", "--alt-data", "off"]) == 0
    assert json.loads(capsys.readouterr().out)["alt_data"] is None
