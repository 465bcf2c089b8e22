"""Defaults per asset class: a fair bar depends on what is traded.

The lab's criteria were set for equities: a 20 % drawdown cap judges crypto's asset class,
not a strategy (BTC-USD's own buy & hold fell about 83 % in 2018 and 77 % in 2022), and a
market-neutral family (pairs: long one leg, short the other) is judged against cash, not a
long buy & hold it never tries to beat. The user's ``--criteria`` and ``--benchmark`` always
win; ``--criteria-replace`` drops these defaults with the lab's.

| asset class | when | criteria over the lab's defaults | benchmark |
|---|---|---|---|
| equity (stocks, ETFs, indices) | otherwise | none | buy & hold |
| crypto | every ticker is a crypto pair (``BTC-USD``, ``ETH-USDT``...) | ``max_drawdown_pct<=50`` | buy & hold |
| market neutral | every named family is market neutral (``pairs``) | none | cash |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CRYPTO_QUOTES = ("USD", "USDT", "USDC", "EUR", "BTC", "ETH")
CRYPTO_CRITERIA = "max_drawdown_pct<=50"
MARKET_NEUTRAL_FAMILIES = frozenset({"pairs"})
CASH = "cash"


@dataclass(frozen=True)
class AssetDefaults:
    """What a run's asset class changes in the lab's defaults, and why."""

    asset_class: str  # "equity" or "crypto"
    criteria: str  # laid over the lab's default criteria, under the user's --criteria
    benchmark: str | None  # None: the lab's default (buy & hold of the universe)
    why: list[str]  # one phrase per default applied, for the report


def is_crypto(ticker: str) -> bool:
    """A crypto pair's symbol: ``BASE-QUOTE`` with a crypto or fiat quote (``BTC-USD``)."""
    base, _, quote = ticker.upper().rpartition("-")
    return bool(base) and quote in CRYPTO_QUOTES


def asset_class(tickers: Sequence[str]) -> str:
    """``crypto`` when every ticker is a crypto pair, else ``equity``."""
    return "crypto" if tickers and all(is_crypto(t) for t in tickers) else "equity"


def defaults_for(tickers: Sequence[str], families: Sequence[str]) -> AssetDefaults:
    """The asset class's defaults for a universe and the run's named families."""
    kind = asset_class(tickers)
    why: list[str] = []
    criteria = ""
    if kind == "crypto":
        criteria = CRYPTO_CRITERIA
        why.append(f"crypto universe: {CRYPTO_CRITERIA} (its own buy & hold fell 77-83 %)")
    benchmark = None
    if families and set(families) <= MARKET_NEUTRAL_FAMILIES:
        benchmark = CASH
        why.append("market-neutral families only (pairs): judged against cash")
    return AssetDefaults(asset_class=kind, criteria=criteria, benchmark=benchmark, why=why)
