"""Point-in-time fundamental facts for one ticker at one moment, from the corpus tables.

Pure functions of (tables, ticker, moment ``t``, price at ``t``): each fact uses only rows
known at ``t`` (``AltTable.for_ticker``) and carries the rows it used (``Cite``: file, period
end or report date, known_at) so a finding can cite them.

Units, checked on the real file (AAPL FY2015, period end 2015-09-26): ``total_revenue``
233,715,000,000 (whole dollars), ``current_ratio`` 111 (percent x100: 1.11), EPS 9.28 as
reported then, ``capital_expenditures`` -11,247,000,000 (negative: a cash outflow, so free cash
flow is operating cash flow *plus* capex). Ratios here are computed from the dollar fields,
never read from the rounded x100 columns.

Split bases differ by file, and a price times an as-reported share count is wrong by every
split in between: statement EPS and ``estimated_shares_outstanding`` are as reported (AAPL
FY2013 EPS 40.03, before its 7:1 split); the earnings surprises are restated for splits up to
the file's snapshot (AAPL Sep-2012 EPS 1.24 = 8.67 / 7); daily closes are adjusted up to their
own download (the corpus: 2020-12-11, AAPL 2016-06-30 close 23.90 = 95.60 / 4). ``SPLITS``
puts every per-share figure on the price's basis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from altdata.pit import KNOWN_AT, AltTable

# Forward splits of the corpus tickers (public record): date effective, new shares per old.
SPLITS: dict[str, tuple[tuple[str, float], ...]] = {
    "AAPL": (("2014-06-09", 7.0), ("2020-08-31", 4.0)),
    "NFLX": (("2015-07-15", 7.0),),
    "TSLA": (("2020-08-31", 5.0), ("2022-08-25", 3.0)),
    "NVDA": (("2021-07-20", 4.0), ("2024-06-10", 10.0)),
    "AMZN": (("2022-06-06", 20.0),),
    "GOOGL": (("2022-07-18", 20.0),),
    "GOOG": (("2022-07-18", 20.0),),
    "AVGO": (("2024-07-15", 10.0),),
}
SURPRISES_BASIS = "2019-08-15"  # the surprises file is restated for splits up to its last row
CORPUS_PRICE_BASIS = "2020-12-11"  # the corpus daily closes are adjusted up to their last day
PE_QUARTERS = 4


def split_factor(ticker: str, since: object, until: object) -> float:
    """New shares per share between two bases: the splits effective in (since, until]."""
    a, b = pd.Timestamp(str(since)[:10]), pd.Timestamp(str(until)[:10])
    f = 1.0
    for day, ratio in SPLITS.get(ticker.upper(), ()):
        if a < pd.Timestamp(day) <= b:
            f *= ratio
    return f


@dataclass(frozen=True)
class Cite:
    """One corpus row a fact rests on."""

    source: str  # the file, relative to the alt-data root
    key: str  # "period_end" or "report_date"
    date: str
    known_at: str

    def __str__(self) -> str:
        return f"{self.source} {self.key} {self.date} (known {self.known_at})"


@dataclass(frozen=True)
class Fact:
    name: str
    value: float
    text: str
    cites: tuple[Cite, ...]


def _cite(table: AltTable, row: pd.Series, key: str) -> Cite:
    known = pd.Timestamp(row[KNOWN_AT]).strftime("%Y-%m-%d %H:%M UTC")
    return Cite(table.source, key, str(row[key])[:10], known)


def _div(a: object, b: object) -> float | None:
    try:
        x, y = float(a), float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(x) and math.isfinite(y)) or y == 0:
        return None
    return x / y


def statements_at(table: AltTable, ticker: str, t: object) -> pd.DataFrame:
    """The ticker's annual statements known at ``t``, oldest period first: of a period filed
    more than once (an EDGAR restatement, ``altdata.edgar_facts``), the version last known."""
    rows = table.for_ticker(ticker, t).sort_values(["period_end", KNOWN_AT], kind="stable")
    return rows.drop_duplicates("period_end", keep="last")


def _latest(table: AltTable, ticker: str, t: object) -> tuple[pd.Series, pd.Series | None]:
    rows = statements_at(table, ticker, t)
    if rows.empty:
        raise LookupError(f"{table.source} has no {ticker} statement known at {t}")
    prev = rows.iloc[-2] if len(rows) > 1 else None
    return rows.iloc[-1], prev


def market_cap(
    statements: AltTable, ticker: str, t: object, price: float, price_basis: object
) -> tuple[float, Cite] | None:
    """Price x the latest statement's shares (net income / EPS), both on the price's basis."""
    row, _ = _latest(statements, ticker, t)
    shares = _div(row["net_income"], row["earnings_per_share"])
    if shares is None or shares <= 0:
        shares = _div(row.get("estimated_shares_outstanding"), 1.0)
    if shares is None or shares <= 0 or not price > 0:
        return None
    shares *= split_factor(ticker, row["period_end"], price_basis)
    return price * shares, _cite(statements, row, "period_end")


def financial_metrics(statements: AltTable, ticker: str, t: object) -> list[Fact]:
    """Revenue growth (latest vs previous year), net and operating margin, ROE."""
    row, prev = _latest(statements, ticker, t)
    c = _cite(statements, row, "period_end")
    out = []
    if prev is not None and (g := _div(row["total_revenue"], prev["total_revenue"])) is not None:
        cp = _cite(statements, prev, "period_end")
        out.append(Fact("revenue_growth", g - 1, f"revenue growth {(g - 1) * 100:+.1f}%", (c, cp)))
    if (m := _div(row["net_income"], row["total_revenue"])) is not None:
        out.append(Fact("net_margin", m, f"net margin {m * 100:.1f}%", (c,)))
    if (m := _div(row["operating_income"], row["total_revenue"])) is not None:
        out.append(Fact("operating_margin", m, f"operating margin {m * 100:.1f}%", (c,)))
    if (r := _div(row["net_income"], row["total_equity"])) is not None and row["total_equity"] > 0:
        out.append(Fact("roe", r, f"ROE {r * 100:.1f}%", (c,)))
    return out


def trailing_eps(
    surprises: AltTable, ticker: str, t: object, price_basis: object
) -> tuple[float, tuple[Cite, ...]] | None:
    """The sum of the last four quarterly EPS reported by ``t``, on the price's basis."""
    rows = surprises.for_ticker(ticker, t).sort_values("report_date").tail(PE_QUARTERS)
    rows = rows.dropna(subset=["eps_reported"])
    if len(rows) < PE_QUARTERS:
        return None
    f = split_factor(ticker, SURPRISES_BASIS, price_basis)
    eps = float(rows["eps_reported"].sum()) / f
    return eps, tuple(_cite(surprises, r, "report_date") for _, r in rows.iterrows())


