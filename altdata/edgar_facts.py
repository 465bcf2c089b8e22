"""SEC EDGAR XBRL company facts -> the point-in-time statements table (``altdata.statements``).

``companyfacts`` lists every value a company ever filed: ``facts -> us-gaap -> Concept -> units
-> USD -> [{start?, end, val, accn, fy, fp, form, filed, frame?}]``. ``fy``/``fp`` name the
*filing's* fiscal period (a 10-K repeats two earlier years as comparatives), so a value's period
is read from its own dates: a duration of 350-380 days is annual, 80-100 days quarterly (10-Q
cash flows are year-to-date, so Q2/Q3 cash flows are left empty rather than derived); an instant
(balance sheet) belongs to the annual or quarterly period ending on its date.

Point in time: a period gets a new row (version) at each filing date that changes one of its
values, known after that date's NYSE close (``corpus.known_after_close``: EDGAR gives the filing
date, not the acceptance time), never at the period end. A restatement is a later version; the
first value stays visible until it is filed.

Concept fallbacks, in order of preference (the first one a filing has for the period is used):
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from pydantic import BaseModel, ConfigDict

from altdata.corpus import known_after_close
from altdata.pit import KNOWN_AT, TICKER
from altdata.statements import ANNUAL, COLUMNS, QUARTERLY, empty_rows

FORMS = frozenset({"10-K", "10-K/A", "10-Q", "10-Q/A"})
ANNUAL_DAYS = (350, 380)  # 52/53-week years: 364 or 371 days
QUARTER_DAYS = (80, 100)  # 13/14-week quarters: 91 or 98 days


@dataclass(frozen=True)
class Concept:
    name: str
    unit: str
    sign: float = 1.0  # -1: XBRL reports a payment as positive, the corpus as an outflow


# Column -> us-gaap concepts, most preferred first.
CONCEPTS: dict[str, tuple[Concept, ...]] = {
    "total_revenue": (
        Concept("Revenues", "USD"),
        Concept("RevenueFromContractWithCustomerExcludingAssessedTax", "USD"),
        Concept("RevenueFromContractWithCustomerIncludingAssessedTax", "USD"),
        Concept("SalesRevenueNet", "USD"),
        Concept("SalesRevenueGoodsNet", "USD"),
    ),
    "net_income": (Concept("NetIncomeLoss", "USD"), Concept("ProfitLoss", "USD")),
    "operating_income": (Concept("OperatingIncomeLoss", "USD"),),
    "total_assets": (Concept("Assets", "USD"),),
    "total_liabilities": (Concept("Liabilities", "USD"),),
    "total_equity": (
        Concept("StockholdersEquity", "USD"),
        Concept("StockholdersEquityIncludingPortionAttributableToNoncontrollingInterest", "USD"),
    ),
    "total_current_assets": (Concept("AssetsCurrent", "USD"),),
    "total_current_liabilities": (Concept("LiabilitiesCurrent", "USD"),),
    "inventory": (Concept("InventoryNet", "USD"),),
    "long_term_debt": (
        Concept("LongTermDebtNoncurrent", "USD"),
        Concept("LongTermDebtAndCapitalLeaseObligations", "USD"),
    ),
    "short_term_debt_current_portion_of_long_term_debt": (
        Concept("DebtCurrent", "USD"),
        Concept("LongTermDebtCurrent", "USD"),
    ),
    "net_cash_flow_operating": (
        Concept("NetCashProvidedByUsedInOperatingActivities", "USD"),
        Concept("NetCashProvidedByUsedInOperatingActivitiesContinuingOperations", "USD"),
    ),
    "capital_expenditures": (
        Concept("PaymentsToAcquirePropertyPlantAndEquipment", "USD", -1.0),
        Concept("PaymentsToAcquireProductiveAssets", "USD", -1.0),
    ),
    "earnings_per_share": (
        Concept("EarningsPerShareBasic", "USD/shares"),
        Concept("EarningsPerShareBasicAndDiluted", "USD/shares"),
    ),
    "estimated_shares_outstanding": (
        Concept("WeightedAverageNumberOfSharesOutstandingBasic", "shares"),
    ),
}
assert set(CONCEPTS) == set(COLUMNS)
__doc__ += "".join(
    f"\n* ``{col}``: {', '.join(c.name for c in cs)}" for col, cs in CONCEPTS.items()
) + (
    "\n\nWhen ``Liabilities`` is not filed (many companies report only the total with equity),"
    " total liabilities are total assets minus stockholders' equity."
)


class XbrlFact(BaseModel):
    """One entry of a companyfacts unit list (the fields used; others are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    end: str
    val: float
    filed: str
    form: str
    accn: str = ""
    start: str | None = None


@dataclass(frozen=True)
class _Value:
    column: str
    rank: int  # position in the column's fallback chain: 0 preferred
    period: str
    end: pd.Timestamp
    filed: pd.Timestamp
    form: str
    val: float


def _kind(fact: XbrlFact) -> str | None:
    if fact.start is None:
        return "instant"
    days = (pd.Timestamp(fact.end) - pd.Timestamp(fact.start)).days + 1
    if ANNUAL_DAYS[0] <= days <= ANNUAL_DAYS[1]:
        return ANNUAL
    if QUARTER_DAYS[0] <= days <= QUARTER_DAYS[1]:
        return QUARTERLY
    return None  # year-to-date and other spans


def _values(facts: dict) -> list[_Value]:
    gaap = (facts.get("facts") or {}).get("us-gaap") or {}
    raw = []
    for column, chain in CONCEPTS.items():
        for rank, concept in enumerate(chain):
            units = (gaap.get(concept.name) or {}).get("units") or {}
            for entry in units.get(concept.unit, []):
                fact = XbrlFact.model_validate(entry)
                if fact.form in FORMS and (kind := _kind(fact)) is not None:
                    raw.append((column, rank, kind, fact, concept.sign))
    ends = {k: {f.end for _, _, kind, f, _ in raw if kind == k} for k in (ANNUAL, QUARTERLY)}
    out = []
    for column, rank, kind, f, sign in raw:
        periods = [kind] if kind != "instant" else [p for p in ends if f.end in ends[p]]
        for period in periods:
            out.append(
                _Value(
                    column,
                    rank,
                    period,
                    pd.Timestamp(f.end),
                    pd.Timestamp(f.filed),
                    f.form,
                    sign * f.val,
                )
            )
    return out


def _versions(values: Iterable[_Value]) -> list[dict]:
    """One row per filing date that changes a period's values, in filing order."""
    rows = []
    by_period: dict[tuple[str, pd.Timestamp], list[_Value]] = {}
    for v in values:
        by_period.setdefault((v.period, v.end), []).append(v)
    for (period, end), vs in by_period.items():
        vs.sort(key=lambda v: v.filed)  # stable: a filing's own order breaks ties
        known: dict[str, dict[int, float]] = {}
        last: dict[str, float] | None = None
        for i, v in enumerate(vs):
            known.setdefault(v.column, {})[v.rank] = v.val
            if i + 1 < len(vs) and vs[i + 1].filed == v.filed:
                continue  # the rest of this filing date first
            current = {c: ranks[min(ranks)] for c, ranks in known.items()}
            if current != last:
                forms = sorted({w.form for w in vs if w.filed == v.filed})
                rows.append(
                    {
                        "period_end": end,
                        "period": period,
                        "form": ",".join(forms),
                        "filed": v.filed,
                        **current,
                    }
                )
                last = current
    return rows


def statements_from_companyfacts(facts: dict, ticker: str) -> pd.DataFrame:
    """The ticker's statement versions (``altdata.statements`` columns), annual and quarterly."""
    rows = _versions(_values(facts))
    if not rows:
        return empty_rows()
    frame = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in frame:
            frame[c] = float("nan")
    derived = frame["total_assets"] - frame["total_equity"]
    frame["total_liabilities"] = frame["total_liabilities"].fillna(derived)
    frame[TICKER] = ticker
    frame[KNOWN_AT] = known_after_close(frame["filed"])
    frame["period_end"] = frame["period_end"].dt.strftime("%Y-%m-%d")
    frame["filed"] = frame["filed"].dt.strftime("%Y-%m-%d")
    return frame[list(empty_rows().columns)].sort_values(KNOWN_AT, kind="stable")
