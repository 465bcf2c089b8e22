"""Issue 27: ``--help`` of every entry point taking ``--criteria`` says it adds to the
defaults and that ``--criteria-replace`` replaces them; report.md says which bars are whose."""

from __future__ import annotations

import argparse

import pytest

from experiments.records import DataSummary, Verdict
from experiments.report import render_report
from gate.criteria import criteria_from_text
from gate.judge import build_parser as judge_parser
from swarm.calibrate import build_parser as calibrate_parser
from swarm.config import RunConfig
from swarm.develop import build_parser as develop_parser

pytestmark = pytest.mark.unit


def _help(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {a.option_strings[-1]: a.help or "" for a in parser._actions if a.option_strings}


@pytest.mark.parametrize("parser", [develop_parser, judge_parser, calibrate_parser])
def test_help_states_both_semantics(parser) -> None:
    options = _help(parser())
    assert "over the defaults" in options["--criteria"]
    assert "alpha_t>=2" in options["--criteria"] and "min_trades>=30" in options["--criteria"]
    assert "replace the default rules" in options["--criteria-replace"]
    text = parser().format_help()
    assert "--criteria-replace" in text


def test_the_flag_parses_and_defaults_off() -> None:
    assert develop_parser().parse_args(["--directive", "x"]).criteria_replace is False
    args = develop_parser().parse_args(["--criteria", "sharpe>=1", "--criteria-replace"])
    assert args.criteria_replace is True


METRICS = {
    "sharpe": 1.1,
    "max_drawdown_pct": 12.0,
    "win_rate_pct": 51.0,
    "profit_factor": 1.4,
    "n_trades": 40,
    "n_obs": 500,
}


def _report(config_extra: dict) -> str:
    data = {
        "split": {
            "insample_start": "2013-01-01",
            "insample_end": "2017-01-01",
            "holdout_start": "2017-01-02",
            "holdout_end": "2018-12-31",
        },
        "folds": [
            {"index": 0, "warmup_start": "2013-01-01", "start": "2013-01-02", "end": "2014-01-01"}
        ],
        "symbols": {"AAPL": {"source": "csv", "sha256": "f" * 64}},
    }
    config = {
        "directive": "momentum",
        "tickers": ["AAPL"],
        "universe_source": "--tickers",
        "timeframe": "1d",
        "start": "2013-01-01",
        "end": "2018-12-31",
        "seed": 4,
        "costs": {"commission_pct": 0.1, "slippage_pct": 0.05},
        **config_extra,
    }
    verdict = {
        "verdict": "ABANDON",
        "reason": "limit",
        "iterations": 1,
        "best_variant": None,
        "n_backtests": 1,
        "n_trials": 1,
        "score_threshold": 0.6,
        "dsr_threshold": 0.95,
        "route_history": [],
        "figures": {},
    }
    text = config.get("criteria_text") or ""
    return render_report(
        run_id="r1",
        config=RunConfig.model_validate({"preferred_families": []} | config),
        criteria=criteria_from_text(text, replace=config.get("criteria_replace", True)),
        verdict=Verdict.model_validate(verdict),
        decisions=[],
        synthesis=None,
        data=DataSummary.model_validate(data),
        best_variant=None,
        best_eval=None,
        figures={},
    )


def _line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("- Gate criteria:"))


def test_report_line_without_criteria_names_the_defaults() -> None:
    line = _line(_report({"criteria_text": None, "criteria_replace": False}))
    assert line.startswith("- Gate criteria: the defaults `sharpe>=1`, `max_drawdown_pct<=20`")
    assert "`alpha_t>=2`, `min_trades>=30`" in line
    assert "`--criteria` adds to or overrides them, `--criteria-replace` replaces them" in line


def test_report_line_with_criteria_says_which_bars_are_yours() -> None:
    line = _line(_report({"criteria_text": "sharpe>=0.8,beta<=0.6", "criteria_replace": False}))
    assert line.startswith("- Gate criteria: yours `sharpe>=0.8`, `beta<=0.6` over the defaults")
    assert "overriding `sharpe>=1`" in line
    assert "from the defaults `max_drawdown_pct<=20`" in line and "`alpha_t>=2`" in line
    assert "`--criteria-replace` would replace them" in line


def test_report_line_with_replace_says_the_defaults_were_dropped() -> None:
    config = {"criteria_text": "sharpe>=0.8,min_trades>=10", "criteria_replace": True}
    line = _line(_report(config))
    assert line.startswith("- Gate criteria: yours `sharpe>=0.8`, `min_trades>=10` in place of")
    assert "(`--criteria-replace`; dropped `sharpe>=1`" in line and "`alpha_t>=2`" in line
    assert "from the defaults `score>=0.6`" in line


def test_report_of_a_run_before_the_option_says_its_text_replaced_the_defaults() -> None:
    # --resume reads such a run's manifest with criteria_replace=True (swarm.run_resume).
    line = _line(_report({"criteria_text": "sharpe>=1", "criteria_replace": True}))
    assert line.startswith("- Gate criteria: yours `sharpe>=1` in place of the default rules")
