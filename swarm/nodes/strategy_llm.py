"""The LLM's share of a strategy iteration's block slots (``--llm``): specs, and code of its
own kept apart for validation."""

from __future__ import annotations

from strategies.family_api import Proposal, ProposalContext
from swarm.context import RunContext
from swarm.llm.brains import llm_strategy_specs
from swarm.nodes.llm_log import llm_logger
from swarm.nodes.strategy_brief import brief_text, catalogue_text
from swarm.state import DevelopState


def llm_proposals(
    ctx: RunContext,
    state: DevelopState,
    pctx: ProposalContext,
    n: int,
    order: list[str],
    custom_code: dict[str, str],
) -> list[Proposal]:
    """The LLM's share of the block slots (its own code kept in ``custom_code``)."""
    if ctx.llm is None or ctx.llm.exhausted or n <= 0:
        return []
    iteration, route, best = state.get("iteration", 1), pctx.route, pctx.best
    parent = best[0] if best and route in ("TUNE", "FIX", "REFINE") else None
    out: list[Proposal] = []
    for spec, code, why in llm_strategy_specs(
        ctx.llm,
        n=n,
        route=route,
        brief=brief_text(state, route, best, pctx.last, pctx.failure, order),
        catalogue=catalogue_text(pctx.extra["regime_filters"]),
        seen=pctx.seen,
        untrusted=[i.headline for i in ctx.news_items],
        log=llm_logger(ctx, iteration=iteration, route=route),
    ):
        if code is not None:
            custom_code[spec.trial_key()] = code
        out.append(Proposal(spec, parent, why))
        pctx.seen = pctx.seen | {spec.trial_key()}
    return out
