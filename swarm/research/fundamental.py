"""Rules brains of the five fundamental subagents.

With point-in-time alternative data (``context.alt``, ``--alt-data``) they read the facts of
``altdata.fundamentals`` as known at the bundle's last close and cite the rows. Without it they
read a fundamentals snapshot (yfinance ``Ticker.info`` field names) from the context's provider
and abstain when there is none. Caveat a quant must know: such a snapshot is current, not
point-in-time, so confidence is capped at 0.4 and a snapshot dated after ``as_of`` is refused.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from altdata import fundamentals as pit
from altdata.corpus import AltData
from altdata.fundamentals import Fact
from altdata.sessions import decision_time
from swarm.research.context import FundamentalsProvider, ResearchContext, abstain, clip, sign
from swarm.research.features import FeatureBundle
from swarm.research.models import Domain, Finding

MAX_CONFIDENCE = 0.4  # fundamentals are slow-moving and not point-in-time here


def _num(data: dict[str, Any], key: str) -> float | None:
    v = data.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


# Each scorer: available numbers -> list of (component score in [-1, 1], text).
Scorer = Callable[[dict[str, float]], list[tuple[float, str]]]


def _financial_metrics(x: dict[str, float]) -> list[tuple[float, str]]:
    out = []
    if (pm := x.get("profitMargins")) is not None:
        out.append((clip((pm - 0.10) / 0.15), f"profit margin {pm * 100:.1f}% (10% neutral)"))
    if (om := x.get("operatingMargins")) is not None:
        out.append((clip((om - 0.12) / 0.15), f"operating margin {om * 100:.1f}% (12% neutral)"))
    if (roe := x.get("returnOnEquity")) is not None:
        out.append((clip((roe - 0.12) / 0.15), f"ROE {roe * 100:.1f}% (12% neutral)"))
    if (rg := x.get("revenueGrowth")) is not None:
        out.append((clip(rg / 0.15), f"revenue growth {rg * 100:+.1f}%"))
    if (eg := x.get("earningsGrowth")) is not None:
        out.append((clip(eg / 0.25), f"earnings growth {eg * 100:+.1f}%"))
    return out


def _valuation(x: dict[str, float]) -> list[tuple[float, str]]:
    out = []
    if (pe := x.get("trailingPE")) is not None:
        score = -0.5 if pe <= 0 else clip((20 - pe) / 15)  # cheap is bullish, losses bearish
        out.append((score, f"trailing P/E {pe:.1f} (20 neutral)"))
        if (fpe := x.get("forwardPE")) is not None and fpe > 0 and pe > 0:
            out.append((clip((pe - fpe) / pe * 3), f"forward P/E {fpe:.1f} vs trailing {pe:.1f}"))
    if (pb := x.get("priceToBook")) is not None and pb > 0:
        out.append((clip((3 - pb) / 3), f"price/book {pb:.2f} (3 neutral)"))
    if (peg := x.get("pegRatio")) is not None and peg > 0:
        out.append((clip((1.5 - peg) / 1.5), f"PEG {peg:.2f} (1.5 neutral)"))
    if (ev := x.get("enterpriseToEbitda")) is not None and ev > 0:
        out.append((clip((14 - ev) / 10), f"EV/EBITDA {ev:.1f} (14 neutral)"))
    return out


def _balance_sheet(x: dict[str, float]) -> list[tuple[float, str]]:
    out = []
    if (de := x.get("debtToEquity")) is not None:  # yfinance reports it in percent
        out.append((clip((100 - de) / 100), f"debt/equity {de:.0f}% (100% neutral)"))
    if (cr := x.get("currentRatio")) is not None:
        out.append((clip(cr - 1.0), f"current ratio {cr:.2f} (1.0 neutral)"))
    if (qr := x.get("quickRatio")) is not None:
        out.append((clip(qr - 0.8), f"quick ratio {qr:.2f} (0.8 neutral)"))
    cash, debt, cap = x.get("totalCash"), x.get("totalDebt"), x.get("marketCap")
    if cash is not None and debt is not None and cap:
        net = (cash - debt) / cap
        out.append((clip(net * 10), f"net cash {net * 100:+.1f}% of market cap"))
    return out


def _cash_flow(x: dict[str, float]) -> list[tuple[float, str]]:
    out = []
    cap = x.get("marketCap")
    if (fcf := x.get("freeCashflow")) is not None and cap:
        y = fcf / cap
        out.append((clip((y - 0.03) / 0.04), f"free-cash-flow yield {y * 100:.2f}% (3% neutral)"))
    if (ocf := x.get("operatingCashflow")) is not None and cap:
        y = ocf / cap
        out.append((clip((y - 0.05) / 0.05), f"operating cash-flow yield {y * 100:.2f}%"))
    return out


def _industry(x: dict[str, float]) -> list[tuple[float, str]]:
    # Without a peer set there is nothing to rank against: report beta as risk context only.
    if (beta := x.get("beta")) is not None:
        return [(0.0, f"beta {beta:.2f}")]
    return []


SPECS: dict[str, tuple[tuple[str, ...], Scorer]] = {
    "financial_metrics": (
        ("profitMargins", "operatingMargins", "returnOnEquity", "revenueGrowth", "earningsGrowth"),
        _financial_metrics,
    ),
    "valuation": (
        ("trailingPE", "forwardPE", "priceToBook", "pegRatio", "enterpriseToEbitda"),
        _valuation,
    ),
    "balance_sheet": (
        ("debtToEquity", "currentRatio", "quickRatio", "totalCash", "totalDebt", "marketCap"),
        _balance_sheet,
    ),
    "cash_flow": (("freeCashflow", "operatingCashflow", "marketCap"), _cash_flow),
    "industry": (("beta",), _industry),
}


def _snapshot_date(data: dict[str, Any]) -> dt.date | None:
    raw = data.get("as_of") or data.get("asOf")
    if raw is None:
        return None
    try:
        return dt.date.fromisoformat(str(raw)[:10])
    except ValueError:
        return None


def run_fundamental(
    specialization: str, bundle: FeatureBundle, context: ResearchContext
) -> Finding:
    """A fundamental subagent's finding: from point-in-time alt data when given, else the
    fundamentals provider; abstains without a source."""
    alt = context.fundamentals_alt or context.alt
    if alt is not None:
        return run_fundamental_pit(specialization, bundle, alt, context.price_basis)
    symbol, as_of = bundle.symbol, bundle.as_of
    fields, scorer = SPECS[specialization]

    def no(reason: str) -> Finding:
        return abstain(symbol, Domain.FUNDAMENTAL, specialization, ", ".join(fields), reason, as_of)

    if context.fundamentals is None:
        where = "offline" if context.offline else "in this run"
        return no(f"no fundamentals source available {where} (yfinance unreachable or disabled)")
    data, error = context.fundamentals_for(symbol)
    if error:
        return no(f"fundamentals provider failed for {symbol} ({error})")
    if not data:
        return no(f"fundamentals provider returned nothing for {symbol}")
    snap = _snapshot_date(data)
    if snap is not None and snap > dt.date.fromisoformat(as_of):
        return no(f"fundamentals snapshot dated {snap} is after as_of {as_of} (lookahead)")

    x = {k: v for k in fields if (v := _num(data, k)) is not None}
    parts = scorer(x)
    sector, industry = data.get("sector"), data.get("industry")
    if specialization == "industry":
        if not (sector or industry) and not parts:
            return no(f"provider has no sector, industry or beta for {symbol}")
        label = f"sector {sector or 'unknown'}, industry {industry or 'unknown'}"
        interp = (
            f"{symbol} is classified in {label}"
            + (f"; {parts[0][1]}" if parts else "")
            + "; no peer set is available to rank it, so no directional stance."
        )
        return Finding(
            symbol=symbol,
            type=Domain.FUNDAMENTAL,
            specialization=specialization,
            indicator="sector, industry, beta",
            value=x.get("beta"),
            interpretation=interp,
            signal=0.0,
            confidence=0.1,
            evidence=x,
            as_of=as_of,
        )
    if not parts:
        return no(f"provider has none of {', '.join(fields)} for {symbol}")
    signal = clip(sum(s for s, _ in parts) / len(parts))
    confidence = clip(0.15 + 0.05 * len(parts) + 0.15 * abs(signal), 0, MAX_CONFIDENCE)
    when = f"snapshot dated {snap}" if snap else "undated (current) snapshot, not point-in-time"
    interp = f"{'; '.join(t for _, t in parts)} -> score {signal:+.2f} ({when})."
    return Finding(
        symbol=symbol,
        type=Domain.FUNDAMENTAL,
        specialization=specialization,
        indicator=", ".join(x),
        value=next(iter(x.values())),
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=x,
        as_of=as_of,
    )


# --------------------------------------------------------------------------- point in time

# Rows known at the decision (no lookahead), so the snapshot path's reason for its 0.4 cap is
# gone. Still below 1: statements are annual and up to 15 months old at a decision, EPS is the
# street figure, and fundamentals move a price over quarters, not over the bars a strategy
# trades. 0.6 lets a fully covered, agreeing reading outweigh one technical hint, not a consensus.
MAX_CONFIDENCE_PIT = 0.6
# Confidence kept when the components disagree completely (agreement 0): coverage still counts.
DISAGREEMENT_FLOOR = 0.4

# Each fact name -> its component score in [-1, 1] (neutral points as on the snapshot path).
PIT_SCORES: dict[str, Callable[[float], float]] = {
    "revenue_growth": lambda g: clip(g / 0.15),
    "net_margin": lambda m: clip((m - 0.10) / 0.15),
    "operating_margin": lambda m: clip((m - 0.12) / 0.15),
    "roe": lambda r: clip((r - 0.12) / 0.15),
    "trailing_pe": lambda pe: -0.5 if pe <= 0 else clip((20 - pe) / 15),
    "price_to_book": lambda pb: clip((3 - pb) / 3),
    "price_to_sales": lambda ps: clip((3 - ps) / 3),
    "liabilities_to_equity": lambda x: clip((1.5 - x) / 1.5),
    "debt_to_equity": lambda x: clip(1.0 - x),
    "current_ratio": lambda cr: clip(cr - 1.0),
    "quick_ratio": lambda qr: clip(qr - 0.8),
    "fcf_yield": lambda y: clip((y - 0.03) / 0.04),
    "capex_intensity": lambda c: clip((0.10 - c) / 0.20),  # heavy capex eats free cash flow
    "net_margin_rank": lambda r: clip(2 * (r - 0.5)),
    "revenue_growth_rank": lambda r: clip(2 * (r - 0.5)),
    "return_rank": lambda r: clip(2 * (r - 0.5)),
}
PIT_FACTS: dict[str, tuple[str, ...]] = {
    "financial_metrics": ("revenue_growth", "net_margin", "operating_margin", "roe"),
    "valuation": ("trailing_pe", "price_to_book", "price_to_sales"),
    "balance_sheet": ("liabilities_to_equity", "debt_to_equity", "current_ratio", "quick_ratio"),
    "cash_flow": ("fcf_yield", "capex_intensity"),
    "industry": ("net_margin_rank", "revenue_growth_rank"),
}
# The tables each subagent needs (all of them) or may use (any one of them).
PIT_TABLES: dict[str, tuple[str, ...]] = {
    "financial_metrics": ("statements",),
    "valuation": ("statements", "surprises"),
    "balance_sheet": ("statements",),
    "cash_flow": ("statements",),
    "industry": ("statements", "sectors"),
}


def pit_facts(
    specialization: str, alt: AltData, symbol: str, t: object, price: float, basis: str
) -> list[Fact]:
    """The facts of one subagent. Raises ``LookupError`` naming the file when it is missing or
    the ticker has no statement known at ``t``."""
    st, su = alt.table("statements"), alt.table("surprises")
    if specialization == "valuation":
        if st is not None and pit.statements_at(st, symbol, t).empty:
            st = None  # P/E from the surprises alone
        return pit.valuation(st, su, symbol, t, price, price_basis=basis)
    if st is None:
        raise LookupError(alt.missing("statements"))
    if specialization == "financial_metrics":
        return pit.financial_metrics(st, symbol, t)
    if specialization == "balance_sheet":
        return pit.balance_sheet(st, symbol, t)
    if specialization == "cash_flow":
        return pit.cash_flow(st, symbol, t, price, price_basis=basis)
    sectors = alt.table("sectors")
    if sectors is None:
        raise LookupError(alt.missing("sectors"))
    if pit.statements_at(st, symbol, t).empty:
        raise LookupError(f"{st.source} has no {symbol} statement known at {t}")
    return pit.industry(st, sectors, symbol, t)


def score_facts(facts: list[Fact], expected: int) -> tuple[float, float]:
    """(signal, confidence): the mean component score, and a confidence that grows with the
    share of expected facts available and with how many components agree with the signal."""
    scores = [PIT_SCORES[f.name](f.value) for f in facts]
    signal = clip(sum(scores) / len(scores))
    agree = sum(1.0 if sign(s) == sign(signal) else 0.5 if s == 0 else 0.0 for s in scores)
    agreement = agree / len(scores)
    coverage = min(1.0, len(facts) / expected)
    weight = DISAGREEMENT_FLOOR + (1 - DISAGREEMENT_FLOOR) * agreement
    return signal, clip(MAX_CONFIDENCE_PIT * coverage * weight, 0, 1)


def run_fundamental_pit(
    specialization: str, bundle: FeatureBundle, alt: AltData, price_basis: str | None
) -> Finding:
    """One subagent on point-in-time alternative data: the rows known at the close of the
    bundle's last bar, the price its close (split-adjusted through ``price_basis``; None: the
    corpus closes' basis)."""
    symbol, as_of = bundle.symbol, bundle.as_of
    names = PIT_FACTS[specialization]

    def no(reason: str) -> Finding:
        return abstain(symbol, Domain.FUNDAMENTAL, specialization, ", ".join(names), reason, as_of)

    feed = alt.statements
    if feed is not None:
        feed.want([symbol])  # an online source fetches the symbol when first asked

    def gap(reason: str) -> str:  # the symbol's own failure beats a generic "no statement"
        why = feed.gaps.get(symbol) if feed is not None else None
        return f"{feed.source} for {symbol}: {why}" if feed is not None and why else reason

    tables = PIT_TABLES[specialization]
    absent = [n for n in tables if alt.table(n) is None]
    if specialization == "valuation" and len(absent) < len(tables):
        absent = []  # one of the two is enough
    if absent:
        return no(gap("; ".join(alt.missing(n) for n in absent)))
    t = decision_time(as_of)
    basis = price_basis or pit.CORPUS_PRICE_BASIS
    try:
        facts = pit_facts(specialization, alt, symbol, t, bundle.value("CLOSE"), basis)
    except LookupError as exc:
        return no(gap(str(exc)))
    if not facts:
        files = " or ".join(t.source for n in tables if (t := alt.table(n)) is not None)
        return no(f"{files} give none of {', '.join(names)} for {symbol} as of {as_of}")
    signal, confidence = score_facts(facts, len(names))
    cites = list(dict.fromkeys(str(c) for f in facts for c in f.cites))
    interp = (
        f"{'; '.join(f.text for f in facts)} -> score {signal:+.2f} "
        f"({len(facts)}/{len(names)} facts; closes split-adjusted through {basis}). "
        f"Rows: {'; '.join(cites)}."
    )
    return Finding(
        symbol=symbol,
        type=Domain.FUNDAMENTAL,
        specialization=specialization,
        indicator=", ".join(f.name for f in facts),
        value=facts[0].value,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence={f.name: f.value for f in facts},
        as_of=as_of,
    )


