"""The research leader (rules brain): one synthesis over the three domain fact sheets.

Only domains that took a side (confidence > 0 and |signal| >= 0.05) vote. Final signal =
confidence-weighted mean of their signals; confidence = their mean confidence x (1 - weight
share of the sided domains opposing the final sign). An abstaining domain is left out of
both, so it neither dilutes nor adds disagreement: the confidence is over the domains that
have data, and what the others could not see is the coverage (share of domains with data,
:func:`coverage_of`), its own field. The families to try: the technical sheet's, then the
data brief's suggestion, then the regime's.
"""

from __future__ import annotations

from swarm.research.context import sign
from swarm.research.models import DataBrief, Domain, FactSheet, Regime, ResearchSynthesis

FAMILIES = ("momentum", "mean_reversion", "breakout", "trend", "volatility")
SUBAGENTS_PER_DOMAIN = 5
MIN_OK_SUBAGENTS = 3
SIDE_THRESHOLD = 0.05  # |signal| below this is no side at all

_REGIME_FAMILIES: dict[Regime, list[str]] = {
    Regime.TRENDING_UP: ["momentum", "trend"],
    Regime.TRENDING_DOWN: ["trend", "volatility"],
    Regime.RANGE_BOUND: ["mean_reversion"],
    Regime.HIGH_VOL_CHOP: ["breakout", "volatility"],
}


def took_side(fs: FactSheet) -> bool:
    """Whether the fact sheet takes a side: some confidence and |signal| >= SIDE_THRESHOLD."""
    return fs.confidence > 0 and abs(fs.signal) >= SIDE_THRESHOLD


def has_data(fs: FactSheet) -> bool:
    """At least one of the domain's findings did not abstain."""
    return fs.n_findings > fs.n_abstained


def coverage_of(fact_sheets: list[FactSheet]) -> tuple[float, float]:
    """(share of domains with data, share of findings with data over every domain)."""
    if not fact_sheets:
        return 0.0, 0.0
    domains = sum(has_data(fs) for fs in fact_sheets) / len(fact_sheets)
    n = sum(fs.n_findings for fs in fact_sheets)
    findings = sum(fs.n_findings - fs.n_abstained for fs in fact_sheets) / n if n else 0.0
    return domains, findings


def lead(fact_sheets: list[FactSheet], data_brief: DataBrief) -> ResearchSynthesis:
    """Final synthesis over the domain fact sheets (see the module docstring for the math)."""
    sided = [fs for fs in fact_sheets if took_side(fs)]
    w = sum(fs.confidence for fs in sided)
    signal = sum(fs.confidence * fs.signal for fs in sided) / w if w else 0.0
    s = sign(signal)
    opposing = sum(fs.confidence for fs in sided if sign(fs.signal) == -s) if s else w
    disagreement = opposing / w if w else 0.0
    base_conf = w / len(sided) if sided else 0.0
    confidence = max(0.0, min(1.0, base_conf * (1 - disagreement)))
    coverage, finding_coverage = coverage_of(fact_sheets)
    n_data = sum(has_data(fs) for fs in fact_sheets)

    degraded_domains = [
        fs.domain.value for fs in fact_sheets if len(fs.subagents_ok) < MIN_OK_SUBAGENTS
    ]
    gaps = _research_gaps(fact_sheets, degraded_domains)
    quality = _quality(confidence, len(sided), degraded_domains)

    tech = next((fs for fs in fact_sheets if fs.domain == Domain.TECHNICAL), None)
    ordered = (tech.recommended_families if tech else []) + [data_brief.suggested.family]
    ordered += _REGIME_FAMILIES[data_brief.regime]
    families = [f for i, f in enumerate(ordered) if f in FAMILIES and f not in ordered[:i]]

    summary = _summary(
        fact_sheets,
        data_brief,
        signal=signal,
        confidence=confidence,
        quality=quality,
        n_sided=len(sided),
        disagreement=disagreement,
        coverage=coverage,
        finding_coverage=finding_coverage,
        n_data=n_data,
        families=families,
        n_gaps=len(gaps),
    )
    regime_dir = {Regime.TRENDING_UP: 1.0, Regime.TRENDING_DOWN: -1.0}.get(data_brief.regime)
    if tech and took_side(tech) and regime_dir and sign(tech.signal) == -regime_dir:
        # The window's regime and the reading at its last bar disagree: say so.
        summary += (
            f" Note: the technical read at the last bar ({tech.signal:+.2f}) opposes the "
            f"window's {data_brief.regime.value} regime."
        )
    return ResearchSynthesis(
        fact_sheets=fact_sheets,
        confidence=confidence,
        quality=quality,
        coverage=coverage,
        finding_coverage=finding_coverage,
        signal=max(-1.0, min(1.0, signal)),
        gaps=gaps,
        regime=data_brief.regime,
        recommended_families=families,
        summary=summary,
        degraded=bool(degraded_domains),
    )


