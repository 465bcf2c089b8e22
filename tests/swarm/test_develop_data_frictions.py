"""swarm.develop on broken or short data, and when interrupted: exit 2 naming the file and row,
or --repair's changes in stderr, the manifest and the report; a coverage warning for data that
starts inside the window; Ctrl-C as one line saying what was saved and how to resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.records import DataSummary
from experiments.report import _data_caveats
from swarm import run as swarm_run
from swarm.develop import build_parser, config_from_args, main

pytestmark = pytest.mark.integration


def _csv(folder: Path, symbol: str, days: pd.DatetimeIndex, negative_row: int | None = None):
    close = 100 * np.exp(np.cumsum(np.random.default_rng(7).normal(0, 0.01, len(days))))
    frame = pd.DataFrame(
        {
            "date": days.strftime("%Y-%m-%d"),
            "open": close,
            "high": close * 1.01,
            "low": close * 0.99,
            "close": close,
            "volume": 1e6,
        }
    )
    if negative_row is not None:
        frame.loc[negative_row, "close"] = -3.0
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / f"{symbol}.csv", index=False)


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--directive",
        "momentum",
        "--tickers",
        "TEST",
        "--data-dir",
        str(tmp_path / "data"),
        "--source",
        "csv",
        "--offline",
        "--quiet",
        "--start",
        "2016-01-01",
        "--end",
        "2020-12-31",
        "--benchmark",
        "cash",
        "--memory-dir",
        "off",
        "--out",
        str(tmp_path / "runs"),
        *extra,
    ]


def test_a_negative_close_exits_2_naming_file_row_and_fix(capsys, tmp_path) -> None:
    _csv(tmp_path / "data", "TEST", pd.bdate_range("2016-01-04", "2020-12-31"), 300)
    code = main(_argv(tmp_path))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "TEST.csv" in err and "line 302 (2017-02-27)" in err and "close -3" in err
    assert "--repair" in err
    assert not (tmp_path / "runs").exists()  # refused before any run folder


def test_repair_is_reported_in_stderr_manifest_and_report(capsys, tmp_path) -> None:
    _csv(tmp_path / "data", "TEST", pd.bdate_range("2016-01-04", "2020-12-31"), 300)
    argv = _argv(tmp_path, "--repair")
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = swarm_run.prepare(config, criteria, argv=argv, quiet=True)
    err = capsys.readouterr().err
    assert "[warning] repaired TEST:" in err and "line 302 (2017-02-27)" in err
    manifest = json.loads(prepared.run.path("manifest.json").read_text())
    assert manifest["config"]["repair_data"] is True
    (repair,) = manifest["data"]["symbols"]["TEST"]["repairs"]
    assert (repair["line"], repair["kind"], repair["action"]) == (
        302,
        "non_positive",
        "row dropped",
    )
    caveats = _data_caveats(DataSummary.model_validate(manifest["data"]))
    assert caveats == [
        "- Repaired (`--repair`): TEST line 302 (2017-02-27): close -3 not positive -> row dropped."
    ]


def test_data_starting_inside_the_window_warns_and_reaches_the_report(capsys, tmp_path) -> None:
    _csv(tmp_path / "data", "TEST", pd.bdate_range("2018-01-02", "2020-12-31"))
    argv = _argv(tmp_path)
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = swarm_run.prepare(config, criteria, argv=argv, quiet=True)
    err = capsys.readouterr().err
    assert "[warning] TEST: data starts 2018-01-02" in err
    manifest = json.loads(prepared.run.path("manifest.json").read_text())
    (line,) = _data_caveats(DataSummary.model_validate(manifest["data"]))
    assert line.startswith("- Coverage: TEST: data starts 2018-01-02,")
    assert "of the requested window 2016-01-01..2020-12-31 is covered" in line


def test_ctrl_c_prints_one_line_with_what_was_saved(capsys, tmp_path, monkeypatch) -> None:
    _csv(tmp_path / "data", "TEST", pd.bdate_range("2016-01-04", "2020-12-31"))

    def interrupted(prepared):
        raise KeyboardInterrupt

    monkeypatch.setattr(swarm_run, "execute", interrupted)
    code = main(_argv(tmp_path))
    captured = capsys.readouterr()
    root = captured.out.strip()
    assert code == 130 and Path(root).is_dir()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("interrupted: the manifest is saved in " + root)
    assert f"python -m swarm.develop --resume {root}" in line


def test_ctrl_c_before_the_run_starts(capsys, tmp_path, monkeypatch) -> None:
    _csv(tmp_path / "data", "TEST", pd.bdate_range("2016-01-04", "2020-12-31"))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(swarm_run, "prepare", interrupted)
    code = main(_argv(tmp_path))
    captured = capsys.readouterr()
    assert code == 130 and captured.out == ""
    assert captured.err.strip().splitlines() == [
        "interrupted before the run started: nothing to resume; run the same command again"
    ]
