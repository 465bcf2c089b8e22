"""Statements from an online source (SEC EDGAR, yfinance) as the point-in-time table the
corpus statements are, so the fundamental facts (``altdata.fundamentals``) read them unchanged.

A source gives, per ticker, one row per *version* of a period's statement: the values as known
after one filing, with that filing's ``known_at``. A restated period therefore has two rows, and
``AltTable.as_of`` shows the first until the restatement is known. Annual rows form the
``statements`` table (the one the fundamental subagents read, as the corpus file); quarterly rows
form ``statements_quarterly``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import pandas as pd

from altdata.errors import AltDataError
from altdata.pit import KNOWN_AT, TICKER, AltTable

# The corpus columns the facts read (altdata.fundamentals), with the corpus's signs and units:
# whole dollars, capex negative (a cash outflow), EPS per share as reported.
COLUMNS = (
    "total_revenue",
    "net_income",
    "operating_income",
    "total_assets",
    "total_liabilities",
    "total_equity",
    "total_current_assets",
    "total_current_liabilities",
    "inventory",
    "long_term_debt",
    "short_term_debt_current_portion_of_long_term_debt",
    "net_cash_flow_operating",
    "capital_expenditures",
    "earnings_per_share",
    "estimated_shares_outstanding",
)
ANNUAL, QUARTERLY = "annual", "quarterly"
TABLES = {ANNUAL: "statements", QUARTERLY: "statements_quarterly"}
# Row keys besides the values: the period and the filing (or rule) that made this version.
KEYS = (TICKER, "period_end", "period", "form", "filed", KNOWN_AT)

Fetch = Callable[[str], pd.DataFrame]


def empty_rows() -> pd.DataFrame:
    """A statement table with no rows but every column, in its dtype."""
    frame = pd.DataFrame({c: pd.Series(dtype=float) for c in (*KEYS, *COLUMNS)})
    frame[KNOWN_AT] = pd.Series(dtype="datetime64[ns, UTC]")
    return frame


def table(name: str, source: str, rule: str, rows: pd.DataFrame) -> AltTable:
    """Rows of every ticker as one ``AltTable``, sorted by ``known_at``."""
    frame = rows.sort_values([KNOWN_AT, TICKER, "period_end"], kind="stable")
    return AltTable(name, source, frame.reset_index(drop=True), True, rule)


class StatementsFeed:
    """The ``statements`` tables of one online source for the tickers a run asks for.

    ``fetch(ticker)`` returns that ticker's version rows or raises ``AltDataError``; the error
    is kept as the ticker's gap (what a subagent abstains with) instead of failing the run.
    Tickers may be added between research rounds (``want``); the tables grow with them."""

    def __init__(self, *, source: str, rule: str, fetch: Fetch, tickers: Iterable[str] = ()):
        self.source, self.rule, self._fetch = source, rule, fetch
        self._wanted: list[str] = []
        self._rows: dict[str, pd.DataFrame] = {}
        self.gaps: dict[str, str] = {}
        self._tables: dict[str, AltTable] = {}
        self._lock = threading.Lock()  # subagents run in threads: fetch each ticker once
        self.want(tickers)

    def want(self, tickers: Iterable[str]) -> None:
        """Queue ``tickers`` for fetching, once each, in the order first asked."""
        with self._lock:
            self._wanted += [t for t in tickers if t not in self._wanted]

    def table(self, name: str) -> AltTable | None:
        """``statements`` or ``statements_quarterly`` over the wanted tickers; None when no
        ticker has a row (``gaps`` says why)."""
        period = next((p for p, n in TABLES.items() if n == name), None)
        if period is None:
            return None
        with self._lock:
            fresh = [t for t in self._wanted if t not in self._rows and t not in self.gaps]
            for ticker in fresh:
                try:
                    self._rows[ticker] = self._fetch(ticker)
                except AltDataError as exc:
                    self.gaps[ticker] = str(exc)
            if fresh or name not in self._tables:
                parts = [r[r["period"] == period] for r in self._rows.values()]
                parts = [p for p in parts if not p.empty]
                if parts:
                    rows = pd.concat(parts, ignore_index=True)
                    self._tables[name] = table(name, self.source, self.rule, rows)
                else:
                    self._tables.pop(name, None)
            return self._tables.get(name)

    def missing(self, name: str) -> str:
        """Why ``name`` has no table: the tickers' gaps, or that the source has no such rows."""
        if self.gaps:
            return "; ".join(f"{t}: {why}" for t, why in self.gaps.items())
        return f"{self.source} gave no {name.replace('_', ' ')} rows for {', '.join(self._wanted)}"
