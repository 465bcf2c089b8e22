"""``--borrow-cost`` and ``--sizing`` from the command line: bad values are one line naming the
option and the fix (CLI, Python API, judge), good ones are recorded in the run's config, and
``--sizing`` pins every catalogue spec the run writes (``swarm.sizing``)."""

from __future__ import annotations

import pytest

from strategies.families import spec_from_template
from strategies.portfolio import portfolio_spec
from strategies.spec import Family, PortfolioFamily
from swarm.errors import UserInputError
from swarm.sizing import normalised, parse_sizing, pin_proposals, pin_sizing


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "want"),
    [
        (None, None),
        ("fixed_fraction:0.5", ("fixed_fraction", 0.5)),
        ("Fixed-Fraction:0.95", ("fixed_fraction", 0.95)),
        ("volatility_target", ("volatility_target", None)),
        ("fixed_risk:0.1", ("fixed_risk", 0.1)),
    ],
)
def test_sizing_text_is_parsed(text, want) -> None:
    assert parse_sizing(text) == want


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kelly", "names no sizing block"),
        ("fixed_fraction:1.5", "0.1 to 0.95 in steps of 0.05"),
        ("fixed_fraction:0.33", "on the grid"),
        ("fixed_fraction:half", "is not a share of equity"),
        ("fixed_fraction:nan", "on the grid"),
    ],
)
def test_bad_sizing_is_one_line_naming_the_option(text, needle) -> None:
    with pytest.raises(UserInputError) as info:
        parse_sizing(text)
    message = str(info.value)
    assert message.startswith("--sizing: ") and needle in message and "\n" not in message


@pytest.mark.unit
def test_pinning_sets_the_block_and_fraction_of_a_catalogue_spec_only() -> None:
    spec = spec_from_template(Family.MOMENTUM, 0, long_short=True)
    pinned = pin_sizing(spec, "fixed_fraction:0.5")
    assert pinned.sizing == "fixed_fraction"
    assert pinned.parameters["position_fraction"] == 0.5
    assert "target_vol" not in pinned.parameters and "risk_pct" not in pinned.parameters
    assert pinned.entry == spec.entry and pinned.exits == spec.exits
    vol = pin_sizing(spec, "volatility_target")
    assert vol.sizing == "volatility_target" and "target_vol" in vol.parameters
    assert pin_sizing(spec, None) is spec
    book = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM)
    assert pin_sizing(book, "fixed_fraction:0.5") is book  # target weights size themselves


@pytest.mark.unit
def test_proposals_the_pinning_makes_one_trial_run_once() -> None:
    from swarm.agents.strategy_dev import Proposal

    a = spec_from_template(Family.MOMENTUM, 0)
    b = pin_sizing(a, "volatility_target")  # the same spec but for its sizing
    tried = pin_sizing(spec_from_template(Family.TREND, 0), "fixed_fraction:0.5")
    props = [Proposal(a, None, "a"), Proposal(b, None, "b"), Proposal(tried, None, "t")]
    out = pin_proposals(props, "fixed_fraction:0.5", seen={tried.trial_key()}, own_code=())
    assert [p.why for p in out] == ["a"]
    assert out[0].spec.parameters["position_fraction"] == 0.5
    kept = pin_proposals(props, "fixed_fraction:0.5", seen=(), own_code={b.trial_key()})
    assert kept[1].spec is b  # an LLM's own code is not re-rendered
    assert pin_proposals(props, None, seen=(), own_code=()) == props


# ---------------------------------------------------------------------------- the CLIs

BAD_BORROW = ["-1", "150", "abc", "nan"]


def _develop(capsys, tmp_path, daily_dir, *extra):
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
        *((["--borrow-cost", v], "--borrow-cost") for v in BAD_BORROW),
        (["--sizing", "kelly"], "--sizing"),
        (["--sizing", "fixed_fraction:2"], "--sizing"),
    ],
)
def test_develop_refuses_a_bad_value_in_one_line(capsys, tmp_path, daily_dir, extra, needle):
    code, err, out = _develop(capsys, tmp_path, daily_dir, *extra)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert needle in err and "Traceback" not in err and out == ""
    if needle == "--borrow-cost":
        assert "a number from 0 to 100" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
@pytest.mark.parametrize("bad", [-1.0, 101, "abc", float("inf")])
def test_the_python_api_raises_the_cli_message(tmp_path, daily_dir, bad) -> None:
    from swarm import develop

    with pytest.raises(UserInputError, match="^--borrow-cost: .*a number from 0 to 100"):
        develop(
            directive="momentum",
            tickers="AAPL",
            data_dir=daily_dir,
            offline=True,
            quiet=True,
            out=tmp_path / "api",
            borrow_cost=bad,
        )
    assert not (tmp_path / "api").exists()


