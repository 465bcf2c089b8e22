"""What the research subagents may draw on besides the feature bundle."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from altdata.corpus import AltData
from swarm.research.models import Domain, Finding
from swarm.research.news import NewsItem

FundamentalsProvider = Callable[[str], dict[str, Any] | None]
# Hook for social / analyst / options_flow / insider sources: (symbol, as_of ISO date) ->
# a reading {"value", "signal", "confidence", "evidence": {name: float}, "source",
# "as_of"} or None when the source has nothing for that symbol.
ReadingProvider = Callable[[str, str], dict[str, Any] | None]


@dataclass
class ResearchContext:
    news_items: list[NewsItem] = field(default_factory=list)
    # Point-in-time alternative data (``altdata``); None without ``--alt-data``.
    alt: AltData | None = None
    # What the fundamental subagents read when it differs from ``alt``: the same folder with
    # statements from an online source (``--fundamentals edgar|yfinance``).
    fundamentals_alt: AltData | None = None
    # The date the bars' closes are split-adjusted through (a download's date), for prices
    # against as-reported share counts; None: the corpus closes' (altdata.fundamentals).
    price_basis: str | None = None
    fundamentals: FundamentalsProvider | None = None
    providers: dict[str, ReadingProvider] = field(default_factory=dict)
    news_window_days: int = 30
    analyst_window_days: int = 90
    # Read analyst rating actions (upgrades, price targets) from the news items.
    analyst_from_headlines: bool = True
    pattern_horizon: int = 5  # bars of forward return measured after a candlestick signal
    offline: bool = True  # informs abstention reasons only; no network is used here
    _fund_cache: dict[str, tuple[dict[str, Any] | None, str | None]] = field(
        default_factory=dict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fundamentals_for(self, symbol: str) -> tuple[dict[str, Any] | None, str | None]:
        """(data, error type) from the provider, fetched once per symbol for all five
        fundamental subagents. A provider error is a data gap, not a subagent failure."""
        if self.fundamentals is None:
            return None, None
        with self._lock:
            if symbol not in self._fund_cache:
                try:
                    self._fund_cache[symbol] = (self.fundamentals(symbol), None)
                except Exception as exc:  # network errors of any library
                    self._fund_cache[symbol] = (None, type(exc).__name__)
            return self._fund_cache[symbol]


def abstain(
    symbol: str, domain: Domain, specialization: str, indicator: str, reason: str, as_of: str
) -> Finding:
    """An honest 'no data': stance 0, confidence 0 and the reason."""
    return Finding(
        symbol=symbol,
        type=domain,
        specialization=specialization,
        indicator=indicator,
        value=None,
        interpretation=f"Abstained: {reason}.",
        signal=0.0,
        confidence=0.0,
        as_of=as_of,
        abstained=True,
        reason=reason,
    )


def clip(x: float, lo: float = -1.0, hi: float = 1.0) -> float:
    """``x`` clipped to [lo, hi], as a float."""
    return float(min(hi, max(lo, x)))


def sign(x: float) -> float:
    """-1.0, 0.0 or 1.0: the sign of ``x``."""
    return float((x > 0) - (x < 0))