def valuation(
    statements: AltTable | None,
    surprises: AltTable | None,
    ticker: str,
    t: object,
    price: float,
    *,
    price_basis: object,
) -> list[Fact]:
    """Trailing P/E (surprises), P/B and P/S (latest statement): all at the price ``price``."""
    out = []
    if surprises is not None and (te := trailing_eps(surprises, ticker, t, price_basis)):
        eps, cites = te
        if eps > 0:
            out.append(Fact("trailing_pe", price / eps, f"trailing P/E {price / eps:.1f}", cites))
        else:
            out.append(Fact("trailing_pe", -1.0, f"trailing EPS {eps:.2f} (losses)", cites))
    if statements is not None and statements_at(statements, ticker, t).shape[0]:
        row, _ = _latest(statements, ticker, t)
        mc = market_cap(statements, ticker, t, price, price_basis)
        if mc is not None:
            cap, c = mc
            if (pb := _div(cap, row["total_equity"])) is not None and pb > 0:
                out.append(Fact("price_to_book", pb, f"price/book {pb:.2f}", (c,)))
            if (ps := _div(cap, row["total_revenue"])) is not None and ps > 0:
                out.append(Fact("price_to_sales", ps, f"price/sales {ps:.2f}", (c,)))
    return out


def balance_sheet(statements: AltTable, ticker: str, t: object) -> list[Fact]:
    """Leverage (liabilities / equity), debt / equity, current and quick ratio."""
    row, _ = _latest(statements, ticker, t)
    c = (_cite(statements, row, "period_end"),)
    out = []
    eq = float(row["total_equity"])
    if eq > 0 and (lev := _div(row["total_liabilities"], eq)) is not None:
        out.append(Fact("liabilities_to_equity", lev, f"liabilities/equity {lev:.2f}", c))
    debt = float(row["long_term_debt"]) + float(
        row["short_term_debt_current_portion_of_long_term_debt"]
    )
    if eq > 0 and math.isfinite(debt):
        out.append(Fact("debt_to_equity", debt / eq, f"debt/equity {debt / eq:.2f}", c))
    cl = row["total_current_liabilities"]
    if (cr := _div(row["total_current_assets"], cl)) is not None:
        out.append(Fact("current_ratio", cr, f"current ratio {cr:.2f}", c))
    if (qr := _div(float(row["total_current_assets"]) - float(row["inventory"]), cl)) is not None:
        out.append(Fact("quick_ratio", qr, f"quick ratio {qr:.2f}", c))
    return out


