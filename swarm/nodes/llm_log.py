"""LLM events in the experiment log: fallbacks, rejections and per-iteration usage.

Records carry the common fields every JSONL line has (variant, symbols, iteration,
metrics, gate score, route) and a deterministic ``record_id``, so a replayed step
never duplicates them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from experiments.records import append_record
from strategies.route import Route
from swarm.context import RunContext


def llm_logger(
    ctx: RunContext, *, iteration: int, route: Route | str, research_round: int | None = None
) -> Callable[[dict[str, Any]], None]:
    """``research_round``: set by the research half (its events' id keeps the round apart)."""
    route = Route(route)
    # The id the records had when the round was written into the route ("RESEARCH-2").
    id_route = f"{route.value}-{research_round}" if research_round is not None else route.value

    def log(event: dict[str, Any]) -> None:
        ident = json.dumps(
            [
                event.get("kind"),
                iteration,
                event.get("role"),
                event.get("subagent"),
                event.get("symbol"),
                event.get("route", id_route),
                event.get("reasons"),
            ],
            sort_keys=True,
            default=str,
        )
        record = {
            "run_id": ctx.run.root.name,
            "iteration": iteration,
            "route": route,
            "research_round": research_round,
            "variant_id": None,
            "symbols": [event["symbol"]] if event.get("symbol") else ctx.symbols,
            "metrics": None,
            "gate_score": None,
            **event,
            "record_id": hashlib.sha256(ident.encode()).hexdigest(),
            "recorded_at": datetime.now(UTC).isoformat(),
        }
        append_record(ctx.run.tracker, record)
        ctx.progress.stage(
            "llm",
            f"{event['kind']} ({event.get('role')}): {'; '.join(map(str, event.get('reasons', [])))[:160]}",
        )

    return log


def log_usage(ctx: RunContext, *, iteration: int, route: Route | str) -> None:
    """One record per iteration with the client's running call and token counts."""
    if ctx.llm is None:
        return
    stats = ctx.llm.stats()
    append_record(
        ctx.run.tracker,
        {
            "kind": "llm_usage",
            "run_id": ctx.run.root.name,
            "iteration": iteration,
            "route": route,
            "variant_id": None,
            "symbols": ctx.symbols,
            "metrics": None,
            "gate_score": None,
            "llm": stats,
            "llm_replay": ctx.llm.replay_stats(),
            "recorded_at": datetime.now(UTC).isoformat(),
        },
    )
