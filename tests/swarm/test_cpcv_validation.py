"""``--validation cpcv``: bad flags are one line and exit 2; a run with it carries the CPCV
block in verdict.json, the section in report.md and the paths' chart; a walk-forward run
carries none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.check import check_run


def _develop(capsys, tmp_path: Path, daily_dir: Path, *extra: str) -> tuple[int, str, str]:
    from swarm.develop import main

    code = main(
        [
            "--directive",
            "momentum",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--offline",
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.err.strip(), captured.out


@pytest.mark.integration
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--validation", "kfold"], "--validation: 'kfold'; use walk-forward or cpcv"),
        (["--cpcv-groups", "8"], "add --validation cpcv"),
        (["--validation", "cpcv", "--cpcv-groups", "1"], "at least 2"),
        (["--validation", "cpcv", "--cpcv-test-groups", "6"], "between 1 and 5"),
        (["--validation", "cpcv", "--cpcv-test-groups", "0"], "between 1 and 5"),
        (["--validation", "cpcv", "--cpcv-groups", "16", "--cpcv-test-groups", "8"], "splits"),
        (["--validation", "cpcv", "--cpcv-groups", "six"], "--cpcv-groups"),
    ],
)
def test_bad_validation_flags_are_one_line_and_exit_2(capsys, tmp_path, daily_dir, extra, needle):
    code, err, out = _develop(capsys, tmp_path, daily_dir, *extra)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert needle in err and "Traceback" not in err and out == ""
    assert not (tmp_path / "runs").exists()


def _options(daily_dir: Path, out: Path, **extra) -> dict:
    return {
        "directive": "momentum",
        "tickers": ["AAPL", "MSFT"],
        "data_dir": daily_dir,
        "start": "2014-01-01",
        "end": "2019-12-31",
        "offline": True,
        "quiet": True,
        "memory_dir": "off",
        "ledger_dir": "off",
        "max_iterations": 1,
        "variants": 3,
        "no_screen": True,
        "seed": 3,
        "out": out,
        **extra,
    }


@pytest.mark.e2e
@pytest.mark.slow
def test_a_cpcv_run_reports_the_paths_and_a_walk_forward_run_does_not(tmp_path, daily_dir):
    from swarm import develop

    cpcv = develop(**_options(daily_dir, tmp_path / "a", validation="cpcv"))
    plain = develop(**_options(daily_dir, tmp_path / "b"))
    for run in (cpcv, plain):
        problem, _ = check_run(run.run_dir)
        assert problem is None, problem

    block = json.loads((cpcv.run_dir / "verdict.json").read_text())["cpcv"]
    assert block["n_groups"] == 6 and block["n_test_groups"] == 2
    assert block["n_splits"] == 15 and block["n_paths"] == 5 and block["reason"] is None
    assert len(block["path_sharpes"]) == 5 and block["n_variants"] == 3
    assert cpcv.verdict.cpcv is not None and cpcv.verdict.cpcv.median == block["median"]
    report = (cpcv.run_dir / "report.md").read_text()
    assert "## CPCV" in report and "of the 5 paths" in report
    assert "![cpcv_sharpes](charts/cpcv_sharpes.png)" in report
    assert (cpcv.run_dir / "charts/cpcv_sharpes.png").stat().st_size > 0
    manifest = json.loads((cpcv.run_dir / "manifest.json").read_text())
    assert manifest["config"]["validation"] == "cpcv" and "--validation" in manifest["argv"]

    # Walk-forward (the default): nothing of CPCV, and the same search and verdict.
    verdict = json.loads((plain.run_dir / "verdict.json").read_text())
    assert "cpcv" not in verdict and plain.verdict.cpcv is None
    assert "CPCV" not in (plain.run_dir / "report.md").read_text()
    assert not (plain.run_dir / "charts/cpcv_sharpes.png").exists()
    with_block = json.loads((cpcv.run_dir / "verdict.json").read_text())
    del with_block["cpcv"]
    assert with_block == verdict
