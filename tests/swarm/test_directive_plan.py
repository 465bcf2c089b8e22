"""Directive -> plan, resolved against the data: a table of directives and the plans they make.

The data folders are tiny CSVs laid out as the corpus is (``ohlcv/daily``, ``ohlcv/crypto``
with Yahoo, Bitstamp and Binance names, a GICS table in ``fundamentals/``), so the universe
each directive resolves to depends on what the folder holds, as it does in a run.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from strategies.taxonomy import within_directive
from swarm.directive import DirectiveError, parse_directive
from swarm.plan import build_plan, plan_summary

pytestmark = pytest.mark.unit

TECH = ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]
SEMIS = ["NVDA", "AMD", "INTC", "QCOM", "TXN", "AVGO"]
ETFS = ["SPY", "QQQ", "IWM", "DIA"]
DAILY = [
    *TECH,
    "AMD",
    "INTC",
    "QCOM",
    "TXN",
    "AVGO",
    "ORCL",
    "ADBE",
    "CRM",
    "FB",
    "NFLX",
    "CSCO",
    "IBM",
    *ETFS,
    "TQQQ",
    "GSPC",
    "VIX",
]
GICS_ROWS = [
    ("KEY", "Financials", "Regional Banks"),
    ("RF", "Financials", "Regional Banks"),
    ("JPM", "Financials", "Diversified Banks"),
    ("XOM", "Energy", "Integrated Oil & Gas"),
    ("NVDA", "Information Technology", "Semiconductors"),
]

DAY = "date,open,high,low,close,volume\n2020-01-02,1,2,0.5,1.5,100\n2020-01-03,1.5,2,1,1.8,100\n"
HOUR = (
    "date,open,high,low,close,volume\n2020-01-02 00:00:00,1,2,0.5,1.5,100\n"
    "2020-01-02 01:00:00,1.5,2,1,1.8,100\n"
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    daily = root / "ohlcv" / "daily"
    crypto = root / "ohlcv" / "crypto"
    banks = root / "ohlcv" / "banks"
    hourly = root / "ohlcv" / "hourly"
    for d in (daily, crypto, banks, hourly):
        d.mkdir(parents=True)
    for s in DAILY:
        (daily / f"{s}.csv").write_text(DAY)
    for name in ("BTC-USD", "ETH-USD", "BTCUSD_bitstamp_1d"):
        (crypto / f"{name}.csv").write_text(DAY)
    for name in ("BTCUSD_bitstamp_1h", "BTCUSDT_binance_1h", "ETHUSDT_binance_1h"):
        (crypto / f"{name}.csv").write_text(HOUR)
    for s in ("KEY", "RF"):
        (banks / f"{s}.csv").write_text(DAY)
    for s in ("AAPL", "MSFT"):  # plain names holding hourly bars
        (hourly / f"{s}.csv").write_text(HOUR)
    fundamentals = root / "fundamentals"
    fundamentals.mkdir()
    lines = ["ticker,security,sec_filings,gics_sector,gics_sub_industry"]
    lines += [f"{t},{t} Inc,reports,{sector},{sub}" for t, sector, sub in GICS_ROWS]
    (fundamentals / "sp500_securities_gics.csv").write_text("\n".join(lines) + "\n")
    return root


def plan_for(corpus: Path, directive: str, folder: str = "daily", **kw):
    return build_plan(
        directive,
        data_dir=corpus / "ohlcv" / folder,
        source="csv",
        offline=True,
        cache_dir=corpus / "no-cache",
        **kw,
    )


# (directive, folder, universe, timeframe, families, benchmark, scope)
TABLE = [
    ("momentum alpha in tech", "daily", TECH, "1d", ["momentum"], None, []),
    ("alpha", "daily", TECH, "1d", [], None, []),
    ("find alpha", "daily", TECH, "1d", [], None, []),
    ("Mean reversion on semis", "daily", SEMIS, "1d", ["mean_reversion"], None, []),
    ("mean reversion in semiconductors", "daily", SEMIS, "1d", ["mean_reversion"], None, []),
    ("breakout in chips", "daily", SEMIS, "1d", ["breakout"], None, []),
    ("semiconductors", "daily", SEMIS, "1d", [], None, []),
    (
        "momentum in software",
        "daily",
        ["MSFT", "ORCL", "ADBE", "CRM"],
        "1d",
        ["momentum"],
        None,
        [],
    ),
    (
        "trend following in internet stocks",
        "daily",
        ["GOOGL", "AMZN", "FB", "NFLX"],
        "1d",
        ["trend"],
        None,
        [],
    ),
    ("ETFs", "daily", ETFS, "1d", [], None, []),
    ("low volatility ETFs", "daily", ETFS, "1d", ["low_volatility"], None, ["portfolio"]),
    ("low-vol stocks in tech", "daily", TECH, "1d", ["low_volatility"], None, ["portfolio"]),
    ("minimum volatility tech", "daily", TECH, "1d", ["low_volatility"], None, ["portfolio"]),
    (
        "trend following on US indices",
        "daily",
        ETFS,
        "1d",
        ["trend", "index_regime"],
        None,
        [],
    ),
    ("bitcoin", "crypto", ["BTC-USD"], "1d", [], None, []),
    ("crypto momentum", "crypto", ["BTC-USD", "ETH-USD"], "1d", ["momentum"], None, []),
    ("ether mean reversion", "crypto", ["ETH-USD"], "1d", ["mean_reversion"], None, []),
    ("hourly breakout on BTC", "crypto", ["BTCUSD"], "1h", ["breakout"], None, []),
    (
        "intraday momentum in crypto",
        "crypto",
        ["BTCUSD", "ETHUSDT"],
        "1h",
        ["momentum"],
        None,
        [],
    ),
    ("1h trend on ethereum", "crypto", ["ETHUSDT"], "1h", ["trend"], None, []),
    ("daily bitcoin breakout", "crypto", ["BTC-USD"], "1d", ["breakout"], None, []),
    (
        "hourly momentum on AAPL and MSFT",
        "hourly",
        ["AAPL", "MSFT"],
        "1h",
        ["momentum"],
        None,
        [],
    ),
    (
        "pairs trading MSFT GOOGL",
        "daily",
        ["MSFT", "GOOGL"],
        "1d",
        ["pairs"],
        None,
        ["portfolio"],
    ),
    ("pairs trading in semis", "daily", SEMIS, "1d", ["pairs"], None, ["portfolio"]),
    (
        "cross-sectional momentum in tech",
        "daily",
        TECH,
        "1d",
        ["cross_sectional_momentum", "momentum"],
        None,
        ["portfolio"],
    ),
    (
        "relative strength rotation of indices",
        "daily",
        ETFS,
        "1d",
        ["rotation", "cross_sectional_momentum"],
        None,
        ["portfolio"],
    ),
    (
        "breakout on $AAPL and MSFT hourly",
        "hourly",
        ["AAPL", "MSFT"],
        "1h",
        ["breakout"],
        None,
        [],
    ),
    (
        "trend following with a volatility squeeze",
        "daily",
        TECH,
        "1d",
        ["trend", "volatility"],
        None,
        [],
    ),
    ("momentum in tech vs SPY", "daily", TECH, "1d", ["momentum"], "SPY", []),
    ("trend on AAPL MSFT against QQQ", "daily", ["AAPL", "MSFT"], "1d", ["trend"], "QQQ", []),
    ("absolute return momentum on AAPL", "daily", ["AAPL"], "1d", ["momentum"], "cash", []),
    (
        "market-neutral mean reversion in semis",
        "daily",
        SEMIS,
        "1d",
        ["mean_reversion"],
        "cash",
        ["market_neutral"],
    ),
    (
        "breakout on NVDA vs buy and hold",
        "daily",
        ["NVDA"],
        "1d",
        ["breakout"],
        "buy-and-hold",
        [],
    ),
    ("long-only momentum in tech", "daily", TECH, "1d", ["momentum"], None, ["long_only"]),
    (
        "long/short cross-sectional momentum in semis",
        "daily",
        SEMIS,
        "1d",
        ["cross_sectional_momentum", "momentum"],
        None,
        ["long_short", "portfolio"],
    ),
    (
        "momentum in tech, regime filtered",
        "daily",
        TECH,
        "1d",
        ["momentum", "index_regime"],
        None,
        [],
    ),
    (
        "agents decide on AAPL and MSFT",
        "daily",
        ["AAPL", "MSFT"],
        "1d",
        ["decision_pipeline"],
        None,
        [],
    ),
    ("time-series momentum on QQQ", "daily", ["QQQ"], "1d", ["momentum"], None, []),
    (
        "cross-sectional momentum with monthly rebalancing in tech",
        "daily",
        TECH,
        "1d",
        ["cross_sectional_momentum", "momentum"],
        None,
        ["portfolio"],
    ),
    # The alternative-data families (swarm/families/), by their words.
    ("earnings drift in tech", "daily", TECH, "1d", ["earnings_drift"], None, []),
    ("post-earnings announcement drift in tech", "daily", TECH, "1d", ["earnings_drift"], None, []),
    ("analyst upgrades in tech", "daily", TECH, "1d", ["analyst_revision"], None, []),
    ("analyst revisions in tech", "daily", TECH, "1d", ["analyst_revision"], None, []),
    ("tweet sentiment momentum in tech", "daily", TECH, "1d", ["sentiment_momentum"], None, []),
    ("news sentiment in tech", "daily", TECH, "1d", ["sentiment_momentum"], None, []),
    ("contrarian put/call regime in tech", "daily", TECH, "1d", ["putcall_regime"], None, []),
    ("banks", "banks", ["KEY", "RF"], "1d", [], None, []),
    ("momentum in regional banks", "banks", ["KEY", "RF"], "1d", ["momentum"], None, []),
    ("oversold bounces in tech", "daily", TECH, "1d", ["mean_reversion"], None, []),
    ("short-term reversal in semis", "daily", SEMIS, "1d", ["mean_reversion"], None, []),
    (
        "tech and semis momentum",
        "daily",
        [*TECH, "AMD", "INTC", "QCOM", "TXN", "AVGO"],
        "1d",
        ["momentum"],
        None,
        [],
    ),
]


@pytest.mark.parametrize(
    ("directive", "folder", "universe", "timeframe", "families", "benchmark", "scope"), TABLE
)
def test_the_directive_makes_this_plan(
    corpus, directive, folder, universe, timeframe, families, benchmark, scope
):
    plan = plan_for(corpus, directive, folder)
    assert plan.tickers == universe
    assert plan.timeframe == timeframe
    assert plan.preferred_families == families
    assert plan.benchmark == benchmark
    assert plan.scope == scope


# (directive, folder, words the error must carry)
REFUSED = [
    ("semiconductors", "crypto", ["semis", "BTC-USD"]),
    ("ETFs", "crypto", ["etf", "BTC-USD"]),
    ("bitcoin", "daily", ["bitcoin", "AAPL"]),
    ("momentum", "crypto", ["names no universe", "BTC-USD"]),
    ("momentum on BTCC", "crypto", ["BTCC", "did you mean"]),
    ("semicondutors momentum", "daily", ["semicondutors", "did you mean", "semiconductors"]),
    ("momentom in tech", "daily", ["momentom", "momentum"]),
    ("weekly trend following in tech", "daily", ["weekly", "1d"]),
    ("momentum on ZZZZ", "daily", ["ZZZZ", "no data"]),
    ("banks", "daily", ["banks", "GICS"]),
    ("hourly momentum in tech", "daily", ["tech", "1h"]),
    ("dividend investing in tech", "daily", ["dividend", "style"]),
    ("forex carry", "daily", ["forex", "universe"]),
]


@pytest.mark.parametrize(("directive", "folder", "needles"), REFUSED)
def test_a_word_the_lab_cannot_resolve_is_refused(corpus, directive, folder, needles):
    with pytest.raises(DirectiveError) as err:
        plan_for(corpus, directive, folder)
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_ordinary_words_are_ignored_and_listed():
    plan = parse_directive("find a momentum strategy with an edge in tech")
    assert plan.understood == ["momentum", "tech"]
    assert plan.ignored == ["find", "a", "strategy", "with", "an", "edge", "in"]


def test_the_default_universe_is_said():
    plan = build_plan("momentum", data_dir=None, source="synthetic", offline=True)
    assert plan.tickers == TECH and plan.universe_source == "default"
    assert any("names no universe" in n for n in plan.notes)


def test_cli_overrides_win_over_the_directive(corpus):
    plan = plan_for(corpus, "hourly momentum on BTC", "crypto", timeframe="1d")
    assert plan.timeframe == "1d" and plan.tickers == ["BTC-USD"]
    assert any("overrides" in n for n in plan.notes)
    plan = plan_for(corpus, "momentum in semis", tickers=["AAPL"])
    assert plan.tickers == ["AAPL"] and plan.universe_source == "--tickers"


def test_the_real_corpus_resolves_the_readme_directive_and_crypto(shared_data):
    daily = shared_data / "ohlcv" / "daily"
    crypto = shared_data / "ohlcv" / "crypto"
    kw = {"source": "csv", "offline": True, "cache_dir": shared_data / "no-cache"}
    assert build_plan("momentum alpha in tech", data_dir=daily, **kw).tickers == TECH
    with pytest.raises(DirectiveError, match="GICS"):
        build_plan("banks", data_dir=daily, **kw)  # the table has banks; the folder none
    hourly = build_plan("hourly breakout on BTC", data_dir=crypto, **kw)
    assert (hourly.tickers, hourly.timeframe) == (["BTCUSD"], "1h")
    with pytest.raises(DirectiveError, match="semis"):
        build_plan("semiconductors", data_dir=crypto, **kw)


# -- the style tree ------------------------------------------------------------------------


def _spec(family, entry="x", filters=()):
    return {"family": family, "entry": entry, "filters": list(filters)}


@pytest.mark.parametrize(
    ("spec", "named", "inside"),
    [
        (_spec("cross_sectional_momentum"), ["momentum"], True),
        (_spec("rotation"), ["momentum"], True),
        (_spec("momentum", "roc_momentum"), ["momentum"], True),
        (_spec("momentum", "roc_momentum", ["trend_sma"]), ["trend"], True),
        (_spec("momentum", "roc_momentum"), ["trend"], False),
        (_spec("breakout", "donchian_breakout"), ["trend"], True),
        (_spec("volatility", "bollinger_breakout"), ["low_volatility"], False),
        (_spec("cross_sectional_momentum"), ["time_series_momentum"], False),
        (_spec("mean_reversion"), ["momentum"], False),
        (_spec("mean_reversion"), [], True),
        (_spec("trend"), ["index_regime"], True),
    ],
)
def test_outside_the_directive_is_judged_on_the_tree(spec, named, inside):
    assert within_directive(spec, named) is inside


def test_low_volatility_never_asks_for_volatility_breakouts():
    plan = parse_directive("low volatility ETFs")
    assert "volatility" not in plan.preferred_families
    assert plan.styles == ["low_volatility"]


# -- pinned: the calibration and the README command ------------------------------------------


def test_the_calibration_plan_is_unchanged(tmp_path):
    """swarm.calibrate runs directive "alpha" with --tickers on synthetic CSV universes: no
    family named, the buy-and-hold benchmark, daily bars, exactly the universe it gives."""
    from swarm.calibration.scenarios import DEFAULT_DIRECTIVE

    assert DEFAULT_DIRECTIVE == "alpha"
    data = tmp_path / "u"
    data.mkdir()
    for s in ("SYNA", "SYNB", "SYNC"):
        (data / f"{s}.csv").write_text(DAY)
    plan = build_plan(
        "alpha", data_dir=data, source="csv", offline=True, tickers=["SYNA", "SYNB", "SYNC"]
    )
    assert plan.preferred_families == [] and plan.styles == []
    assert plan.benchmark is None and plan.timeframe == "1d"
    assert plan.tickers == ["SYNA", "SYNB", "SYNC"] and plan.universe_source == "--tickers"


def test_dry_run_prints_the_plan_and_makes_no_run_folder(corpus, tmp_path, capsys, monkeypatch):
    from swarm.develop import main

    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    out = tmp_path / "runs"
    code = main(
        [
            "--directive",
            "hourly breakout on BTC",
            "--data-dir",
            str(corpus / "ohlcv" / "crypto"),
            "--offline",
            "--dry-run",
            "--out",
            str(out),
            "--start",
            "2018-01-01",
            "--end",
            "2020-01-01",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0 and not out.exists()
    plan = json.loads(captured.out)
    assert plan["universe"] == ["BTCUSD"] and plan["timeframe"] == "1h"
    assert plan["families"] == ["breakout"] and plan["benchmark"] == "buy-and-hold"
    assert (plan["start"], plan["end"]) == ("2018-01-01", "2020-01-01")
    assert plan["understood"] == ["hourly", "breakout", "BTC"] and plan["ignored"] == ["on"]


def test_the_cli_refuses_an_unresolvable_directive(corpus, tmp_path, capsys, monkeypatch):
    from swarm.develop import main

    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    code = main(
        [
            "--directive",
            "semiconductors",
            "--data-dir",
            str(corpus / "ohlcv" / "crypto"),
            "--offline",
            "--out",
            str(tmp_path / "runs"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "semis" in err
    assert not (tmp_path / "runs").exists()


def test_plan_summary_has_the_contract_fields():
    plan = parse_directive("momentum alpha in tech")
    summary = plan_summary(
        plan,
        start=date(2012, 1, 1),
        end=date(2020, 12, 1),
        benchmark="buy-and-hold",
        families=[],
    )
    for key in (
        "universe",
        "timeframe",
        "start",
        "end",
        "families",
        "benchmark",
        "scope",
        "understood",
        "ignored",
    ):
        assert key in summary


def test_the_calibration_config_is_unchanged(tmp_path, monkeypatch):
    """What swarm.develop builds for the calibration's directive and --tickers: no family
    named, none opted in, buy and hold, daily bars (swarm.calibration.runner builds the same)."""
    from swarm.develop import build_parser, config_from_args

    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    data = tmp_path / "u"
    data.mkdir()
    for s in ("SYNA", "SYNB", "SYNC"):
        (data / f"{s}.csv").write_text(DAY)
    args = build_parser().parse_args(
        [
            "--directive",
            "alpha",
            "--tickers",
            "SYNA,SYNB,SYNC",
            "--data-dir",
            str(data),
            "--source",
            "csv",
            "--offline",
            "--start",
            "2010-01-01",
            "--end",
            "2018-01-01",
        ]
    )
    config, _ = config_from_args(args)
    assert config.preferred_families == [] and config.families == [] and config.styles == []
    assert config.benchmark == "buy-and-hold" and config.timeframe == "1d"
    assert config.tickers == ["SYNA", "SYNB", "SYNC"] and config.universe_source == "--tickers"


def test_the_readme_command_keeps_its_universe_and_families(daily_dir, tmp_path, monkeypatch):
    from swarm.develop import build_parser, config_from_args

    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    args = build_parser().parse_args(
        [
            "--directive",
            "momentum alpha in tech",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2012-01-01",
            "--end",
            "2020-12-01",
        ]
    )
    config, _ = config_from_args(args)
    assert config.tickers == TECH and config.universe_source == "sector:tech"
    assert config.preferred_families == ["momentum"] and config.families == []
    assert config.timeframe == "1d" and config.benchmark == "buy-and-hold"


def test_offline_without_a_folder_the_cache_is_the_data(tmp_path):
    cache = tmp_path / "cache"
    (cache / "ohlcv").mkdir(parents=True)
    (cache / "ohlcv" / "AAPL_1d.parquet").touch()  # the inventory reads names only
    kw = {"data_dir": None, "source": "auto", "offline": True, "cache_dir": cache}
    assert build_plan("momentum on AAPL", **kw).tickers == ["AAPL"]
    assert build_plan("momentum in tech", **kw).tickers == ["AAPL"]  # what the cache holds
    with pytest.raises(DirectiveError, match="the cache"):
        build_plan("momentum on MSFT", **kw)
    online = build_plan("momentum on MSFT", **{**kw, "offline": False})
    assert online.tickers == ["MSFT"]  # yfinance may load any symbol


def test_low_volatility_on_one_symbol_says_what_is_missing(tmp_path, capsys, monkeypatch):
    from swarm.develop import main

    monkeypatch.setattr("backtest.data.default_cache_dir", lambda: tmp_path / "cache")
    code = main(["--directive", "low volatility on SPY", "--offline", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "low volatility" in err and "not a family yet" in err


@pytest.mark.parametrize(
    "family", ["earnings_drift", "analyst_revision", "sentiment_momentum", "putcall_regime"]
)
def test_a_directive_naming_an_alt_data_family_opts_the_run_into_it(family):
    from swarm.develop_config import _families

    assert _families(None, [family]) == [family]
    assert _families(None, ["momentum"]) == []  # block families need no opt-in
