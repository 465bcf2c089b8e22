"""The ``decision_pipeline`` family inside a develop run: its slots, its proposals, its code.

The strategy node calls :func:`decision_slots` (how many of the iteration's variants are this
family's), :func:`decision_proposals` (which parameter sets, by the gate's route) and
:func:`pipeline_code` (the replay's source). During the search the pipeline decides on every
rebalance date of the walk-forward folds from bars cut at the in-sample end: the sealed
holdout is not read. The holdout node then calls :func:`holdout_variant`, which adds the
holdout's decisions for the winner only and regenerates its code (the same source a build
over every window would give); when the LLM budget runs out first, the in-sample code runs
there (no trade) and :func:`holdout_note` gives the verdict's reason the sentence that says so. Each in-sample decision whose horizon has passed is reviewed
once (``review_batch``) and the tagged record goes to memory. The run's counts (pipeline
calls, cache hits, reviews) go to progress lines and to ``decision_pipeline.json``.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from experiments.runfolder import holdout_code_file
from strategies.codegen import code_sha256
from strategies.decision_family import (
    FAMILY,
    is_decision_spec,
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
    to_table,
)
from swarm.analyze.review_batch import DecisionReviewer

HOLDOUT_NOT_DECIDED = (
    "holdout not judged on the winner's own decisions: the LLM token budget ran out "
    "({used} of {limit} tokens) before its holdout decisions were made, so its in-sample code "
    "ran there and placed no trade; rerun with a larger --max-llm-tokens (the decisions made "
    "so far are cached)"
)


def wanted(families: list[str]) -> bool:
    """Whether the run's families name the decision pipeline."""
    return FAMILY.value in families


