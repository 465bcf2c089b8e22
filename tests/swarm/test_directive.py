import pytest

from swarm.directive import SECTORS, parse_directive

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "families", "tickers", "timeframe"),
    [
        ("momentum alpha in tech", ["momentum"], SECTORS["tech"], "1d"),
        ("Mean reversion on semis", ["mean_reversion"], SECTORS["semis"], "1d"),
        ("breakout on $AAPL and MSFT hourly", ["breakout"], ["AAPL", "MSFT"], "1h"),
        (
            "trend following with a volatility squeeze",
            ["trend", "volatility"],
            SECTORS["tech"],
            "1d",
        ),
    ],
)
def test_rules_read_style_universe_and_timeframe(text, families, tickers, timeframe):
    plan = parse_directive(text)
    assert plan.preferred_families == families
    assert plan.tickers == tickers
    assert plan.timeframe == timeframe


def test_mean_reversion_is_not_also_read_as_bare_reversion_twice():
    assert parse_directive("mean reversion").preferred_families == ["mean_reversion"]


def test_empty_directive_is_refused():
    with pytest.raises(ValueError):
        parse_directive("   ")


@pytest.mark.parametrize(
    ("directive", "benchmark", "tickers"),
    [
        ("momentum alpha in tech", None, ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]),
        ("momentum in tech vs SPY", "SPY", ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]),
        ("trend on AAPL MSFT against QQQ", "QQQ", ["AAPL", "MSFT"]),
        ("absolute return momentum on AAPL", "cash", ["AAPL"]),
        ("market-neutral mean reversion in semis", "cash", None),
        ("breakout on NVDA vs buy and hold", "buy-and-hold", ["NVDA"]),
        ("trend following on US indices", None, ["SPY", "QQQ", "IWM", "DIA"]),
    ],
)
def test_directive_may_name_the_benchmark(directive, benchmark, tickers) -> None:
    plan = parse_directive(directive)
    assert plan.benchmark == benchmark
    if tickers is not None:
        assert plan.tickers == tickers  # the benchmark's symbol is not read as a ticker
    assert plan.directive == directive
