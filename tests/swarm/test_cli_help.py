"""``--help`` of the lab's entry points documents every option, and the ones with a fixed set
of values name them (argparse's ``choices`` would replace our one-line errors, so the help
text carries them)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

from backtest.run import build_parser as run_parser
from experiments.export import build_parser as export_parser
from swarm.develop import build_parser as develop_parser

pytestmark = pytest.mark.unit

PARSERS = {"develop": develop_parser, "backtest.run": run_parser, "export": export_parser}

# Options with a fixed set of values, and the values their help must name.
CHOICES = {
    "--timeframe": ("1d", "1h"),
    "--source": ("auto", "yfinance", "csv", "synthetic"),
    "--prices": ("raw", "adjusted"),
    "--executor": ("process", "serial", "ray"),
    "--llm-structured": ("auto", "json_schema", "function_calling"),
    "--deflate-by": ("effective", "raw"),
    "--sizing": ("fixed_fraction", "fixed_risk", "volatility_target"),
    "--families": ("momentum", "cross_sectional_momentum", "decision_pipeline", "vix_regime"),
}


def _options(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {
        (a.option_strings[-1] if a.option_strings else a.dest): a.help or ""
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
    }


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_has_help(name: str) -> None:
    missing = [opt for opt, text in _options(PARSERS[name]()).items() if not text.strip()]
    assert missing == []


def test_fixed_value_options_name_their_choices() -> None:
    options = _options(develop_parser())
    for option, values in CHOICES.items():
        assert all(v in options[option] for v in values), option
    assert "--repair" in options and "--repair" in _options(run_parser())


@pytest.mark.integration
def test_export_help_runs_from_the_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "experiments.export", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "RUN_DIR" in out and "--variant ID" in out and "NOT A WINNER" in out
