"""Execute the develop graph for a prepared run, from the start or from its last checkpoint.

The graph runs with LangGraph's SQLite checkpointer, stored in the run folder
(``checkpoints.sqlite``, thread id = run id, ``durability="sync"``: a super-step's
checkpoint is committed before the next one starts), so an interrupted run — killed,
crashed, interrupted — continues from its last super-step with ``prepare_resume`` +
``execute``. Each finished task of a fan-out (a backtest, a research subagent) has its
writes saved as it finishes, so a resume re-runs only the tasks that had not finished.

A resume replays, at most, the super-step that was running. Its side effects and why a
replay is safe:

- files (research/, strategies/, backtests/, charts/, report, verdict, winner/): written
  atomically (tmp + rename) with deterministic content — a replay writes the same bytes;
- experiments.jsonl: appends carry a content ``record_id`` and the tracker skips ids already
  in the file (a torn last line is cut on open), so a replayed router or holdout step adds
  only the records the killed one had not written, in the same order;
- the sealed holdout: a kill during the holdout step re-runs the same winner on it; the
  result is the same and is still never fed back;
- research memory (swarm.memory): upserts with deterministic ids;
- progress lines on stderr: repeated, cosmetic.

Preparing a run is ``swarm.run_prepare``, rebuilding one to resume it ``swarm.run_resume``, the
checkpointer ``swarm.run_checkpoint``; their public names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backtest.executors import make_executor
from experiments.runfolder import RunFolder
from gate.contracts import LoopCounters
from gate.ledger import TrialLedger
from strategies.route import Route
from swarm.config import RunConfig
from swarm.context import RunContext
from swarm.run_checkpoint import (  # noqa: F401 - re-exported for callers
    CHECKPOINT_FILE,
    TimedSqliteSaver,
    checkpointer,
    db_bytes,
)
from swarm.run_prepare import (  # noqa: F401 - re-exported for callers
    MANIFEST_FILE,
    MIN_BENCHMARK_OVERLAP,
    Prepared,
    load_data,
    prepare,
)
from swarm.run_resume import (  # noqa: F401 - re-exported for callers
    check_same_data,
    prepare_resume,
    restore_run_universe,
)

# Their names before the split (tests import them from here).
_load, _check_same_data, _restore_universe = load_data, check_same_data, restore_run_universe

RECURSION_LIMIT = 1_000  # ~8 super-steps per iteration; far above any configured limit


@dataclass
class Outcome:
    """What ``execute`` did: the final state, and whether there was anything left to do."""

    state: dict[str, Any]
    already_finished: bool = False
    resumed_from_step: int | None = None  # the super-step a resume continued from
    checkpoints: dict[str, Any] = field(default_factory=dict)


def initial_state(ctx: RunContext) -> dict[str, Any]:
    """The graph's state before the first iteration."""
    return {
        "symbols": ctx.symbols,
        "n_folds": len(ctx.folds),
        "iteration": 1,
        "research_round": 0,
        "route": Route.INITIAL,
        "counters": LoopCounters(),
        "all_variants": {},
        "history": [],
        "n_backtests": 0,
        "best": None,
        "feedback": [],
        # The earlier runs on this data count in the deflation from the first gate on.
        "ledger": TrialLedger(data_key=ctx.data_key, earlier=ctx.earlier),
    }


def max_concurrency(cfg: RunConfig, ctx: RunContext) -> int:
    """Threads for LangGraph's task pool: one per task of the widest fan-out, plus room.

    A mapped backtest task only waits on the executor (processes do the work), so threads are
    cheap. LangGraph saves a finished task's writes (what lets a resume skip it) through the
    same pool: with fewer threads than tasks, those saves queue behind the tasks still waiting
    to start, and a kill would lose finished work.
    """
    widest = max(cfg.variants * len(ctx.symbols) * len(ctx.folds), 15)  # 15 research subagents
    return widest + 16