@pytest.mark.integration
def test_the_run_config_records_both(daily_dir) -> None:
    from swarm.develop import build_parser
    from swarm.develop_config import config_from_args

    args = build_parser().parse_args(
        [
            "--directive",
            "momentum",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--offline",
            "--borrow-cost",
            "2.5",
            "--sizing",
            "Fixed_Fraction:0.50",
        ]
    )
    config, _ = config_from_args(args)
    dumped = config.model_dump(mode="json")  # what manifest.json records
    assert dumped["costs"]["borrow_pct"] == 2.5 and dumped["sizing"] == "fixed_fraction:0.5"
    assert normalised(dumped["sizing"]) == dumped["sizing"]
    plain, _ = config_from_args(
        build_parser().parse_args(
            [
                "--directive",
                "momentum",
                "--tickers",
                "AAPL",
                "--data-dir",
                str(daily_dir),
                "--offline",
            ]
        )
    )
    assert plain.costs.borrow_pct == 0.0 and plain.sizing is None


@pytest.mark.unit
@pytest.mark.parametrize("bad", BAD_BORROW)
def test_the_judge_cli_refuses_a_bad_borrow_cost_in_one_line(capsys, bad) -> None:
    from gate.judge import main

    with pytest.raises(SystemExit) as info:
        main(
            [
                "x.py",
                "--data-dir",
                ".",
                "--tickers",
                "AAPL",
                "--start",
                "2018-01-01",
                "--end",
                "2019-01-01",
                f"--borrow-cost={bad}",
            ]
        )
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1
    assert "--borrow-cost" in err and "a number from 0 to 100" in err, err


@pytest.mark.unit
@pytest.mark.parametrize("bad", [-0.5, 100.5, "abc", None])
def test_the_judge_api_refuses_a_bad_borrow_cost(tmp_path, bad) -> None:
    from gate.judge import judge
    from gate.judge_input import JudgeInputError

    with pytest.raises(JudgeInputError, match="^--borrow-cost: "):
        judge(
            tmp_path / "x.py",
            data_dir=tmp_path,
            tickers="AAPL",
            start="2018-01-01",
            end="2019-01-01",
            borrow_cost=bad,
            out=tmp_path / "runs",
        )
    assert not (tmp_path / "runs").exists()


@pytest.mark.unit
def test_the_report_says_the_borrow_fee() -> None:
    from datetime import date

    from backtest.contracts import CostModel
    from experiments.report import _borrow_clause
    from swarm.config import RunConfig

    def config(**costs) -> RunConfig:
        return RunConfig(
            directive="x",
            tickers=["AAPL"],
            universe_source="--tickers",
            preferred_families=[],
            start=date(2020, 1, 1),
            end=date(2021, 1, 1),
            costs=CostModel(**costs),
        )

    assert "no borrow fee" in _borrow_clause(config(commission_pct=0.1))
    said = _borrow_clause(config(borrow_pct=2.5))
    assert "2.5% a year" in said and "shorts" in said


@pytest.mark.e2e
@pytest.mark.slow
def test_a_run_writes_the_pinned_sizing_and_the_borrow_fee_into_its_folder(
    tmp_path, daily_dir
) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "momentum long short",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2014-01-01",
            "--end",
            "2018-12-31",
            "--variants",
            "3",
            "--folds",
            "1",
            "--max-iterations",
            "1",
            "--executor",
            "serial",
            "--offline",
            "--quiet",
            "--no-screen",
            "--memory-dir",
            "off",
            # Neither alternative data (the research's tweets and headlines, scored each run)
            # nor figures: the test reads the manifest, the variants and report.md's text.
            "--alt-data",
            "off",
            "--no-figures",
            "--borrow-cost",
            "3",
            "--sizing",
            "fixed_fraction:0.5",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={
            **__import__("os").environ,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_DATA_HOME": str(tmp_path / "cache"),
        },
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    # the folder from --out, not stdout: this --executor serial run once exited 0 with an
    # empty stdout (not this change's; see the branch's report)
    (run,) = [p for p in Path(tmp_path).iterdir() if (p / "manifest.json").exists()]
    config = json.loads((run / "manifest.json").read_text())["config"]
    assert config["costs"]["borrow_pct"] == 3.0 and config["sizing"] == "fixed_fraction:0.5"
    variants = json.loads((run / "variants.json").read_text())
    rows = variants if isinstance(variants, list) else list(variants.values())
    specs = [
        r["spec"] for r in rows if r["spec"]["sizing"] not in ("target_weights", "risk_engine")
    ]
    assert specs and all(s["sizing"] == "fixed_fraction" for s in specs)
    assert all(s["parameters"]["position_fraction"] == 0.5 for s in specs)
    assert "borrow fee of 3% a year" in (run / "report.md").read_text()
