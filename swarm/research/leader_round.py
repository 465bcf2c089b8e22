"""The leader's round: from the three fact sheets to the synthesis the strategy half reads.

The rules leader (swarm.research.leader) votes; an LLM, when the run has one, rewrites the
summary; then the fundamental and sentiment views steer the families and rank the universe,
this round's study puts the families its numbers favour first, this run's gate verdicts so
far reorder them, and memory (swarm.research.leader_memory) has the last word. Writes
findings.json, fact_sheets.json, synthesis.json, recalled.json, rounds.json and research.md.
A skipped round keeps the last synthesis and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gate.contracts import GateDecision
from swarm.llm.brains import llm_summary
from swarm.research.feedback import rerank, run_outcomes
from swarm.research.leader import lead
from swarm.research.leader_memory import consult_memory
from swarm.research.models import DataBrief, Domain, FactSheet, Finding, ResearchSynthesis
from swarm.research.research_md import render_research_md
from swarm.research.round_study import apply_alt_studies, apply_study, apply_views
from swarm.research.rounds import StudyRecord
from swarm.research.runtime import ResearchRuntime

LLMLog = Callable[[dict[str, Any]], None]


def lead_round(
    ctx: ResearchRuntime,
    *,
    sheets: Sequence[FactSheet],
    brief: DataBrief,
    findings: Sequence[Finding],
    failed: Sequence[str] = (),
    studies: Sequence[StudyRecord] = (),
    feedback: Sequence[str] = (),
    decisions: Sequence[GateDecision] = (),
    research_round: int = 1,
    llm_events: Sequence[dict[str, Any]] = (),
    llm_log: LLMLog | None = None,
) -> tuple[ResearchSynthesis, list[StudyRecord]]:
    """(synthesis, studies with this round's updated by its effect on the families).
    ``llm_log``: where LLM events go when the run has an LLM (None: the rules brain only)."""
    order = {d: i for i, d in enumerate(Domain)}
    sheets = sorted(sheets, key=lambda s: order[s.domain])
    findings = sorted(findings, key=lambda f: (f.symbol, f.type.value, f.specialization))
    synthesis = lead(sheets, brief)
    if llm_log is not None:
        # Subagents ran in parallel: log their events in a fixed order, so reruns match.
        for event in sorted(llm_events, key=lambda e: (e.get("subagent"), e.get("symbol"))):
            llm_log(event)
        synthesis = llm_summary(ctx.llm, synthesis, log=llm_log)
    if failed:
        synthesis.gaps.append(f"failed subagents: {', '.join(sorted(failed))}")
    apply_views(synthesis, sheets, findings, ctx.symbols)
    # This round's study first, then this run's verdicts: a family the study favours that
    # the gate has already scored low is not put back in front of better-scored ones.
    studies = apply_study(synthesis, list(studies))
    apply_alt_studies(ctx, synthesis)  # research -> strategy: the alt-data families supported
    if feedback:
        # A RESEARCH round: say what the gate reported, so the research record shows why it reran.
        synthesis.gaps.append(f"gate feedback: {feedback[-1]}")
    if decisions:
        # ...and let this run's verdicts so far reorder the families (memory may be off).
        families, notes = rerank(synthesis.recommended_families, run_outcomes(list(decisions)))
        synthesis.recommended_families = families
        synthesis.run_feedback = notes
        if notes:
            synthesis.summary += f" This run so far: families reordered to {', '.join(families)}."
    recalled = consult_memory(ctx, synthesis, findings, sheets, round_=research_round)
    _write(ctx, synthesis, findings, sheets, recalled, studies)
    n_abstained = sum(f.abstained for f in findings)
    ctx.progress.stage(
        "research",
        f"leader: regime {synthesis.regime.value}, signal {synthesis.signal:+.2f}, confidence "
        f"{synthesis.confidence:.2f} ({synthesis.quality}); {len(findings)} findings, "
        f"{n_abstained} abstained; families {synthesis.recommended_families}",
    )
    return synthesis, studies


def _write(
    ctx: ResearchRuntime,
    synthesis: ResearchSynthesis,
    findings: list[Finding],
    sheets: list[FactSheet],
    recalled: dict[str, Any],
    studies: list[StudyRecord],
) -> None:
    ctx.run.write_json("research/findings.json", [f.model_dump(mode="json") for f in findings])
    ctx.run.write_json("research/fact_sheets.json", [s.model_dump(mode="json") for s in sheets])
    ctx.run.write_json("research/synthesis.json", synthesis.model_dump(mode="json"))
    ctx.run.write_json("research/recalled.json", recalled)
    if studies:
        ctx.run.write_json("research/rounds.json", [r.model_dump(mode="json") for r in studies])
    ctx.run.write_text("research/research.md", render_research_md(synthesis, findings, recalled))


def keep_advice(
    ctx: ResearchRuntime,
    last: ResearchSynthesis,
    studies: Sequence[StudyRecord],
    findings: Sequence[Finding],
) -> ResearchSynthesis:
    """A skipped round: the last synthesis stands (a copy: the state's is not changed), with
    the skip said in its gaps."""
    synthesis = last.model_copy(deep=True)
    record = studies[-1]
    synthesis.gaps.append(f"research round {record.research_round} skipped: {record.skip_reason}")
    synthesis.studies = [r.headline() for r in studies]
    synthesis.study_effect = [f"round {record.research_round} skipped: no change to the advice"]
    synthesis.summary += f" Round {record.research_round} skipped: {record.skip_reason}."
    ctx.run.write_json("research/synthesis.json", synthesis.model_dump(mode="json"))
    ctx.run.write_text("research/research.md", render_research_md(synthesis, list(findings)))
    ctx.progress.stage("research", f"leader: round {record.research_round} skipped, advice kept")
    return synthesis
