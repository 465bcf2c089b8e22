"""The leader's memory step (swarm.memory): recall lessons and strategies tried on these
symbols / this style, let past gate outcomes reorder the recommended families, and store this
round's findings, fact sheets and synthesis. What was recalled is research/recalled.json."""

from __future__ import annotations

from typing import Any

from swarm.research.models import FactSheet, Finding, ResearchSynthesis
from swarm.research.runtime import ResearchRuntime

RECALL_K = 8


def preferred_style(ctx: ResearchRuntime) -> list[str]:
    """The run's preferred families (none when the config names none)."""
    return list(getattr(ctx.config, "preferred_families", None) or [])


def consult_memory(
    ctx: ResearchRuntime,
    synthesis: ResearchSynthesis,
    findings: list[Finding],
    sheets: list[FactSheet],
    *,
    round_: int,
) -> dict[str, Any]:
    """Recall, let past gate outcomes reorder the families (in place on ``synthesis``),
    then store this round. Returns the content of research/recalled.json. Never raises:
    memory problems leave the research as it was, with the reason recorded."""
    from swarm.memory import memory_for, memory_line, recollections_json, run_scope

    try:
        memory = memory_for(ctx)
        status = memory.status()
        style, regime = preferred_style(ctx), synthesis.regime.value
        scope = run_scope(ctx.config)
        query = {
            "symbols": list(ctx.symbols),
            "style": style,
            "regime": regime,
            "k": RECALL_K,
            **scope,
        }
        recalled = _recall(memory, ctx, style, regime, scope)
        outcomes = memory.family_outcomes(
            ctx.symbols, exclude_run=ctx.run.root.name, timeframe=scope.get("timeframe")
        )
        families, notes, demoted = _reorder_families(synthesis, outcomes, recalled)
        stored = _store_round(memory, ctx, synthesis, findings, sheets, round_, regime, scope)
        status = {
            **status,
            "stored": stored,
            "reason": memory.reason,
            "available": status["available"],
        }
        promoted = [f for f in families if outcomes.get(f) and outcomes[f].n_passed > 0]
        ctx.progress.stage(
            "memory",
            memory_line(
                recalled, promoted=promoted, demoted=demoted, stored=stored, reason=memory.reason
            ),
        )
        return recollections_json(
            recalled, query=query, outcomes=outcomes, notes=notes, status=status
        )
    except Exception as exc:  # memory is an aid: it must never cost the research
        reason = f"memory step failed: {type(exc).__name__}: {exc}"
        ctx.progress.stage("memory", reason)
        return {
            "memory": {"available": False, "reason": reason},
            "query": {},
            "recalled": [],
            "family_outcomes": {},
            "adjustments": [],
        }


def _recall(memory: Any, ctx: ResearchRuntime, style: list[str], regime: str, scope: dict) -> list:
    """The RECALL_K memories closest to this run's symbols, style, regime and scope."""
    return memory.recall(
        ctx.symbols,
        style,
        regime,
        k=RECALL_K,
        timeframe=scope.get("timeframe"),
        sector=scope.get("sector"),
    )


def _reorder_families(
    synthesis: ResearchSynthesis, outcomes: dict, recalled: list
) -> tuple[list[str], list[str], list[str]]:
    """(families, notes, demoted): past gate outcomes reorder the recommended families, in
    place on ``synthesis``, with the notes in its summary and what was recalled."""
    from swarm.memory import adjust_families

    families, notes, demoted = adjust_families(synthesis.recommended_families, outcomes)
    if notes:
        synthesis.summary += " Memory: " + "; ".join(notes) + "."
    synthesis.recommended_families = families
    synthesis.memory_notes = notes
    synthesis.demoted_families = demoted
    synthesis.recalled = [r.id for r in recalled]
    return families, notes, demoted


def _store_round(
    memory: Any,
    ctx: ResearchRuntime,
    synthesis: ResearchSynthesis,
    findings: list[Finding],
    sheets: list[FactSheet],
    round_: int,
    regime: str,
    scope: dict,
) -> int:
    """Store this round's findings, fact sheets and synthesis; returns how many records."""
    run_id = ctx.run.root.name
    split = getattr(ctx, "split", None)
    window = f"{split.insample_start}..{split.insample_end}" if split else None
    stored = memory.remember_findings(
        run_id, findings, iteration=round_, regime=regime, scope=scope
    )
    stored += memory.remember_fact_sheets(
        run_id, sheets, symbols=ctx.symbols, iteration=round_, regime=regime, scope=scope
    )
    stored += memory.remember_research(
        run_id, synthesis, symbols=ctx.symbols, iteration=round_, window=window, scope=scope
    )
    return stored
