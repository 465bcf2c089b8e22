"""A run's use of memory: open it once from the run config, store the gate's outcome,
and say what was recalled (one short progress line; the detail in research/recalled.json)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from swarm.memory.records import FamilyRecord, Recollection
from swarm.memory.store import ResearchMemory

log = logging.getLogger("swarm.memory")

OFF = ("off", "none")


def memory_for(ctx: Any) -> ResearchMemory:
    """The run's memory, opened once and kept in ``ctx.memo.memory``.

    Where it lives: ``ctx.memory`` (a ResearchMemory, if the context has one), else
    ``ctx.config.memory_dir``, else :func:`swarm.memory.store.default_memory_dir`. A dir of
    ``False`` / ``"off"`` / ``"none"`` disables memory.
    """
    mem = ctx.memo.memory
    if isinstance(mem, ResearchMemory):
        return mem
    mem = getattr(ctx, "memory", None)
    if not isinstance(mem, ResearchMemory):
        where: Any = getattr(getattr(ctx, "config", None), "memory_dir", None)
        if where is False or (isinstance(where, str) and where.lower() in OFF):
            mem = ResearchMemory.disabled("memory switched off for this run")
        else:
            mem = ResearchMemory(where)
            if getattr(ctx, "progress", None) is not None:
                if mem.reason:
                    ctx.progress.stage("memory", f"no memory this run: {mem.reason}")
                elif mem.notice:  # a torn store was rebuilt: say so, once
                    ctx.progress.stage("memory", mem.notice)
    ctx.memo.memory = mem
    return mem


def run_scope(config: Any) -> dict[str, str]:
    """What later recalls filter on: the run's timeframe and, for a sector universe, its
    sector (``universe_source`` "sector:tech")."""
    scope = {}
    timeframe = getattr(config, "timeframe", None)
    if timeframe:
        scope["timeframe"] = str(timeframe)
    source = str(getattr(config, "universe_source", "") or "")
    if source.startswith("sector:"):
        scope["sector"] = source.removeprefix("sector:")
    return scope


def remember_gate_outcome(ctx: Any, state: Mapping[str, Any], decision: Any) -> int:
    """For the router, after each GateDecision: store the variants tried and the gate's
    lesson in the run's memory. Never raises; returns the number of records stored."""
    try:
        synthesis = state.get("synthesis")  # a ResearchSynthesis (swarm.research.models)
        return memory_for(ctx).remember_gate_decision(
            ctx.run.root.name,
            decision,
            list(state.get("variants") or []),
            symbols=list(ctx.symbols),
            regime=synthesis.regime.value if synthesis else None,
            scope=run_scope(getattr(ctx, "config", None)),
        )
    except Exception as exc:  # memory is an aid: never a reason to lose an iteration
        log.warning("gate lessons not stored: %s: %s", type(exc).__name__, exc)
        return 0


def memory_line(
    recalled: Sequence[Recollection],
    *,
    promoted: Sequence[str] = (),
    demoted: Sequence[str] = (),
    stored: int,
    reason: str | None,
) -> str:
    """The one progress line: counts and family names only (detail: research/recalled.json)."""
    parts = [f"recalled {len(recalled)}"]
    if promoted:
        parts.append(f"promoted {', '.join(promoted)}")
    if demoted:
        parts.append(f"demoted {', '.join(demoted)}")
    parts.append(f"stored {stored}" if stored else f"nothing stored ({(reason or '')[:80]})")
    return "; ".join(parts) + " (research/recalled.json)"


def recollections_json(
    recalled: Sequence[Recollection],
    *,
    query: Mapping[str, Any],
    outcomes: Mapping[str, FamilyRecord],
    notes: Sequence[str],
    status: Mapping[str, Any],
) -> dict[str, Any]:
    """The content of ``research/recalled.json``."""
    return json.loads(
        json.dumps(
            {
                "memory": dict(status),
                "query": dict(query),
                "recalled": [r.model_dump(mode="json") for r in recalled],
                "family_outcomes": {k: v.model_dump(mode="json") for k, v in outcomes.items()},
                "adjustments": list(notes),
            },
            default=str,
        )
    )
