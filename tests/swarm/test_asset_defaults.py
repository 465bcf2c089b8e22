"""Defaults per asset class (``swarm.asset_defaults``): crypto's drawdown cap, pairs against
cash, the user's --criteria and --benchmark always first, and the report saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report import _criteria_sources
from swarm.asset_defaults import CRYPTO_CRITERIA, asset_class, defaults_for, is_crypto
from swarm.develop import build_parser, config_from_args

pytestmark = pytest.mark.unit

CRYPTO_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "ohlcv" / "crypto"
DAILY_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "ohlcv" / "daily"


@pytest.mark.parametrize(
    ("ticker", "crypto"),
    [
        ("BTC-USD", True),
        ("ETH-USDT", True),
        ("btc-eur", True),
        ("AAPL", False),
        ("BRK-B", False),  # a share class, not a crypto quote
        ("SPY", False),
        ("-USD", False),
    ],
)
def test_a_crypto_pair_is_told_by_its_quote(ticker: str, crypto: bool) -> None:
    assert is_crypto(ticker) is crypto


def test_the_asset_class_is_crypto_only_when_every_ticker_is() -> None:
    assert asset_class(["BTC-USD", "ETH-USD"]) == "crypto"
    assert asset_class(["BTC-USD", "AAPL"]) == "equity"
    assert asset_class([]) == "equity"


def test_the_table() -> None:
    crypto = defaults_for(["BTC-USD"], [])
    assert (crypto.criteria, crypto.benchmark) == (CRYPTO_CRITERIA, None) and crypto.why
    pairs = defaults_for(["AAPL", "MSFT"], ["pairs"])
    assert (pairs.criteria, pairs.benchmark) == ("", "cash") and pairs.why
    mixed = defaults_for(["AAPL", "MSFT"], ["pairs", "momentum"])  # a long family among them
    assert (mixed.criteria, mixed.benchmark, mixed.why) == ("", None, [])
    equity = defaults_for(["AAPL"], [])
    assert (equity.asset_class, equity.criteria, equity.benchmark) == ("equity", "", None)


def _config(*extra: str, tickers: str = "BTC-USD", data: Path = CRYPTO_DIR):
    if not data.exists():
        pytest.skip(f"corpus not found at {data}")
    argv = [
        "--directive",
        "momentum",
        "--tickers",
        tickers,
        "--data-dir",
        str(data),
        "--start",
        "2018-01-01",
        "--end",
        "2020-12-31",
        *extra,
    ]
    return config_from_args(build_parser().parse_args(argv))


def test_a_crypto_run_gets_the_crypto_drawdown_cap_and_the_report_says_why() -> None:
    config, criteria = _config()
    drawdown = [c for c in criteria.rules if c.metric == "max_drawdown_pct"]
    assert [(c.op, c.threshold) for c in drawdown] == [("<=", 50.0)]
    assert config.asset_class == "crypto" and config.asset_criteria == CRYPTO_CRITERIA
    said = _criteria_sources(config)
    assert "`max_drawdown_pct<=50`" in said and "crypto universe" in said


def test_the_users_criteria_win_over_the_asset_class() -> None:
    _, criteria = _config("--criteria", "max_drawdown_pct<=30")
    drawdown = [c for c in criteria.rules if c.metric == "max_drawdown_pct"]
    assert [(c.op, c.threshold) for c in drawdown] == [("<=", 30.0)]
    _, replaced = _config("--criteria", "sharpe>=0.5", "--criteria-replace")
    assert not [c for c in replaced.rules if c.metric == "max_drawdown_pct"]


def test_an_equity_run_keeps_the_labs_defaults() -> None:
    config, criteria = _config(tickers="AAPL", data=DAILY_DIR)
    drawdown = [c for c in criteria.rules if c.metric == "max_drawdown_pct"]
    assert [(c.op, c.threshold) for c in drawdown] == [("<=", 20.0)]
    assert (config.asset_class, config.asset_criteria, config.asset_notes) == ("equity", "", [])
    assert config.benchmark == "buy-and-hold"


def test_a_pairs_run_is_judged_against_cash_unless_the_user_names_a_benchmark() -> None:
    config, _ = _config("--families", "pairs", tickers="AAPL,MSFT", data=DAILY_DIR)
    assert config.benchmark == "cash"
    named, _ = _config(
        "--families", "pairs", "--benchmark", "SPY", tickers="AAPL,MSFT", data=DAILY_DIR
    )
    assert named.benchmark == "SPY"