def cash_flow(
    statements: AltTable, ticker: str, t: object, price: float, *, price_basis: object
) -> list[Fact]:
    """Free-cash-flow yield ((operating cash flow + capex) / market cap), capex / revenue."""
    row, _ = _latest(statements, ticker, t)
    c = _cite(statements, row, "period_end")
    out = []
    fcf = float(row["net_cash_flow_operating"]) + float(row["capital_expenditures"])
    mc = market_cap(statements, ticker, t, price, price_basis)
    if mc is not None and math.isfinite(fcf):
        y = fcf / mc[0]
        out.append(Fact("fcf_yield", y, f"free-cash-flow yield {y * 100:.2f}%", (c,)))
    if (ci := _div(-float(row["capital_expenditures"]), row["total_revenue"])) is not None:
        out.append(Fact("capex_intensity", ci, f"capex {ci * 100:.1f}% of revenue", (c,)))
    return out


def sector_of(sectors: AltTable, ticker: str) -> str | None:
    """The GICS sector of ``ticker``, or None when the table does not list it."""
    rows = sectors.frame[sectors.frame["ticker"] == ticker]
    return None if rows.empty else str(rows.iloc[0]["gics_sector"])


def peers(sectors: AltTable, ticker: str, universe: list[str]) -> list[str]:
    """The symbols of ``universe`` in the ticker's GICS sector (the ticker included)."""
    sector = sector_of(sectors, ticker)
    return [s for s in universe if sector is not None and sector_of(sectors, s) == sector]


def rank(value: float, others: list[float]) -> float:
    """Percentile of ``value`` among ``others`` + itself: 0 lowest .. 1 highest."""
    pool = [*others, value]
    if len(pool) < 2:
        return 0.5
    below = sum(v < value for v in pool) + 0.5 * (sum(v == value for v in pool) - 1)
    return below / (len(pool) - 1)


def industry(
    statements: AltTable,
    sectors: AltTable,
    ticker: str,
    t: object,
    *,
    universe: list[str] | None = None,
    closes: dict[str, pd.Series] | None = None,
    lookback: int = 126,
) -> list[Fact]:
    """The ticker against its GICS peers: its rank in net margin and revenue growth among the
    same-sector tickers with a statement known at ``t`` (``universe``: default every ticker of
    the statements file), and in trailing return when ``closes`` (symbol -> close series) are
    given."""
    pool = peers(sectors, ticker, universe or statements.tickers())
    srow = sectors.frame[sectors.frame["ticker"] == ticker]
    if srow.empty:
        return []
    sc = Cite(sectors.source, "ticker", ticker, "static")
    out = []
    metrics: dict[str, dict[str, tuple[float, Cite]]] = {"net_margin": {}, "revenue_growth": {}}
    for sym in pool:
        if statements_at(statements, sym, t).empty:
            continue
        for f in financial_metrics(statements, sym, t):
            if f.name in metrics:
                metrics[f.name][sym] = (f.value, f.cites[0])
    for name, values in metrics.items():
        if ticker in values and len(values) > 1:
            v, c = values.pop(ticker)
            r = rank(v, [x for x, _ in values.values()])
            text = f"{name.replace('_', ' ')} rank {r:.2f} among {len(values) + 1} sector peers"
            out.append(Fact(f"{name}_rank", r, text, (c, sc)))
    if closes and ticker in closes:
        end = pd.Timestamp(str(t)[:10])
        rets = {}
        for sym in pool:
            s = closes.get(sym)
            if s is None:
                continue
            s = s.loc[:end].dropna()
            if len(s) > lookback:
                rets[sym] = float(s.iloc[-1] / s.iloc[-1 - lookback] - 1)
        if ticker in rets and len(rets) > 1:
            v = rets.pop(ticker)
            r = rank(v, list(rets.values()))
            text = f"{lookback}-bar return {v * 100:+.1f}%, rank {r:.2f} among {len(rets) + 1}"
            out.append(Fact("return_rank", r, text, (sc,)))
    return out
