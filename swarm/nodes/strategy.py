"""Strategy development node: proposals -> Backtrader code -> static validation.

Which families propose, in what order and with how many slots, is the family registry's
(``swarm.families``): repairs of the analysed best first, then each self-proposing family
(the decision pipeline, the portfolio families, any plugin), then the alt-data families a
research study supports (``swarm.nodes.strategy_research``), then the LLM and the rules brain
on the block families with the slots left.
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from gate.contracts import FailureAnalysis
from gate.evaluate import rank_key
from strategies.family_api import FamilyRegistry, Proposal, ProposalContext, own_best
from strategies.regime import available_filters
from strategies.spec import StrategySpec
from swarm.agents.strategy_dev import preferred_order, repair_proposals, repair_slots
from swarm.context import RunContext
from swarm.families import registry
from swarm.nodes.screen_tuner import ScreenTuner, screens
from swarm.nodes.strategy_llm import llm_proposals
from swarm.nodes.strategy_research import research_proposals
from swarm.nodes.variants import build_variants
from swarm.regime_data import available_indices
from swarm.sizing import pin_proposals
from swarm.state import RESET, DevelopState, StoredVariant


def _repair_parent(
    failure: FailureAnalysis | None,
    all_variants: dict[str, StoredVariant],
    best: tuple[str, StrategySpec] | None,
) -> tuple[str, StrategySpec] | None:
    """The variant whose failing criteria the failure analysis lists (the last iteration's
    best), else the run's best."""
    vid = failure.best_variant_id if failure is not None else None
    if vid is not None and vid in all_variants:
        return vid, all_variants[vid].spec
    return best


def _keys(proposals: list[Proposal]) -> set[str]:
    return {p.spec.trial_key() for p in proposals}


def _chained(tuners: list[ScreenTuner]) -> Any:
    """The last sweep's ledger (each sweep starts from the earlier one's), or None."""
    ledgers = [t.ledger for t in tuners if t.ledger is not None]
    return ledgers[-1] if ledgers else None


def _own_families(
    reg: FamilyRegistry,
    ctx: RunContext,
    state: DevelopState,
    pctx: ProposalContext,
    budget: int,
    tuners: dict[str, ScreenTuner],
) -> list[Proposal]:
    """Each self-proposing family's share, in the registry's order: its slots of what is
    left, around its own best (through the screen when it reproduces that best)."""
    out: list[Proposal] = []
    for plugin in reg:
        if not plugin.self_proposing:
            continue
        parent = own_best(reg, plugin, pctx.best, pctx.last, rank_key)
        tuner = None
        if screens(ctx.config, plugin, parent):
            tuner = ScreenTuner(
                ctx,
                state,
                parent,
                iteration=state.get("iteration", 1),
                route=pctx.route,
                scope=plugin.scope,
                ledger=_chained(list(tuners.values())),
            )
            tuners[plugin.name] = tuner
        n = plugin.slots(pctx.families, budget - len(out), pctx.n_symbols)
        props = plugin.propose(pctx.with_(seen=pctx.seen, own_best=parent, tuner=tuner), n)
        pctx.seen = pctx.seen | _keys(props)
        out += props
    return out


def _block_proposals(
    reg: FamilyRegistry,
    ctx: RunContext,
    state: DevelopState,
    pctx: ProposalContext,
    n: int,
    tuners: dict[str, ScreenTuner],
) -> list[Proposal]:
    """The rules brain's share: around the best catalogue spec. When the run's best belongs to
    a family whose screen swept this iteration, its tuning share goes through that sweep
    around it (the next-ranked sets); else through the block screen, when it reproduces the
    parent, chained to the earlier sweeps' ledger."""
    catch_all, best = reg.catch_all(), pctx.best
    rules_best = best if best and reg.rules_mutable(best[1]) else None
    rules_last = [(ev, s) for ev, s in pctx.last if reg.rules_mutable(s)]
    tuner_best, tuner = rules_best, None
    owner = tuners.get(reg.for_spec(best[1]).name) if best is not None else None
    if owner is not None:
        tuner_best, tuner = best, owner
    elif screens(ctx.config, catch_all, rules_best):
        tuner = ScreenTuner(
            ctx,
            state,
            rules_best,
            iteration=state.get("iteration", 1),
            route=pctx.route,
            ledger=_chained(list(tuners.values())),
        )
        tuners[catch_all.name] = tuner
    if n <= 0:
        return []
    return catch_all.propose(pctx.with_(own_best=tuner_best, last=rules_last, tuner=tuner), n)


