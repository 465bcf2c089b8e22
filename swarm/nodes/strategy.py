"""Strategy development node: proposals -> Backtrader code -> static validation."""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from gate.contracts import FailureAnalysis, VariantEvaluation
from strategies.codegen import make_variant
from strategies.spec import StrategySpec, StrategyVariant
from strategies.validate import validate_code
from swarm.agents.strategy_dev import preferred_order, propose
from swarm.context import RunContext
from swarm.state import RESET, DevelopState


def strategy_dev(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    cfg = ctx.config
    iteration = state.get("iteration", 1)
    route = state.get("route", "INITIAL")
    all_variants = dict(state.get("all_variants", {}))
    seen = {StrategyVariant.model_validate(v).spec.trial_key() for v in all_variants.values()}

    synthesis = state.get("synthesis") or {}
    families = preferred_order(cfg.preferred_families, synthesis.get("recommended_families", []))
    suggested = (state.get("data_brief") or {}).get("suggested")
    best = None
    if state.get("best"):
        best_id = state["best"]["variant_id"]
        best = (best_id, StrategyVariant.model_validate(all_variants[best_id]).spec)
    last = [
        (
            VariantEvaluation.model_validate(e),
            StrategyVariant.model_validate(all_variants[e["variant_id"]]).spec,
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
        ctx.run.write_text(f"strategies/{variant_id}.py", variant.code)
        report = validate_code(variant.code)
        record = variant.model_dump(mode="json") | {"class_name": report.class_name}
        all_variants[variant_id] = record
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
