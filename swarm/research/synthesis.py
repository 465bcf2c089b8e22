"""Domain synthesizers and the research leader (rules brains).

Domain vote: signal = sum(c_i s_i) / sum(c_i) over non-abstained findings.
Domain confidence = mean conviction x (0.5 + 0.5 consensus) x (0.5 + 0.5 coverage), where
consensus = |sum(c_i s_i)| / sum(c_i |s_i|) (1 when every finding points the same way) and
coverage = share of findings that did not abstain.

Leader: only domains that took a side (confidence > 0 and |signal| >= 0.05) vote. Final
signal = confidence-weighted mean of their signals; confidence = their mean confidence x
(1 - weight share of the sided domains opposing the final sign). An abstaining domain is
left out of both, so it neither dilutes nor adds disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import mean
from typing import Any

from swarm.research.context import sign
from swarm.research.models import (
    DataBrief,
    Domain,
    FactSheet,
    Finding,
    Regime,
    ResearchSynthesis,
    SymbolRank,
)

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
        domain=domain, n_findings=len(own), n_abstained=len(own) - len(active),
        subagents_ok=ok, subagents_failed=failed_set, gaps=gaps,
    )  # fmt: skip
    w = sum(f.confidence for f in active)
    if not active or w == 0:
        reasons = sorted({f"{f.type.value}.{f.specialization}: {f.reason}" for f in own})
        insights = reasons[:5] or [f"no {domain.value} findings were produced"]
        return FactSheet(
            key_insights=insights, confidence=0.0, signal=0.0,
            recommended_approach=(
                f"no {domain.value} view: {len(own) - len(active)} of {len(own)} findings "
                f"abstained" + (f", {len(failed_set)} subagent(s) failed" if failed_set else "")
            ),
            **base,
        )  # fmt: skip

    signal = sum(f.confidence * f.signal for f in active) / w
    spread = sum(f.confidence * abs(f.signal) for f in active)
    consensus = abs(signal * w) / spread if spread else 0.0
    conviction = w / len(active)
    coverage = len(active) / len(own)
    confidence = min(1.0, conviction * (0.5 + 0.5 * consensus) * (0.5 + 0.5 * coverage))
    s = sign(signal)
    agree = [f for f in active if s != 0 and sign(f.signal) == s]
    oppose = [f for f in active if s != 0 and sign(f.signal) == -s]
    strongest = sorted(active, key=_strength, reverse=True)

    n_bull = sum(f.signal > 0 for f in active)
    n_bear = sum(f.signal < 0 for f in active)
    insights = [
        f"{domain.value} vote {signal:+.2f} (confidence {confidence:.2f}) from {len(active)} "
        f"of {len(own)} findings: {n_bull} bullish, {n_bear} bearish, consensus "
        f"{consensus:.2f}, {len(own) - len(active)} abstained"
    ]
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
    if domain == Domain.TECHNICAL:
        approach, families, risks, opps = _technical_view(active, signal)
    else:
        families = []
        lean = "long bias" if signal > 0.2 else "short/avoid bias" if signal < -0.2 else "neutral"
        approach = (
            f"{lean} from {domain.value}: vote {signal:+.2f} over {len(active)} finding(s); "
            f"use as a filter on the technical entry, not as a timing signal"
        )
        risks, opps = [], []
    risks += [
        f"{_label(f)} opposes the vote (signal {f.signal:+.2f}, conf {f.confidence:.2f})"
        for f in sorted(oppose, key=_strength, reverse=True)[:2]
    ]
    opps += [
        f"{_label(f)} supports the vote (signal {f.signal:+.2f}, conf {f.confidence:.2f})"
        for f in sorted(agree, key=_strength, reverse=True)[:2]
    ]
    return FactSheet(
        key_insights=insights[:5], supporting_evidence=supporting,
        conflicting_evidence=conflicting, confidence=confidence, signal=max(-1, min(1, signal)),
        recommended_approach=approach, risks=risks, opportunities=opps,
        recommended_families=families, **base,
    )  # fmt: skip


def _took_side(fs: FactSheet) -> bool:
    return fs.confidence > 0 and abs(fs.signal) >= SIDE_THRESHOLD


def lead(fact_sheets: list[FactSheet], data_brief: DataBrief) -> ResearchSynthesis:
    """Final synthesis over the domain fact sheets (see the module docstring for the math)."""
    sided = [fs for fs in fact_sheets if _took_side(fs)]
    w = sum(fs.confidence for fs in sided)
    signal = sum(fs.confidence * fs.signal for fs in sided) / w if w else 0.0
    s = sign(signal)
    opposing = sum(fs.confidence for fs in sided if sign(fs.signal) == -s) if s else w
    disagreement = opposing / w if w else 0.0
    base_conf = w / len(sided) if sided else 0.0
    confidence = max(0.0, min(1.0, base_conf * (1 - disagreement)))

    degraded_domains = [
        fs.domain.value for fs in fact_sheets if len(fs.subagents_ok) < MIN_OK_SUBAGENTS
    ]
    gaps: list[str] = []
    for fs in fact_sheets:
        if fs.n_findings and fs.n_abstained == fs.n_findings:
            if fs.domain == Domain.FUNDAMENTAL:
                gaps.append("fundamentals unavailable offline (every fundamental subagent "
                            "abstained)")  # fmt: skip
            else:
                gaps.append(f"{fs.domain.value} unavailable: all {fs.n_findings} findings "
                            f"abstained")  # fmt: skip
        gaps += fs.gaps
    if any(g.startswith("sentiment.news abstained") and " days to " in g for g in gaps):
        gaps.append("no news in window for at least one symbol")
    gaps += [f"{d} degraded: fewer than {MIN_OK_SUBAGENTS} of {SUBAGENTS_PER_DOMAIN} "
             f"subagents ran" for d in degraded_domains]  # fmt: skip

    if confidence >= 0.6 and len(sided) >= 2 and not degraded_domains:
        quality = "high"
    elif confidence >= 0.3 and not (degraded_domains and confidence < 0.45):
        quality = "medium"
    else:
        quality = "low"

    tech = next((fs for fs in fact_sheets if fs.domain == Domain.TECHNICAL), None)
    ordered = (tech.recommended_families if tech else []) + [data_brief.suggested.family]
    ordered += _REGIME_FAMILIES[data_brief.regime]
    families = [f for i, f in enumerate(ordered) if f in FAMILIES and f not in ordered[:i]]

    parts = []
    for fs in fact_sheets:
        if _took_side(fs):
            parts.append(f"{fs.domain.value} {fs.signal:+.2f} (conf {fs.confidence:.2f})")
        else:
            parts.append(f"{fs.domain.value} no side ({fs.n_abstained}/{fs.n_findings} "
                         f"abstained)")  # fmt: skip
    sp = data_brief.suggested
    summary = (
        f"Final signal {signal:+.2f} at confidence {confidence:.2f} ({quality} quality) from "
        f"{len(sided)} domain(s) taking a side, disagreement {disagreement:.2f}: "
        f"{'; '.join(parts)}. Data regime {data_brief.regime.value} (confidence "
        f"{data_brief.regime_confidence:.2f}) across {len(data_brief.symbols)} symbol(s); "
        f"suggested {sp.family} with lookback {sp.lookback}, stop {sp.stop_loss_pct:.2f}%, "
        f"take-profit {sp.take_profit_pct:.2f}%, max hold {sp.max_hold_bars} bars. "
        f"Families to try, in order: {', '.join(families)}. {len(gaps)} gap(s) noted."
    )
    regime_dir = {Regime.TRENDING_UP: 1.0, Regime.TRENDING_DOWN: -1.0}.get(data_brief.regime)
    if tech and _took_side(tech) and regime_dir and sign(tech.signal) == -regime_dir:
        # The window's regime and the reading at its last bar disagree: say so.
        summary += (
            f" Note: the technical read at the last bar ({tech.signal:+.2f}) opposes the "
            f"window's {data_brief.regime.value} regime."
        )
    return ResearchSynthesis(
        fact_sheets=fact_sheets, confidence=confidence, quality=quality,
        signal=max(-1.0, min(1.0, signal)), gaps=gaps, regime=data_brief.regime,
        recommended_families=families, summary=summary, degraded=bool(degraded_domains),
    )  # fmt: skip


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_recalled_md(recalled: dict[str, Any] | None) -> list[str]:
    """The "Recalled from memory" section from the content of ``recalled.json``."""
    if recalled is None:
        return []
    status = recalled.get("memory") or {}
    lines = ["## Recalled from memory", ""]
    if not status.get("available"):
        lines += [f"No memory this run: {_md(str(status.get('reason') or 'unavailable'))}.", ""]
        return lines
    q = recalled.get("query") or {}
    items = recalled.get("recalled") or []
    lines.append(
        f"Store `{status.get('path')}` ({status.get('records', 0)} records before this run); "
        f"asked for symbols {', '.join(q.get('symbols') or []) or 'none'}, style "
        f"{', '.join(q.get('style') or []) or 'any'}, regime {q.get('regime') or 'any'}: "
        f"{len(items)} recalled."
    )
    lines.append("")
    if items:
        lines += [
            "| # | kind | run | iteration | outcome | relevance | matched | recollection |",
            "|---:|---|---|---:|---|---:|---|---|",
        ]
        for i, r in enumerate(items, 1):
            lines.append(
                f"| {i} | {r.get('kind')} | {r.get('run_id') or ''} | "
                f"{'' if r.get('iteration') is None else r.get('iteration')} | "
                f"{r.get('outcome') or ''} | {r.get('relevance', 0.0):.2f} | "
                f"{_md('; '.join(r.get('matched') or []))} | {_md(r.get('text', ''))} |"
            )
        lines.append("")
    else:
        lines += ["Nothing relevant in memory yet (first run on these symbols and style).", ""]
    notes = recalled.get("adjustments") or []
    lines += [
        "Effect on this research: "
        + (
            "; ".join(_md(n) for n in notes)
            if notes
            else "none (no past gate outcome for these symbols changes the recommended families)."
        ),  # fmt: skip
        "",
    ]
    return lines


def render_research_md(
    synthesis: ResearchSynthesis,
    findings: list[Finding],
    recalled: dict[str, Any] | None = None,
) -> str:
    syn = synthesis
    lines = [
        "# Research synthesis",
        "",
        _md(syn.summary),
        "",
        f"- signal **{syn.signal:+.2f}**, confidence **{syn.confidence:.2f}**, quality "
        f"**{syn.quality}**, regime **{syn.regime.value}**"
        + (", **degraded**" if syn.degraded else ""),
        f"- recommended families: {', '.join(syn.recommended_families) or 'none'}"
        + (
            f" (demoted by memory: {', '.join(syn.demoted_families)})"
            if syn.demoted_families
            else ""
        ),  # fmt: skip
        "",
    ]
    if syn.run_feedback:
        lines += [
            "## This run's gate so far",
            "",
            "A RESEARCH round: the families are reordered by what this run's gate found.",
            "",
            *[f"- {_md(n)}" for n in syn.run_feedback],
            "",
        ]
    if syn.studies:
        lines += [
            "## Research rounds",
            "",
            "What each round studied (details in data_brief.md and rounds.json):",
            "",
            *[f"- {_md(h)}" for h in syn.studies],
            *[f"- effect: {_md(e)}" for e in syn.study_effect],
            "",
        ]
        if syn.portfolio_families:
            lines += [
                f"Portfolio families the studies favour: {', '.join(syn.portfolio_families)}",
                "",
            ]
        if syn.universe_added:
            lines += [f"Universe expanded by research: +{', '.join(syn.universe_added)}", ""]
    if syn.steering:
        lines += [
            "## Fundamental and sentiment steering",
            "",
            *[f"- {_md(n)}" for n in syn.steering],
            "",
        ]
    lines += render_recalled_md(recalled)
    for fs in syn.fact_sheets:
        lines += [
            f"## {fs.domain.value.capitalize()} (signal {fs.signal:+.2f}, confidence "
            f"{fs.confidence:.2f}; {fs.n_findings - fs.n_abstained}/{fs.n_findings} findings "
            f"active)",
            "",
            f"Approach: {_md(fs.recommended_approach)}",
            "",
            "Key insights:",
            *[f"- {_md(i)}" for i in fs.key_insights],
            "",
        ]
        for title, items in (
            ("Conflicting evidence", fs.conflicting_evidence),
            ("Risks", fs.risks),
            ("Opportunities", fs.opportunities),
        ):
            if items:
                lines += [f"{title}:", *[f"- {_md(i)}" for i in items], ""]
    lines += ["## Findings", ""]
    for symbol in sorted({f.symbol for f in findings}):
        lines += [
            f"### {symbol}",
            "",
            "| subagent | signal | conf | value | as_of | reading |",
            "|---|---:|---:|---:|---|---|",
        ]
        for f in (f for f in findings if f.symbol == symbol):
            value = "" if f.value is None else f"{f.value:.6g}"
            reading = f"abstained: {f.reason}" if f.abstained else f.interpretation
            lines.append(
                f"| {f.type.value}.{f.specialization} | {f.signal:+.2f} | {f.confidence:.2f} | "
                f"{value} | {f.as_of} | {_md(reading)} |"
            )
        lines.append("")
        cited = [f for f in findings if f.symbol == symbol and f.evidence]
        if cited:
            lines += ["Evidence (exact values):", ""]
            for f in cited:
                ev = ", ".join(f"`{k}`={v:.10g}" for k, v in f.evidence.items())
                lines.append(f"- {f.type.value}.{f.specialization}: {ev}")
            lines.append("")
    if syn.gaps:
        lines += ["## Gaps", "", *[f"- {_md(g)}" for g in syn.gaps], ""]
    return "\n".join(lines)


VIEW_DOMAINS = (Domain.FUNDAMENTAL, Domain.SENTIMENT)


def universe_ranking(findings: Sequence[Finding], symbols: Sequence[str]) -> list[SymbolRank]:
    """Symbols ranked by their fundamental and sentiment findings: confidence-weighted mean
    signal of the non-abstained ones, best first; symbols without any view keep their
    universe order after the others, at score 0."""
    ranks = []
    for symbol in symbols:
        active = [
            f for f in findings
            if f.symbol == symbol and f.type in VIEW_DOMAINS and not f.abstained
        ]  # fmt: skip
        w = sum(f.confidence for f in active)
        score = sum(f.confidence * f.signal for f in active) / w if w else 0.0
        basis = (
            ", ".join(
                f"{f.type.value}.{f.specialization} {f.signal:+.2f}@{f.confidence:.2f}"
                for f in active
            )  # fmt: skip
            or "no fundamental or sentiment view"
        )
        ranks.append(SymbolRank(symbol=symbol, score=max(-1.0, min(1.0, score)),
                                n_views=len(active), basis=basis))  # fmt: skip
    position = {s: i for i, s in enumerate(symbols)}
    return sorted(ranks, key=lambda r: (r.n_views == 0, -r.score, position[r.symbol]))


def steer_families(
    families: Sequence[str], fact_sheets: Sequence[FactSheet]
) -> tuple[list[str], list[str]]:
    """(families, notes): the fundamental and sentiment views move families up.

    Views that agree with the technical side confirm the move: trend and momentum first.
    Views that oppose it say the move may fade: mean reversion and volatility first. Views
    with no technical side to compare lean the way they point: trend for a clear lean.
    No view (every finding abstained or neutral): no change, and the note says so.
    """
    views = [fs for fs in fact_sheets if fs.domain in VIEW_DOMAINS and _took_side(fs)]
    silent = [fs.domain.value for fs in fact_sheets if fs.domain in VIEW_DOMAINS
              and not _took_side(fs)]  # fmt: skip
    notes = [f"{d}: no view (abstained or neutral), does not steer" for d in silent]
    if not views:
        return list(families), notes
    w = sum(fs.confidence for fs in views)
    view = sum(fs.confidence * fs.signal for fs in views) / w
    names = " and ".join(fs.domain.value for fs in views)
    tech = next((fs for fs in fact_sheets if fs.domain == Domain.TECHNICAL), None)
    if tech is not None and _took_side(tech) and sign(view) == sign(tech.signal):
        favoured = ["trend", "momentum"]
        why = (f"{names} ({view:+.2f}) agree with the technical side ({tech.signal:+.2f}): "
               "a confirmed move, trend-following families first")  # fmt: skip
    elif tech is not None and _took_side(tech) and sign(view) == -sign(tech.signal):
        favoured = ["mean_reversion", "volatility"]
        why = (f"{names} ({view:+.2f}) oppose the technical side ({tech.signal:+.2f}): the "
               "move may fade, mean reversion and volatility first")  # fmt: skip
    elif abs(view) >= 0.3:
        favoured = ["trend"]
        why = f"{names} lean {view:+.2f} with no technical side: trend first"
    else:
        return list(families), [*notes, f"{names} lean {view:+.2f}: too weak to steer"]
    steered = list(dict.fromkeys([f for f in favoured if f in FAMILIES] + list(families)))
    return steered, [*notes, f"{why} ({', '.join(families)} -> {', '.join(steered)})"]
