"""Strategy development node: proposals -> Backtrader code -> static validation."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from langgraph.runtime import Runtime

from gate.contracts import FailureAnalysis, VariantEvaluation
from strategies.codegen import make_variant
from strategies.spec import StrategySpec
from strategies.validate import validate_code
from swarm.agents.strategy_dev import preferred_order, propose
from swarm.context import RunContext
from swarm.nodes.backtest import code_file
from swarm.state import RESET, DevelopState


def index_entry(record: dict[str, Any]) -> dict[str, Any]:
    """A variant as ``all_variants`` keeps it: everything but the code, plus where the code is."""
    return {k: v for k, v in record.items() if k != "code"} | {
        "code_file": code_file(record["variant_id"])
    }


def with_code(ctx: RunContext, entry: dict[str, Any]) -> dict[str, Any]:
    """An ``all_variants`` entry with its (sha256-verified) source put back."""
    if "code" in entry:
        return entry
    from swarm.nodes.backtest import read_code

    return entry | {"code": read_code(ctx, entry["variant_id"], entry["code_sha256"])}


def strategy_dev(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    cfg = ctx.config
    iteration = state.get("iteration", 1)
    route = state.get("route", "INITIAL")
    all_variants = dict(state.get("all_variants", {}))
    seen = {StrategySpec.model_validate(v["spec"]).trial_key() for v in all_variants.values()}

    synthesis = state.get("synthesis") or {}
    families = preferred_order(cfg.preferred_families, synthesis.get("recommended_families", []))
    suggested = (state.get("data_brief") or {}).get("suggested")
    best = None
    if state.get("best"):
        best_id = state["best"]["variant_id"]
        best = (best_id, StrategySpec.model_validate(all_variants[best_id]["spec"]))
    last = [
        (
            VariantEvaluation.model_validate(e),
            StrategySpec.model_validate(all_variants[e["variant_id"]]["spec"]),
        )
        for e in state.get("evaluations", [])
    ]
    failure = FailureAnalysis.model_validate(state["failure"]) if state.get("failure") else None
    # A distinct, reproducible stream per (seed, iteration, research round).
    rng = random.Random(cfg.seed * 1_000_003 + iteration * 101 + state.get("research_round", 1))

    proposals = propose(
        route=route, n=cfg.variants, rng=rng, seen=seen, families=families,
        suggested=suggested, best=best, last=last, failure=failure,
        min_trades=ctx.criteria.min_trades,
    )  # fmt: skip

    variants, rejected = [], 0
    for k, prop in enumerate(proposals, start=1):
        spec: StrategySpec = prop.spec
        variant_id = f"i{iteration:02d}-v{k:02d}-{spec.family.value}-{spec.trial_key()[:6]}"
        variant = make_variant(
            spec, variant_id=variant_id, parent_id=prop.parent_id, iteration=iteration, route=route
        )
        ctx.run.write_text(code_file(variant_id), variant.code)
        report = validate_code(variant.code)
        record = variant.model_dump(mode="json") | {"class_name": report.class_name}
        # Every variant ever built stays in the state for lineage, without its source (which
        # is in strategies/<id>.py): the state is checkpointed at every super-step.
        all_variants[variant_id] = index_entry(record)
        if not report.ok:
            rejected += 1
            ctx.run.tracker.append(
                {
                    "kind": "variant_rejected", "run_id": ctx.run.root.name,
                    "iteration": iteration, "route": route, "variant_id": variant_id,
                    "parent_id": prop.parent_id, "code_sha256": variant.code_sha256,
                    "errors": report.errors,
                    "symbols": ctx.symbols,
                    "metrics": None,
                    "gate_score": None,
                    "status": "rejected",
                    "recorded_at": datetime.now(UTC).isoformat(),
                }
            )  # fmt: skip
            continue
        variants.append(record)
    ctx.progress.start_batch(len(variants) * len(ctx.symbols) * len(ctx.folds))
    ctx.progress.stage(
        "strategy",
        f"iteration {iteration}/{cfg.limits.max_iterations} route {route}: "
        f"{len(variants)} variants ({', '.join(v['spec']['name'] for v in variants)})"
        + (f", {rejected} rejected by validation" if rejected else ""),
    )
    return {"variants": variants, "all_variants": all_variants, "results": RESET}
