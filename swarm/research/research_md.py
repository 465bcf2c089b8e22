"""research.md: the synthesis, the memory recalled, the fact sheets and every finding."""

from __future__ import annotations

from typing import Any

from swarm.research.models import FactSheet, Finding, ResearchSynthesis


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
        ),
        "",
    ]
    return lines


def render_research_md(
    synthesis: ResearchSynthesis,
    findings: list[Finding],
    recalled: dict[str, Any] | None = None,
) -> str:
    """research.md: the synthesis, this run's rounds and steering, what memory recalled, one
    section per domain fact sheet, the findings per symbol with their evidence, the gaps."""
    syn = synthesis
    lines = [
        "# Research synthesis",
        "",
        _md(syn.summary),
        "",
        f"- signal **{syn.signal:+.2f}**, confidence **{syn.confidence:.2f}** (over the "
        f"domains with data), coverage **{syn.coverage:.2f}** of domains "
        f"({syn.finding_coverage:.0%} of findings), quality **{syn.quality}**, regime "
        f"**{syn.regime.value}**" + (", **degraded**" if syn.degraded else ""),
        f"- recommended families: {', '.join(syn.recommended_families) or 'none'}"
        + (
            f" (demoted by memory: {', '.join(syn.demoted_families)})"
            if syn.demoted_families
            else ""
        ),
        "",
    ]
    lines += _rounds_lines(syn)
    lines += render_recalled_md(recalled)
    for fs in syn.fact_sheets:
        lines += _fact_sheet_lines(fs)
    lines += _findings_lines(findings)
    if syn.gaps:
        lines += ["## Gaps", "", *[f"- {_md(g)}" for g in syn.gaps], ""]
    return "\n".join(lines)


def _rounds_lines(syn: ResearchSynthesis) -> list[str]:
    """This run's gate feedback, the research rounds' studies and the steering notes."""
    lines: list[str] = []
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
    if syn.alt_studies:
        lines += [
            "## Alternative data -> strategy families",
            "",
            "In-sample studies of the edges the alt-data families trade (rows known by the "
            "in-sample end only):",
            "",
            *[f"- {_md(line)}" for line in syn.alt_studies],
            "",
            "Proposed to the strategy half: "
            + (", ".join(syn.proposed_families) or "none (no study has t >= 2)"),
            "",
        ]
    if syn.steering:
        lines += [
            "## Fundamental and sentiment steering",
            "",
            *[f"- {_md(n)}" for n in syn.steering],
            "",
        ]
    return lines


def _fact_sheet_lines(fs: FactSheet) -> list[str]:
    """A domain's fact sheet: its signal, approach, insights, conflicts, risks, opportunities."""
    lines = [
        f"## {fs.domain.value.capitalize()} (signal {fs.signal:+.2f}, confidence "
        f"{fs.confidence:.2f}; {fs.n_findings - fs.n_abstained}/{fs.n_findings} findings "
        f"active, coverage {fs.coverage:.2f})",
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
    return lines


def _findings_lines(findings: list[Finding]) -> list[str]:
    """One table of findings per symbol, then the exact values each cited as evidence."""
    lines = ["## Findings", ""]
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
    return lines
