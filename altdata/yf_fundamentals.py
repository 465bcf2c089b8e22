"""yfinance statements as the point-in-time statements table (``altdata.statements``).

Caveats a quant must know before trusting these rows:

* **No filing date.** Yahoo's statements carry the period end only, so ``known_at`` is a
  conservative guess: the open of the first NYSE session strictly after period end + 90 days
  (annual) or + 45 days (quarterly), the SEC's latest deadlines for a 10-K and a 10-Q (large
  filers report sooner, so a row is usually known later here than in fact, never earlier unless
  a filing was late).
* **Restated, not as first reported.** Yahoo serves today's values; a restatement overwrites
  the history, so a backtest sees the restated figure from the first period's ``known_at``.
  Per-share figures and share counts may be on today's split basis. Prefer ``altdata.edgar``
  for point-in-time work; this source fills in for non-SEC filers.
* **Short history.** About four years and five quarters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from altdata.errors import AltDataError, SourceOffline
from altdata.pit import KNOWN_AT, TICKER
from altdata.sessions import session_after, session_open
from altdata.statements import ANNUAL, COLUMNS, QUARTERLY, empty_rows

LAG = {ANNUAL: pd.Timedelta(days=90), QUARTERLY: pd.Timedelta(days=45)}
SOURCE = "yfinance statements"
RULE = "no filing date: first NYSE session after period end + 90 days (annual) / 45 (quarterly)"
FREQ = {ANNUAL: "yearly", QUARTERLY: "quarterly"}
GETTERS = ("get_income_stmt", "get_balance_sheet", "get_cash_flow")

# Column -> Yahoo line items (spaces removed: "Total Revenue" and "TotalRevenue" both match),
# most preferred first. Yahoo's capex is already negative, as in the corpus.
ITEMS: dict[str, tuple[str, ...]] = {
    "total_revenue": ("TotalRevenue", "OperatingRevenue"),
    "net_income": ("NetIncome", "NetIncomeCommonStockholders"),
    "operating_income": ("OperatingIncome", "TotalOperatingIncomeAsReported"),
    "total_assets": ("TotalAssets",),
    "total_liabilities": ("TotalLiabilitiesNetMinorityInterest",),
    "total_equity": ("StockholdersEquity", "CommonStockEquity"),
    "total_current_assets": ("CurrentAssets",),
    "total_current_liabilities": ("CurrentLiabilities",),
    "inventory": ("Inventory",),
    "long_term_debt": ("LongTermDebt", "LongTermDebtAndCapitalLeaseObligation"),
    "short_term_debt_current_portion_of_long_term_debt": (
        "CurrentDebt",
        "CurrentDebtAndCapitalLeaseObligation",
    ),
    "net_cash_flow_operating": ("OperatingCashFlow",),
    "capital_expenditures": ("CapitalExpenditure",),
    "earnings_per_share": ("BasicEPS",),
    "estimated_shares_outstanding": ("BasicAverageShares", "OrdinarySharesNumber"),
}
assert set(ITEMS) == set(COLUMNS)


def _known_at(ends: pd.Series, period: str) -> pd.Series:
    moments = {d: session_open(session_after(d + LAG[period])) for d in ends.unique()}
    return pd.Series(pd.DatetimeIndex([moments[d] for d in ends], tz="UTC"), index=ends.index)


def rows_from_statements(frames: list[pd.DataFrame], ticker: str, period: str) -> pd.DataFrame:
    """One row per period end from Yahoo statements (line items x period-end columns)."""
    items = pd.concat(
        [f.set_axis([str(i).replace(" ", "") for i in f.index]) for f in frames if not f.empty]
        or [pd.DataFrame()]
    )
    items = items[~items.index.duplicated(keep="first")]
    if items.empty:
        return empty_rows()
    out = pd.DataFrame(index=pd.DatetimeIndex(pd.to_datetime(items.columns)).normalize())
    for column, names in ITEMS.items():
        values = pd.Series(float("nan"), index=out.index)
        for name in reversed(names):  # the preferred item overwrites the fallbacks
            if name in items.index:
                v = pd.to_numeric(items.loc[name], errors="coerce").to_numpy(dtype=float)
                values = pd.Series(v, index=out.index).combine_first(values)
        out[column] = values
    out = out.dropna(how="all").sort_index()
    if out.empty:
        return empty_rows()
    ends = pd.Series(out.index, index=out.index)
    out[KNOWN_AT] = _known_at(ends, period)
    out = out.reset_index(names="period_end")
    out["period_end"] = out["period_end"].dt.strftime("%Y-%m-%d")
    out[TICKER], out["period"], out["form"], out["filed"] = ticker, period, "yahoo", None
    return out[list(empty_rows().columns)]


def statements(ticker_obj: Any, ticker: str) -> pd.DataFrame:
    """Annual and quarterly rows of one ``yfinance.Ticker`` (or anything with its getters)."""
    parts = []
    for period, freq in FREQ.items():
        frames = [getattr(ticker_obj, g)(freq=freq) for g in GETTERS]
        parts.append(rows_from_statements([f for f in frames if f is not None], ticker, period))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else empty_rows()


def fetcher(
    *, offline: bool, make_ticker: Callable[[str], Any] | None = None
) -> Callable[[str], pd.DataFrame]:
    """``ticker -> rows`` for ``altdata.statements.StatementsFeed``: network errors of any
    library become an ``AltDataError`` the subagents abstain with."""

    def fetch(ticker: str) -> pd.DataFrame:
        if offline:
            raise SourceOffline(
                "offline: yfinance statements need the network (drop --offline, or use "
                "--fundamentals corpus / edgar with a cache)"
            )
        if make_ticker is None:
            import yfinance as yf

            ticker_obj = yf.Ticker(ticker)
        else:
            ticker_obj = make_ticker(ticker)
        try:
            rows = statements(ticker_obj, ticker.upper())
        except Exception as exc:  # yfinance raises curl_cffi, requests or its own errors
            raise AltDataError(
                f"yfinance statements failed ({type(exc).__name__}: {exc}); check the network"
            ) from None
        if rows.empty:
            raise AltDataError(f"yfinance has no statements for {ticker}")
        return rows

    return fetch