# --------------------------------------------------------------------------- provider

INFO_FIELDS = sorted({f for fields, _ in SPECS.values() for f in fields} | {"sector", "industry"})


def yfinance_fundamentals(cache_dir: Path, *, offline: bool = False) -> FundamentalsProvider:
    """A fundamentals provider: yfinance ``Ticker.info`` when online, cached on disk as
    ``<cache_dir>/fundamentals/<SYMBOL>.json`` with the fetch date as ``as_of``, so a cached
    run works offline. The snapshot is current, not point-in-time: the subagents refuse it
    for any window ending before the fetch date (lookahead), and say so."""
    folder = Path(cache_dir) / "fundamentals"

    def provide(symbol: str) -> dict[str, Any] | None:
        path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', symbol.upper())}.json"
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                pass  # a broken cache entry is refetched (online) or treated as missing
        if offline:
            return None
        from backtest.data import quiet_yfinance  # yfinance only when a fetch is wanted

        yf = quiet_yfinance(Path(cache_dir))
        info = yf.Ticker(symbol).info or {}  # raises on network errors: a gap, not a crash
        snap = {k: info[k] for k in INFO_FIELDS if k in info}
        if not snap:
            return None
        snap["as_of"] = dt.date.today().isoformat()
        snap["source"] = "yfinance Ticker.info"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(snap, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
        return snap

    return provide
