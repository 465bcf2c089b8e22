"""Directive -> plan, by rules. The LLM brain may interpret a directive; this one never guesses.

The rules read three things from free text: a style (which strategy families to try
first), a universe (a sector word or explicit tickers), and a timeframe hint.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from strategies.regime import REGIME_STYLE

# Longest phrases first so "mean reversion" wins over a bare "reversion".
STYLE_KEYWORDS: list[tuple[str, list[str]]] = [
    # The analyst -> debate -> trader -> risk pipeline, replayed as a strategy family.
    ("agents decide", ["decision_pipeline"]),
    ("analyst", ["decision_pipeline"]),
    ("debate", ["decision_pipeline"]),
    # Portfolio families: the universe's symbols ranked against each other.
    ("cross-sectional", ["cross_sectional_momentum"]),
    ("cross sectional", ["cross_sectional_momentum"]),
    ("relative strength", ["rotation", "cross_sectional_momentum"]),
    ("rotation", ["rotation"]),
    ("pairs", ["pairs"]),
    ("pair trading", ["pairs"]),
    ("cointegrat", ["pairs"]),
    ("spread", ["pairs"]),
    ("mean reversion", ["mean_reversion"]),
    ("mean-reversion", ["mean_reversion"]),
    ("reversion", ["mean_reversion"]),
    ("revert", ["mean_reversion"]),
    ("oversold", ["mean_reversion"]),
    ("pullback", ["mean_reversion", "momentum"]),
    ("momentum", ["momentum"]),
    ("breakout", ["breakout"]),
    ("channel", ["breakout"]),
    ("trend", ["trend"]),
    ("volatility", ["volatility"]),
    ("squeeze", ["volatility"]),
]

SECTORS: dict[str, list[str]] = {
    "tech": ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"],
    "technology": ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"],
    "semis": ["NVDA", "AMD", "INTC", "QCOM", "TXN", "AVGO"],
    "semiconductor": ["NVDA", "AMD", "INTC", "QCOM", "TXN", "AVGO"],
    "software": ["MSFT", "ORCL", "ADBE", "CRM"],
    "index": ["SPY", "QQQ", "IWM", "DIA"],
    "indices": ["SPY", "QQQ", "IWM", "DIA"],
    "indexes": ["SPY", "QQQ", "IWM", "DIA"],
    "etf": ["SPY", "QQQ", "IWM", "DIA"],
    "crypto": ["BTC-USD", "ETH-USD"],
}
INDEX_SECTORS = frozenset({"index", "indices", "indexes", "etf"})
# "regime filtered", "regime filter", "risk-on", "when the index is above its 200-day average":
# the index regime filter (strategies.regime) is asked for by name.
_REGIME = re.compile(
    r"\bregime[\s-]*filter(?:ed|s)?\b|\brisk[\s-]+on\b|\bindex\s+filter|"
    r"\babove\s+(?:its|the)\s+\d+[\s-]*day",
    re.I,
)
DEFAULT_UNIVERSE = SECTORS["tech"]
ALL_FAMILIES = ["momentum", "mean_reversion", "breakout", "trend", "volatility"]
_TICKER = re.compile(r"(?<![\w$])\$?([A-Z]{1,5}(?:-USD)?)(?![\w])")
_NOT_TICKERS = {"US", "UK", "EU", "A", "I", "AND", "OR", "IN", "ON", "THE", "ETF", "USD"}
_NOT_TICKERS |= {"ATR", "RSI", "MACD", "SMA"}


# "vs SPY", "versus QQQ", "against IWM", "benchmark DIA", "relative to SPY"
_VS_SYMBOL = re.compile(
    r"\b(?:vs\.?|versus|against|benchmark(?:ed)?(?:\s+(?:to|against))?|relative\s+to)\s+"
    r"\$?([A-Z]{1,5}(?:-USD)?)\b"
)
_ABSOLUTE = re.compile(r"\b(absolute[\s-]+returns?|market[\s-]+neutral|vs\.?\s+cash)\b", re.I)
_VS_HOLD = re.compile(r"\b(?:vs\.?|versus|against)\s+buy[\s-]*(?:and|&)?[\s-]*hold\b", re.I)


class Plan(BaseModel):
    directive: str
    style: str  # the first preferred family, or "any"
    preferred_families: list[str]
    universe_source: str  # "sector:tech", "directive", "default", "--tickers"
    tickers: list[str]
    timeframe: str
    benchmark: str | None = None  # "cash", "buy-and-hold" or a symbol the directive named


def parse_benchmark_phrase(text: str) -> tuple[str | None, str]:
    """(the benchmark the directive names, the directive without that phrase).

    "absolute return" and "market neutral" mean cash; "vs SPY" a symbol; "vs buy and
    hold" the default. The phrase is removed so its symbol is not read as a ticker.
    """
    if m := _ABSOLUTE.search(text):
        return "cash", text[: m.start()] + " " + text[m.end() :]
    if m := _VS_HOLD.search(text):
        return "buy-and-hold", text[: m.start()] + " " + text[m.end() :]
    if m := _VS_SYMBOL.search(text):
        return m.group(1), text[: m.start()] + " " + text[m.end() :]
    return None, text


def parse_directive(directive: str) -> Plan:
    original = directive.strip()
    if not original:
        raise ValueError("empty directive")
    benchmark, text = parse_benchmark_phrase(original)
    low = text.lower()

    families: list[str] = []
    for phrase, fams in STYLE_KEYWORDS:
        if phrase in low:
            low = low.replace(phrase, " ")  # consume, so "mean reversion" is not also "reversion"
            families += [f for f in fams if f not in families]

    explicit = [t for t in _TICKER.findall(text) if t not in _NOT_TICKERS]
    sector = next((w for w in re.findall(r"[a-z]+", text.lower()) if w in SECTORS), None)
    if explicit:
        tickers, source = list(dict.fromkeys(explicit)), "directive"
    elif sector:
        tickers, source = SECTORS[sector], f"sector:{sector}"
    else:
        tickers, source = DEFAULT_UNIVERSE, "default"

    timeframe = "1h" if re.search(r"\b(hourly|intraday|1h)\b", text.lower()) else "1d"
    # The regime filter: asked for by name, or trend following on the index ETFs (whose
    # universe holds the index series the filter reads).
    if _REGIME.search(text) or ("trend" in families and sector in INDEX_SECTORS and not explicit):
        families.append(REGIME_STYLE)
    return Plan(
        directive=original,
        style=next((f for f in families if f != REGIME_STYLE), "any"),
        preferred_families=families,
        universe_source=source,
        tickers=list(tickers),
        timeframe=timeframe,
        benchmark=benchmark,
    )