def strategy_dev(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """STRATEGY_DEV: this iteration's variants: the near miss's repairs first, then the
    families' own proposals, the LLM's and the rule blocks', built and validated."""
    ctx = runtime.context
    cfg = ctx.config
    reg = registry()
    iteration = state.get("iteration", 1)
    route = state.get("route", "INITIAL")
    all_variants = dict(state.get("all_variants", {}))
    synthesis, brief = state.get("synthesis"), state.get("data_brief")
    order = preferred_order(
        cfg.preferred_families, synthesis.recommended_families if synthesis else []
    )
    best = _best_pair(state, all_variants)
    last = [(e, all_variants[e.variant_id].spec) for e in state.get("evaluations", [])]
    failure = state.get("failure")
    # A distinct, reproducible stream per (seed, iteration, research round).
    rng = random.Random(cfg.seed * 1_000_003 + iteration * 101 + state.get("research_round", 1))
    regime_filters = available_filters(available_indices(ctx))  # those the run's data allows
    seen = {v.spec.trial_key() for v in all_variants.values()}

    # A near miss is pursued along what it missed: TUNE and REFINE start with the analysed
    # best's repairs along its failing criteria (any scope); the families split the rest.
    repaired = _repaired(reg, cfg, route, failure, all_variants, best, rng, seen, regime_filters)
    budget = cfg.variants - len(repaired)
    pctx = ProposalContext(
        route=route,
        rng=rng,
        seen=seen | _keys(repaired),
        families=list(cfg.families),
        n_symbols=len(ctx.symbols),
        best=best,
        last=last,
        failure=failure,
        run=ctx,
        extra=_proposal_extra(ctx, order, brief, regime_filters),
        space=cfg.param_space,
    )
    tuners: dict[str, ScreenTuner] = {}
    own = _own_families(reg, ctx, state, pctx, budget, tuners)
    own += research_proposals(
        reg, ctx, pctx, budget - len(own), synthesis.proposed_families if synthesis else []
    )
    n_blocks = budget - len(own)
    custom_code: dict[str, str] = {}
    llm = llm_proposals(ctx, state, pctx, n_blocks, order, custom_code)
    rules = _block_proposals(reg, ctx, state, pctx, n_blocks - len(llm), tuners)
    for tuner in tuners.values():  # the sweeps' series and records, once each
        tuner.flush()
    proposals = repaired + own + llm + rules
    if cfg.sizing:  # --sizing: the run's sizing on every catalogue spec (swarm.sizing)
        tried = {v.spec.trial_key() for v in all_variants.values()}
        proposals = pin_proposals(proposals, cfg.sizing, seen=tried, own_code=custom_code)

    variants, all_variants, rejected = build_variants(
        reg, ctx, proposals, custom_code, all_variants, iteration=iteration, route=route
    )
    _announce(reg, ctx, iteration, route, variants, rejected)
    ledger = _chained(list(tuners.values()))  # it holds every sweep's trials
    return {"variants": variants, "all_variants": all_variants, "results": RESET} | (
        {"ledger": ledger} if ledger is not None else {}
    )


def _best_pair(state: DevelopState, all_variants: dict) -> tuple[str, Any] | None:
    """(id, spec) of the best variant so far, or None before one."""
    if not state.get("best"):
        return None
    best_id = state["best"].variant_id
    return (best_id, all_variants[best_id].spec)


def _repaired(reg, cfg, route, failure, all_variants, best, rng, seen, regime_filters) -> list:
    """The analysed near miss's repairs along its failing criteria, as proposals (none when
    there is no repairable parent)."""
    parent = _repair_parent(failure, all_variants, best)
    moves = reg.repair_moves(parent[1]) if parent is not None else None
    return [
        Proposal(p.spec, p.parent_id, p.why)
        for p in repair_proposals(
            route=route,
            failure=failure,
            parent=parent,
            moves=moves,
            n=repair_slots(cfg.variants, failure),
            rng=rng,
            seen=seen,
            regime_filters=regime_filters,
        )
    ]


def _proposal_extra(ctx: RunContext, order, brief, regime_filters) -> dict[str, Any]:
    """What the families' proposers read besides the context: research order, suggested
    parameters, the trade floor, the directive's families and the usable regime filters."""
    cfg = ctx.config
    return {
        "order": order,
        "suggested": brief.suggested.model_dump(mode="json") if brief else None,
        "min_trades": ctx.criteria.min_trades,
        "directive_families": cfg.preferred_families,
        "regime_filters": regime_filters,
    }


def _announce(reg, ctx: RunContext, iteration: int, route, variants: list, rejected: int) -> None:
    """Start the progress batch (jobs x folds) and say which variants this iteration runs."""
    cfg = ctx.config
    jobs = sum(len(reg.job_symbols(v.spec, ctx.symbols)) for v in variants)
    ctx.progress.start_batch(jobs * len(ctx.folds))
    ctx.progress.stage(
        "strategy",
        f"iteration {iteration}/{cfg.limits.max_iterations} route {route}: "
        f"{len(variants)} variants ({', '.join(v.spec.name for v in variants)})"
        + (f", {rejected} rejected by validation" if rejected else ""),
    )