def _research_gaps(fact_sheets: list[FactSheet], degraded_domains: list[str]) -> list[str]:
    """What the research could not see: domains that all abstained, each sheet's gaps, a
    window without news, and the domains with too few subagents run."""
    gaps: list[str] = []
    for fs in fact_sheets:
        if fs.n_findings and fs.n_abstained == fs.n_findings:
            if fs.domain == Domain.FUNDAMENTAL:
                gaps.append(
                    "fundamentals unavailable offline (every fundamental subagent abstained)"
                )
            else:
                gaps.append(
                    f"{fs.domain.value} unavailable: all {fs.n_findings} findings abstained"
                )
        gaps += fs.gaps
    if any(g.startswith("sentiment.news abstained") and " days to " in g for g in gaps):
        gaps.append("no news in window for at least one symbol")
    gaps += [
        f"{d} degraded: fewer than {MIN_OK_SUBAGENTS} of {SUBAGENTS_PER_DOMAIN} subagents ran"
        for d in degraded_domains
    ]
    return gaps


def _quality(confidence: float, n_sided: int, degraded_domains: list[str]) -> str:
    """high, medium or low: confidence, domains taking a side and none degraded."""
    if confidence >= 0.6 and n_sided >= 2 and not degraded_domains:
        return "high"
    if confidence >= 0.3 and not (degraded_domains and confidence < 0.45):
        return "medium"
    return "low"


def _summary(
    fact_sheets: list[FactSheet],
    data_brief: DataBrief,
    *,
    signal: float,
    confidence: float,
    quality: str,
    n_sided: int,
    disagreement: float,
    coverage: float,
    finding_coverage: float,
    n_data: int,
    families: list[str],
    n_gaps: int,
) -> str:
    """The synthesis in a paragraph: the vote per domain, the data regime, the suggested
    strategy and the families to try."""
    parts = []
    for fs in fact_sheets:
        if took_side(fs):
            parts.append(f"{fs.domain.value} {fs.signal:+.2f} (conf {fs.confidence:.2f})")
        else:
            parts.append(f"{fs.domain.value} no side ({fs.n_abstained}/{fs.n_findings} abstained)")
    sp = data_brief.suggested
    return (
        f"Final signal {signal:+.2f} at confidence {confidence:.2f} ({quality} quality) from "
        f"{n_sided} domain(s) taking a side, disagreement {disagreement:.2f}; coverage "
        f"{coverage:.2f} ({n_data} of {len(fact_sheets)} domains with data, "
        f"{finding_coverage:.0%} of findings): "
        f"{'; '.join(parts)}. Data regime {data_brief.regime.value} (confidence "
        f"{data_brief.regime_confidence:.2f}) across {len(data_brief.symbols)} symbol(s); "
        f"suggested {sp.family} with lookback {sp.lookback}, stop {sp.stop_loss_pct:.2f}%, "
        f"take-profit {sp.take_profit_pct:.2f}%, max hold {sp.max_hold_bars} bars. "
        f"Families to try, in order: {', '.join(families)}. {n_gaps} gap(s) noted."
    )
