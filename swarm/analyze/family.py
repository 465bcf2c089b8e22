"""The ``decision_pipeline`` family inside a develop run: its slots, its proposals, its code.

The strategy node calls three functions: :func:`decision_slots` (how many of the iteration's
variants are this family's), :func:`decision_proposals` (which parameter sets, by the gate's
route) and :func:`pipeline_code` (the replay's source, with the decisions the pipeline made
on every rebalance date of every window the run backtests: the folds and the holdout).
The run's counts (pipeline calls, cache hits) go to a progress line and to
``decision_pipeline.json`` in the run folder.
"""

from __future__ import annotations

import random
from typing import Any

from gate.contracts import VariantEvaluation
from strategies.decision_family import (
    FAMILY,
    DecisionProposal,
    is_decision_spec,
    propose_decision_specs,
    render_decision_strategy,
)
from strategies.spec import StrategySpec
from swarm.analyze.nodes import Brain
from swarm.analyze.pipeline import DecisionCache
from swarm.analyze.replay import (
    STATS_FILE,
    BudgetExhaustedError,
    DecisionReplayer,
    default_decision_cache_dir,
)

_REPLAYER = "decision_replayer"  # the run's replayer, memoised in RunContext.cache


def wanted(families: list[str]) -> bool:
    return FAMILY.value in families


def decision_slots(families: list[str], n: int) -> int:
    """All ``n`` slots when the run names only this family; half (at least one) beside others."""
    if not wanted(families):
        return 0
    return n if set(families) == {FAMILY.value} else max(1, n // 2)


def decision_proposals(
    families: list[str],
    n: int,
    *,
    route: str,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    last: list[tuple[VariantEvaluation, StrategySpec]],
) -> list[DecisionProposal]:
    """This family's proposals: around its own best (the run's best if it is one, else the
    best-scored of the last iteration), or fresh ones."""
    slots = decision_slots(families, n)
    if not slots:
        return []
    own = best if best is not None and is_decision_spec(best[1]) else None
    if own is None:
        mine = [(ev, spec) for ev, spec in last if is_decision_spec(spec)]
        if mine:
            ev, spec = max(mine, key=lambda p: p[0].score)
            own = (ev.variant_id, spec)
    return propose_decision_specs(route=route, n=slots, rng=rng, seen=seen, best=own)


def replayer_for(ctx: Any) -> DecisionReplayer:
    """The run's replayer: one memo and one set of counts for every variant of the run."""
    if _REPLAYER not in ctx.cache:
        root = ctx.config.decision_cache_dir or default_decision_cache_dir()
        ctx.cache[_REPLAYER] = DecisionReplayer(
            cache=DecisionCache(root), brain=Brain(llm=ctx.llm), news=ctx.news_items
        )
    return ctx.cache[_REPLAYER]


def pipeline_code(ctx: Any, spec: StrategySpec) -> str | None:
    """The replay's source for ``spec``; None when the LLM budget ran out (said once)."""
    replayer = replayer_for(ctx)
    if replayer.stats.budget_exhausted:
        return None
    windows = [(f.start, f.end) for f in ctx.folds]
    windows.append((ctx.holdout_fold.start, ctx.holdout_fold.end))
    bars = {s: ctx.data[s].bars for s in ctx.symbols}
    capital = ctx.config.costs.cash
    try:
        table = replayer.table(spec, bars, windows, capital=capital)
    except BudgetExhaustedError as exc:
        ctx.progress.stage("decisions", str(exc))
        _write_stats(ctx, replayer)
        return None
    s, v = replayer.stats, replayer.stats.variants[-1]
    ctx.progress.stage(
        "decisions",
        f"{spec.name}: {v['decisions']} decisions ({v['trades']} trades) on "
        f"{len(bars)} tickers: {v['pipeline_calls']} pipeline calls, {v['cache_hits']} cache "
        f"hits, {v['memo_hits']} reused; run so far {s.pipeline_calls} calls, {s.cache_hits} "
        f"cache hits ({s.per_second:.0f} decisions/s)",
    )
    _write_stats(ctx, replayer)
    return render_decision_strategy(spec, table, capital=capital)


def _write_stats(ctx: Any, replayer: DecisionReplayer) -> None:
    ctx.run.write_json(STATS_FILE, replayer.stats.model_dump(mode="json"))