def make_llm_client(cfg: RunConfig, run: RunFolder, data: dict | None = None):
    """None with ``--llm none``; else a client whose replay cache lives in the run (or
    --llm-cache). ``data`` (symbol -> LoadedBars) sets a masked run's per-symbol scales."""
    if not cfg.llm_settings.enabled:
        return None
    from swarm.llm.client import LLMClient

    cache_dir = cfg.llm_settings.cache_dir or run.path("llm_cache")
    client = LLMClient(cfg.llm_settings, cache_dir=cache_dir)
    from swarm.llm.cutoff import policy_for

    policy = policy_for(cfg.llm_settings, cfg.start)
    if policy is None or not policy.masked:
        return client
    from swarm.llm.mask import context_for, known_entities
    from swarm.llm.masked import MaskedClient

    # One context for the run: aliases for its universe, dates as offsets from its last bar,
    # each symbol's prices rebased to 100 at the run's first bar (a prompt about one symbol
    # is rebased by its scale; one about several has its price levels withheld).
    bars = {s: d.bars for s, d in (data or {}).items()}
    ctx = context_for(
        list(cfg.tickers), cfg.end, known=known_entities(cfg.data_dir), symbol_bars=bars
    )
    return MaskedClient(client, ctx)


def execute(prepared: Prepared) -> Outcome:
    """Run the graph to its end, from the start or from the run's last checkpoint."""
    from swarm.graph import build_graph

    cfg = prepared.config
    run = prepared.run
    thread = {"configurable": {"thread_id": run.root.name}}
    executor_cm = make_executor(cfg.executor, workers=cfg.workers, address=cfg.ray_address)
    with executor_cm as executor, checkpointer(run) as saver:
        ctx = RunContext(
            config=cfg,
            run=run,
            criteria=prepared.criteria,
            executor=executor,
            progress=prepared.progress,
            llm=make_llm_client(cfg, run, prepared.context_kwargs.get("data")),
            **prepared.context_kwargs,
        )
        graph = build_graph(checkpointer=saver)
        snapshot = graph.get_state(thread)
        started = snapshot.created_at is not None
        if started and not snapshot.next:
            return Outcome(state=dict(snapshot.values), already_finished=True)
        step = (snapshot.metadata or {}).get("step") if started else None
        if started:
            restore_run_universe(ctx, snapshot.values.get("symbols"))
            pending = [t for t in snapshot.tasks if t.result is None]
            done = len(snapshot.tasks) - len(pending)
            prepared.progress.stage(
                "resume",
                f"continuing after super-step {step} (iteration {snapshot.values.get('iteration')}"
                f"): next {', '.join(sorted(set(snapshot.next)))}"
                + (f"; {done} of {len(snapshot.tasks)} tasks already done" if done else ""),
            )
            n_backtests = sum(t.name == "backtest" for t in pending)
            if n_backtests:
                prepared.progress.start_batch(n_backtests)
        elif prepared.resumed:
            prepared.progress.stage("resume", "no checkpoint yet: starting from the beginning")
        with prepared.progress.heartbeat():
            state = graph.invoke(
                None if started else initial_state(ctx),
                config={
                    **thread,
                    "recursion_limit": RECURSION_LIMIT,
                    "max_concurrency": max_concurrency(cfg, ctx),
                },
                context=ctx,
                durability="sync",  # each super-step is on disk before the next one starts
            )
        stats = dict(saver.stats)
    stats["sqlite_bytes"] = db_bytes(run.path(CHECKPOINT_FILE))
    prepared.progress.stage(
        "checkpoint",
        f"{stats['checkpoints']} checkpoints, {stats['writes']} task writes; database busy "
        f"{stats['db_s'] * 1000:.0f} ms; {CHECKPOINT_FILE} {stats['sqlite_bytes'] / 1e6:.2f} MB",
    )
    return Outcome(state=state, resumed_from_step=step, checkpoints=stats)
