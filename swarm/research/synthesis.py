"""Domain synthesizers (rules brains): one fact sheet per domain from its findings.

Domain vote: signal = sum(c_i s_i) / sum(c_i) over non-abstained findings.
Domain confidence = mean conviction x (0.5 + 0.5 consensus) over the findings with data, where
consensus = |sum(c_i s_i)| / sum(c_i |s_i|) (1 when every finding points the same way).
Coverage = share of findings that did not abstain, its own field: an abstaining specialist
says what the domain could not see, not how sure it is of what it saw.

The leader's rules live in ``swarm.research.leader``, the fundamental / sentiment steering in
``swarm.research.steering`` and research.md in ``swarm.research.research_md``; their names are
re-exported here for the importers of this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import mean

from swarm.research.context import sign
from swarm.research.leader import FAMILIES, MIN_OK_SUBAGENTS, SUBAGENTS_PER_DOMAIN, lead
from swarm.research.models import Domain, FactSheet, Finding
from swarm.research.research_md import render_recalled_md, render_research_md
from swarm.research.steering import VIEW_DOMAINS, steer_families, universe_ranking

__all__ = [
    "FAMILIES",
    "MIN_OK_SUBAGENTS",
    "SUBAGENTS_PER_DOMAIN",
    "VIEW_DOMAINS",
    "lead",
    "render_recalled_md",
    "render_research_md",
    "steer_families",
    "synthesize_domain",
    "universe_ranking",
]


def _label(f: Finding) -> str:
    return f"{f.symbol} {f.type.value}.{f.specialization}"


def _strength(f: Finding) -> float:
    return f.confidence * abs(f.signal)


def _cite(f: Finding, n: int = 4) -> str:
    items = list(f.evidence.items())[:n]
    return ", ".join(f"{k}={v:.6g}" for k, v in items)


def _gaps(findings: list[Finding]) -> list[str]:
    """One line per abstaining specialization: how many symbols and the first reason."""
    by_spec: dict[str, list[Finding]] = {}
    for f in findings:
        if f.abstained:
            by_spec.setdefault(f"{f.type.value}.{f.specialization}", []).append(f)
    return [
        f"{spec} abstained for {len(fs)} symbol(s): {fs[0].reason}"
        for spec, fs in sorted(by_spec.items())
    ]


def _technical_view(
    active: list[Finding], signal: float
) -> tuple[str, list[str], list[str], list[str]]:
    """(approach, families, risks, opportunities) from the technical numbers."""

    def ev(spec: str, key: str) -> list[float]:
        return [f.evidence[key] for f in active if f.specialization == spec and key in f.evidence]

    adx = ev("trend", "ADX_14")
    trend_sig = [f.signal for f in active if f.specialization == "trend"]
    width_pct = ev("volatility", "BBANDS_WIDTH_20_2_pctile_252")
    natr_ratio = ev("volatility", "NATR_14_vs_median_252")
    zones = ev("momentum", "RSI_14_zone")
    rsi = ev("momentum", "RSI_14")
    risks: list[str] = []
    opps: list[str] = []
    m_adx = mean(adx) if adx else float("nan")
    m_trend = mean(trend_sig) if trend_sig else 0.0
    squeeze = sum(w <= 20 for w in width_pct) / len(width_pct) if width_pct else 0.0
    high_vol = sum(r > 1.25 for r in natr_ratio) / len(natr_ratio) if natr_ratio else 0.0
    extremes = sum(z != 0 for z in zones) / len(zones) if zones else 0.0

    if math.isfinite(m_adx) and m_adx >= 25 and abs(m_trend) >= 0.4:
        side = "long" if m_trend > 0 else "short/defensive"
        approach = (
            f"trend following / momentum ({side}): mean ADX14 {m_adx:.1f} >= 25 with mean "
            f"trend signal {m_trend:+.2f}"
        )
        families = ["trend", "momentum"] if m_trend > 0 else ["trend", "volatility"]
    elif squeeze >= 0.5:
        approach = (
            f"volatility breakout: {squeeze * 100:.0f}% of symbols have Bollinger bandwidth in "
            f"the bottom 20% of their last 252 bars (squeeze)"
        )
        families = ["breakout", "volatility"]
    elif math.isfinite(m_adx) and m_adx < 20:
        approach = f"mean reversion: mean ADX14 {m_adx:.1f} < 20 (no trend)" + (
            f", {extremes * 100:.0f}% of symbols at RSI/Stoch extremes" if zones else ""
        )
        families = ["mean_reversion", "breakout"]
    elif signal > 0:
        approach = (
            f"momentum pullback: moderate trend (mean ADX14 {m_adx:.1f}) with a "
            f"{signal:+.2f} technical vote; buy dips toward the moving averages"
        )
        families = ["momentum", "mean_reversion"]
    else:
        approach = (
            f"defensive / mean reversion: moderate trend (mean ADX14 {m_adx:.1f}) with a "
            f"{signal:+.2f} technical vote"
        )
        families = ["mean_reversion", "trend"]
    if high_vol >= 0.5 and "volatility" not in families:
        families.append("volatility")

    if natr_ratio:
        r = max(natr_ratio)
        if r > 1.25:
            risks.append(f"NATR14 up to x{r:.2f} its 252-bar median: widen stops, size down")
        elif r < 0.8:
            opps.append(f"NATR14 at x{r:.2f} its 252-bar median: calm tape, tighter stops fit")
    if rsi and max(rsi) > 70:
        risks.append(f"RSI14 {max(rsi):.1f} overbought: chasing risks a pullback")
    if rsi and min(rsi) < 30:
        opps.append(f"RSI14 {min(rsi):.1f} oversold: mean-reversion entry candidates")
    if squeeze:
        opps.append(f"{squeeze * 100:.0f}% of symbols in a Bollinger squeeze: breakout setups")
    if math.isfinite(m_adx) and m_adx < 20:
        risks.append(f"mean ADX14 {m_adx:.1f} < 20: trend signals whipsaw")
    return approach, families, risks, opps


def synthesize_domain(
    domain: Domain, findings: list[Finding], *, failed: Sequence[str] = ()
) -> FactSheet:
    """Confidence-weighted vote of one domain's findings (any number of symbols).

    ``failed`` names the specializations whose subagent raised (not abstained).
    """
    own = [f for f in findings if f.type == domain]
    active = [f for f in own if not f.abstained]
    failed_set = sorted(set(failed))
    ok = sorted({f.specialization for f in own} - set(failed_set))
    gaps = _gaps(own) + [f"{domain.value}.{s} failed (raised)" for s in failed_set]
    base = dict(
        domain=domain,
        n_findings=len(own),
        n_abstained=len(own) - len(active),
        subagents_ok=ok,
        subagents_failed=failed_set,
        gaps=gaps,
        coverage=len(active) / len(own) if own else 0.0,
    )
    w = sum(f.confidence for f in active)
    if not active or w == 0:
        return _no_view(domain, own, active, failed_set, base)

    signal, consensus, confidence = _vote(active, w)
    s = sign(signal)
    agree = [f for f in active if s != 0 and sign(f.signal) == s]
    oppose = [f for f in active if s != 0 and sign(f.signal) == -s]
    strongest = sorted(active, key=_strength, reverse=True)

    insights = _vote_insights(domain, own, active, signal, confidence, consensus)
    insights += [
        f"{_label(f)} (signal {f.signal:+.2f}, confidence {f.confidence:.2f}): {f.interpretation}"
        for f in strongest[:4]
    ]
    supporting = [
        f"{_label(f)} signal {f.signal:+.2f} conf {f.confidence:.2f}: {_cite(f)}"
        for f in sorted(agree, key=_strength, reverse=True)
    ]
    conflicting = [
        f"{_label(f)} signal {f.signal:+.2f} conf {f.confidence:.2f} against the "
        f"{signal:+.2f} vote: {_cite(f)}"
        for f in sorted(oppose, key=_strength, reverse=True)
    ]
    approach, families, risks, opps = _domain_view(domain, active, signal)
    risks += [
        f"{_label(f)} opposes the vote (signal {f.signal:+.2f}, conf {f.confidence:.2f})"
        for f in sorted(oppose, key=_strength, reverse=True)[:2]
    ]
    opps += [
        f"{_label(f)} supports the vote (signal {f.signal:+.2f}, conf {f.confidence:.2f})"
        for f in sorted(agree, key=_strength, reverse=True)[:2]
    ]
    return FactSheet(
        key_insights=insights[:5],
        supporting_evidence=supporting,
        conflicting_evidence=conflicting,
        confidence=confidence,
        signal=max(-1, min(1, signal)),
        recommended_approach=approach,
        risks=risks,
        opportunities=opps,
        recommended_families=families,
        **base,
    )


def _no_view(
    domain: Domain, own: list[Finding], active: list[Finding], failed_set: list[str], base: dict
) -> FactSheet:
    """The fact sheet of a domain without a vote: why its findings abstained or failed."""
    reasons = sorted({f"{f.type.value}.{f.specialization}: {f.reason}" for f in own})
    insights = reasons[:5] or [f"no {domain.value} findings were produced"]
    return FactSheet(
        key_insights=insights,
        confidence=0.0,
        signal=0.0,
        recommended_approach=(
            f"no {domain.value} view: {len(own) - len(active)} of {len(own)} findings "
            f"abstained" + (f", {len(failed_set)} subagent(s) failed" if failed_set else "")
        ),
        **base,
    )


def _vote(active: list[Finding], w: float) -> tuple[float, float, float]:
    """(signal, consensus, confidence) of the active findings' confidence-weighted vote;
    ``w`` is their summed confidence (> 0)."""
    signal = sum(f.confidence * f.signal for f in active) / w
    spread = sum(f.confidence * abs(f.signal) for f in active)
    consensus = abs(signal * w) / spread if spread else 0.0
    conviction = w / len(active)
    confidence = min(1.0, conviction * (0.5 + 0.5 * consensus))
    return signal, consensus, confidence


def _vote_insights(
    domain: Domain,
    own: list[Finding],
    active: list[Finding],
    signal: float,
    confidence: float,
    consensus: float,
) -> list[str]:
    """The vote in a sentence: its signal, confidence, coverage and the bull/bear count."""
    n_bull = sum(f.signal > 0 for f in active)
    n_bear = sum(f.signal < 0 for f in active)
    return [
        f"{domain.value} vote {signal:+.2f} (confidence {confidence:.2f}) from {len(active)} "
        f"of {len(own)} findings (coverage {len(active) / len(own):.2f}): {n_bull} bullish, "
        f"{n_bear} bearish, consensus {consensus:.2f}, {len(own) - len(active)} abstained"
    ]


def _domain_view(
    domain: Domain, active: list[Finding], signal: float
) -> tuple[str, list[str], list[str], list[str]]:
    """(approach, families, risks, opportunities): the technical view recommends families;
    another domain only leans, as a filter on the technical entry."""
    if domain == Domain.TECHNICAL:
        return _technical_view(active, signal)
    families: list[str] = []
    lean = "long bias" if signal > 0.2 else "short/avoid bias" if signal < -0.2 else "neutral"
    approach = (
        f"{lean} from {domain.value}: vote {signal:+.2f} over {len(active)} finding(s); "
        f"use as a filter on the technical entry, not as a timing signal"
    )
    risks: list[str] = []
    opps: list[str] = []
    return approach, families, risks, opps
