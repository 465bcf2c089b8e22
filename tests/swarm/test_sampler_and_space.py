"""``--sampler`` and ``--param-space`` from the command line: a bad file is one error line and
exit 2; ``--help`` lists the samplers; a small run with TPE inside a user space screens every
drawn set as a trial, inside the space, and records the space in its manifest (which is what
``--resume`` reads back)."""

from __future__ import annotations

import json

import pytest

from experiments.tracker import read_records
from swarm.cli_args import default_deflation, default_screen_size
from swarm.config import RunConfig
from swarm.develop import build_parser, config_from_args, main
from swarm.errors import UserInputError
from swarm.run import execute, prepare

SPACE = """
[momentum.roc_period]
low = 10
high = 40
step = 5

[momentum.trend_period]
low = 60
high = 150

[breakout.donchian_period]
low = 30
high = 80

[trend.fast_period]
low = 10
high = 30

[mean_reversion.stop_loss_pct]
low = 0.05
high = 0.1

[volatility.bb_period]
low = 14
high = 30
"""


@pytest.mark.integration
def test_a_bad_space_file_exits_2_with_one_line(capsys, tmp_path, daily_dir):
    bad = tmp_path / "space.toml"
    bad.write_text("[momentum.roc_period]\nlow = 60\nhigh = 30\n")
    code = main(
        [
            *("--directive", "momentum", "--tickers", "AAPL", "--data-dir", str(daily_dir)),
            *("--param-space", str(bad), "--out", str(tmp_path / "runs"), "--offline", "--quiet"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("error: --param-space: ") and str(bad) in err
    assert "[momentum.roc_period]: low 60 > high 30" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.unit
def test_help_lists_the_samplers_and_tpe_needs_the_screen():
    text = build_parser().format_help()
    assert "--sampler {random,tpe}" in text and "--param-space FILE" in text
    base = ["--directive", "x", "--tickers", "AAPL"]
    with pytest.raises(UserInputError, match="--sampler tpe: .* the screen is off"):
        config_from_args(build_parser().parse_args([*base, "--sampler", "tpe", "--no-screen"]))
    config, _ = config_from_args(build_parser().parse_args(base))
    assert config.sampler == "random" and config.param_space.ranges == {}


@pytest.mark.unit
def test_a_tpe_run_is_deflated_by_every_trial_unless_told_otherwise():
    pytest.importorskip("optuna")
    assert default_deflation("random") == "effective" and default_deflation("tpe") == "raw"
    base = ["--directive", "x", "--tickers", "AAPL"]

    def deflated_by(*extra: str) -> str:
        return config_from_args(build_parser().parse_args([*base, *extra]))[0].deflate_by

    assert deflated_by() == "effective"
    assert deflated_by("--sampler", "tpe") == "raw"
    assert deflated_by("--sampler", "tpe", "--deflate-by", "effective") == "effective"
    assert deflated_by("--deflate-by", "raw") == "raw"


@pytest.mark.unit
def test_tpe_screens_fewer_sets_by_default_and_as_many_as_asked():
    pytest.importorskip("optuna")
    assert default_screen_size("random") == 500 and default_screen_size("tpe") == 100
    base = ["--directive", "x", "--tickers", "AAPL"]

    def size(*extra: str) -> int:
        return config_from_args(build_parser().parse_args([*base, *extra]))[0].screen_size

    assert size() == 500 and size("--sampler", "tpe") == 100
    assert size("--sampler", "tpe", "--screen-size", "400") == 400
    assert size("--screen-size", "64") == 64 and size("--no-screen") == 0
    with pytest.raises(UserInputError, match="--screen-size: -1 must be between"):
        size("--sampler", "tpe", "--screen-size", "-1")
    assert "100 with --sampler tpe" in " ".join(build_parser().format_help().split())
    assert "default with --sampler tpe" in " ".join(build_parser().format_help().split())


@pytest.mark.e2e
@pytest.mark.slow
def test_a_tpe_run_inside_a_user_space(tmp_path, daily_dir):
    pytest.importorskip("optuna")
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    argv = [
        *("--directive", "momentum alpha in tech", "--tickers", "AAPL"),
        *("--data-dir", str(daily_dir), "--start", "2013-01-01", "--end", "2018-12-31"),
        *("--variants", "3", "--folds", "2", "--max-iterations", "3", "--workers", "1"),
        *("--seed", "2", "--criteria", "sharpe>=0.8,min_trades>=10,dsr>=0.5"),
        *("--criteria-replace", "--offline", "--memory-dir", "off", "--families", "momentum"),
        *("--out", str(tmp_path / "runs"), "--screen-size", "30", "--sampler", "tpe"),
        *("--param-space", str(space)),
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    run = prepared.run.root
    manifest = json.loads((run / "manifest.json").read_text())
    recorded = RunConfig.model_validate(manifest["config"])
    assert recorded.sampler == "tpe" and recorded.param_space == config.param_space
    records = list(read_records(run / "experiments.jsonl"))
    screens = [r for r in records if r["kind"] == "screen"]
    assert screens, "the run never tuned through the screen"
    for rec in screens:
        assert rec["n_sets"] == len(rec["trials"]) == 30
    variants = json.loads((run / "variants.json").read_text())
    ranged = 0
    for rec in screens:
        family = variants[rec["parent_id"]]["spec"]["family"]
        for t in rec["trials"]:  # inside the user's grid of the parent's family
            for name, r in config.param_space.ranges.get(family, {}).items():
                if name in t["parameters"]:
                    ranged += 1
                    assert r.snap(t["parameters"][name]) == t["parameters"][name], (name, t)
    assert ranged  # the space was in play
    assert any(" | screen tpe " in v["spec"]["name"] for v in variants.values())
    verdict = json.loads((run / "verdict.json").read_text())
    screened = {t["trial_key"] for rec in screens for t in rec["trials"]}
    assert verdict["n_trials"] >= len(screened) + 3  # every drawn set counts, and the seeds
    # TPE's draws crowd, so its default deflation counts every trial, and the report says why
    assert verdict["deflated_by"] == "raw"
    report = " ".join((run / "report.md").read_text().split())
    assert "The deflated Sharpe uses the raw count. TPE (`--sampler tpe`) crowds" in report