def decision_slots(families: list[str], n: int) -> int:
    """All ``n`` slots when the run names only this family; half (at least one) beside others."""
    if not wanted(families):
        return 0
    return n if set(families) == {FAMILY.value} else max(1, n // 2)


def replayer_for(ctx: Any) -> DecisionReplayer:
    """The run's replayer: one memo and one set of counts for every variant of the run."""
    if ctx.memo.decision_replayer is None:
        root = ctx.config.decision_cache_dir or default_decision_cache_dir()
        ctx.memo.decision_replayer = DecisionReplayer(
            cache=DecisionCache(root), brain=Brain(llm=ctx.llm), news=ctx.news_items
        )
    return ctx.memo.decision_replayer


def reviewer_for(ctx: Any) -> DecisionReviewer:
    """The run's reviewer, writing to the run's memory (none with ``--memory-dir off``)."""
    if ctx.memo.decision_reviewer is None:
        ctx.memo.decision_reviewer = DecisionReviewer(memory=_memory(ctx), llm=ctx.llm)
    return ctx.memo.decision_reviewer


def _memory(ctx: Any) -> Any:
    from swarm.memory import memory_for

    try:
        return memory_for(ctx)
    except Exception as exc:  # memory is an aid: the reviews are still counted
        ctx.progress.stage("decisions", f"reviews not stored: {type(exc).__name__}: {exc}")
        return None


def insample_bars(ctx: Any) -> dict[str, pd.DataFrame]:
    """Each symbol's bars up to the in-sample end (its whole last day, for intraday bars):
    all the search's decisions may read."""
    return {s: ctx.split.insample_bars(ctx.data[s].bars) for s in ctx.symbols}


def pipeline_code(ctx: Any, spec: StrategySpec) -> str | None:
    """The replay's source for ``spec`` over the in-sample folds; None when the LLM budget
    ran out (said once). Its in-sample decisions are reviewed on the way."""
    replayer = replayer_for(ctx)
    if replayer.stats.budget_exhausted:
        return None
    windows = [(f.start, f.end) for f in ctx.folds]
    bars = insample_bars(ctx)
    capital = ctx.config.costs.cash
    try:
        decisions = replayer.sized_decisions(spec, bars, windows, capital=capital)
    except BudgetExhaustedError as exc:
        ctx.progress.stage("decisions", str(exc))
        _write_stats(ctx, replayer)
        return None
    reviewer = reviewer_for(ctx)
    new = reviewer.review(decisions, bars)
    s, v, r = replayer.stats, replayer.stats.variants[-1], reviewer.stats
    v["reviews"] = new.model_dump(exclude={"memory"})
    ctx.progress.stage(
        "decisions",
        f"{spec.name}: {v['decisions']} decisions ({v['trades']} trades) on "
        f"{len(bars)} tickers: {v['pipeline_calls']} pipeline calls, {v['cache_hits']} cache "
        f"hits, {v['memo_hits']} reused; run so far {s.pipeline_calls} calls, {s.cache_hits} "
        f"cache hits ({s.per_second:.0f} decisions/s); reviews so far {r.reviewed} "
        f"({r.counts()}), {r.stored} stored, {r.already_in_memory} already in memory",
    )
    _write_stats(ctx, replayer)
    return render_decision_strategy(spec, to_table(decisions), capital=capital)


def holdout_code(ctx: Any, spec: StrategySpec) -> str | None:
    """The winner's source with the holdout's decisions added: a build over the folds and
    the holdout on the full bars (the in-sample rows are the search's, from the memo or the
    cache). None when the LLM budget ran out. Nothing here is reviewed or fed back."""
    replayer = replayer_for(ctx)
    windows = [(f.start, f.end) for f in ctx.folds]
    windows.append((ctx.holdout_fold.start, ctx.holdout_fold.end))
    bars = {s: ctx.data[s].bars for s in ctx.symbols}
    capital = ctx.config.costs.cash
    try:
        decisions = replayer.sized_decisions(spec, bars, windows, capital=capital)
    except BudgetExhaustedError as exc:
        ctx.progress.stage("decisions", f"holdout: {exc}")
        _write_stats(ctx, replayer)
        return None
    v = replayer.stats.variants[-1]
    v["window"] = "folds + holdout (the winner, at the holdout)"
    ctx.progress.stage(
        "decisions",
        f"holdout for {spec.name}: {v['decisions']} decisions ({v['trades']} trades): "
        f"{v['pipeline_calls']} pipeline calls, {v['cache_hits']} cache hits, "
        f"{v['memo_hits']} reused",
    )
    _write_stats(ctx, replayer)
    return render_decision_strategy(spec, to_table(decisions), capital=capital)


def holdout_note(ctx: Any) -> str | None:
    """Why the winner's holdout ran without decisions of its own (the LLM budget ran out
    before they were made), for the verdict's reason; None otherwise. Read from the run's
    stats file when this process has no replayer (a run resumed after the holdout)."""
    if ctx.memo.decision_replayer is not None:
        return ctx.memo.decision_replayer.stats.holdout_note
    try:
        return json.loads(ctx.run.path(STATS_FILE).read_text(encoding="utf-8")).get("holdout_note")
    except (OSError, ValueError, AttributeError):
        return None


def _budget_figures(llm: Any) -> dict[str, Any]:
    settings = getattr(llm, "settings", None)
    return {"used": getattr(llm, "tokens_used", "?"), "limit": getattr(settings, "max_tokens", "?")}


def holdout_variant(ctx: Any, variant: dict[str, Any]) -> dict[str, Any]:
    """``variant`` as the sealed holdout runs it: a decision-pipeline winner gets its code
    regenerated with the holdout's decisions (written beside its trial's source, which stays
    as the ledger recorded it); any other variant is returned as it is."""
    spec = StrategySpec.model_validate(variant["spec"])
    if not is_decision_spec(spec):
        return variant
    code = holdout_code(ctx, spec)
    if code is None:
        replayer = replayer_for(ctx)
        replayer.stats.holdout_note = HOLDOUT_NOT_DECIDED.format(**_budget_figures(ctx.llm))
        _write_stats(ctx, replayer)
        ctx.progress.stage("holdout", replayer.stats.holdout_note)
        return variant
    ctx.run.write_text(holdout_code_file(variant["variant_id"]), code)
    return variant | {"code": code, "code_sha256": code_sha256(code)}


def with_holdout_code(ctx: Any, variant: dict[str, Any] | None) -> dict[str, Any] | None:
    """``variant`` with the holdout's source when the holdout node wrote one (the export must
    reproduce the holdout's figures), else unchanged."""
    if variant is None:
        return None
    path = ctx.run.path(holdout_code_file(variant["variant_id"]))
    if not path.exists():
        return variant
    code = path.read_text(encoding="utf-8")
    return variant | {"code": code, "code_sha256": code_sha256(code)}


def _write_stats(ctx: Any, replayer: DecisionReplayer) -> None:
    stats = replayer.stats.model_dump(mode="json")
    if getattr(ctx, "llm", None) is not None:  # the run's LLM use so far, the holdout's too
        stats["llm"] = ctx.llm.stats()
    if ctx.memo.decision_reviewer is not None:
        stats["reviews"] = ctx.memo.decision_reviewer.stats.model_dump(mode="json")
    ctx.run.write_json(STATS_FILE, stats)
