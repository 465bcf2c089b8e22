"""The parallel backtest node (not an agent): map over variants × symbols × folds, reduce in the gate.

Each mapped task hands one job to the run's executor (a process pool by default)
and waits; the generated code never runs inside the orchestrator's process.

The state stays light enough to checkpoint every super-step: a task's payload names the
variant (its code is read from ``strategies/<variant_id>.py`` and checked against its
sha256), and a result's per-period return series go to ``backtests/<variant_id>/`` in the
run folder, not into the state. ``load_results`` puts them back together for the gate,
once per iteration: the router's records reuse what the gate loaded.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd
from langgraph.runtime import Runtime
from langgraph.types import Send

from backtest.contracts import BacktestJob, BacktestResult
from backtest.executors import error_result
from backtest.job_timeout import scaled_timeout
from experiments.runfolder import result_file
from strategies.portfolio import LABEL as PORTFOLIO
from strategies.spec import StrategySpec
from swarm.context import RunContext
from swarm.regime_data import index_hashes, missing_indices, missing_message, with_index_feeds
from swarm.state import BacktestTask, DevelopState, StoredResult

BACKTEST_NODE = "backtest"
HEAVY_FIELDS = ("return_dates", "returns", "trade_pnls")  # kept in the run folder, not the state


def job_id(iteration: int, variant_id: str, symbol: str, fold: int) -> str:
    """The backtest job's id: variant, symbol and fold (unique within a run)."""
    return f"{variant_id}|{symbol}|f{fold}"


def job_symbols(spec: StrategySpec, symbols: list[str]) -> list[str]:
    """What a variant of ``spec`` is run on: each symbol alone, or (portfolio scope) the whole
    universe at once, under the portfolio label."""
    from swarm.families import registry

    return registry().job_symbols(spec, symbols)


def fan_out_backtests(state: DevelopState) -> list[Send]:
    """One backtest task per variant × symbol × fold (the graph's fan-out)."""
    return [
        Send(
            BACKTEST_NODE,
            BacktestTask(
                iteration=state["iteration"],
                variant_id=variant.variant_id,
                code_sha256=variant.code_sha256,
                symbol=symbol,
                fold=fold,
            ),
        )
        for variant in state.get("variants", [])
        for symbol in job_symbols(variant.spec, state["symbols"])
        for fold in range(state["n_folds"])
    ]


def job_bars(
    ctx: RunContext, symbol: str, *, holdout: bool = False, code: str | None = None
) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """A job's bars: one symbol's, or every symbol's for the portfolio label, in the
    universe's order (``self.datas``); in-sample only (the holdout stays sealed) unless
    ``holdout`` (the winner's one holdout run). ``code``: the index feeds it reads (a regime
    filter's, ``swarm.regime_data``) are added after the traded feeds."""

    # One in-sample frame per symbol for the run, shared by all its jobs: the pool's batcher
    # then cuts one window per symbol and chunk, and pickles it once (backtest.executors.batching).
    insample = ctx.memo.insample_frames  # symbol -> (its loaded bars, their in-sample frame)

    def one(s: str) -> pd.DataFrame:
        full = ctx.data[s].bars
        if holdout:
            return full
        if s not in insample or insample[s][0] is not full:  # memo of these very bars
            insample[s] = (full, ctx.insample_bars(s))
        return insample[s][1]

    bars = {s: one(s) for s in ctx.symbols} if symbol == PORTFOLIO else one(symbol)
    return with_index_feeds(ctx, bars, symbol, code, holdout=holdout)


def data_sha256(ctx: RunContext, symbol: str, code: str | None = None) -> str:
    """The sha256 of a job's data: the symbol's file, or (portfolio) of the files' hashes;
    with the index files ``code`` reads (a regime filter's), of those hashes and theirs."""
    if symbol != PORTFOLIO:
        traded = ctx.data[symbol].sha256
    else:
        joined = ",".join(f"{s}:{ctx.data[s].sha256}" for s in ctx.symbols)
        traded = hashlib.sha256(joined.encode()).hexdigest()
    indices = index_hashes(ctx, code)
    if not indices:
        return traded
    return hashlib.sha256(",".join([f"{symbol}:{traded}", *indices]).encode()).hexdigest()


def backtest(task: BacktestTask, runtime: Runtime[RunContext]) -> dict[str, list[StoredResult]]:
    """BACKTEST: run one variant on one symbol and fold in the sandbox and store its result."""
    ctx = runtime.context
    fold = ctx.folds[task.fold]
    variant_id, symbol = task.variant_id, task.symbol
    code = ctx.run.read_code(variant_id, task.code_sha256)
    missing = missing_indices(ctx, code)
    bars = job_bars(ctx, symbol, code=code)  # the holdout stays sealed
    job = BacktestJob(
        job_id=job_id(task.iteration, variant_id, symbol, fold.index),
        variant_id=variant_id,
        code=code,
        symbol=symbol,
        bars=bars,
        fold=fold,
        costs=ctx.config.costs,
        periods_per_year=ctx.periods_per_year,
        timeout_s=scaled_timeout(bars),  # a wide universe's job needs longer
    )
    if missing:  # the code reads an index the run lacks: say which file, not KeyError
        result = error_result(job, missing_message(ctx, missing))
    else:
        result = ctx.executor.submit(job).result()
    rel = result_file(variant_id, symbol, task.fold)
    # The one JSON form of a result (NaN kept as NaN, as the metrics produce it). Atomic and
    # deterministic (duration_s aside): a replayed task rewrites the same file.
    text = json.dumps(result.model_dump(mode="json"), separators=(",", ":"), allow_nan=True)
    ctx.run.write_text(rel, text + "\n")
    ctx.progress.tick()
    light = {k: v for k, v in result if k not in HEAVY_FIELDS}
    return {"results": [StoredResult(**light, result_file=rel)]}


def load_results(ctx: RunContext, results: list[StoredResult]) -> list[BacktestResult]:
    """Full BacktestResults (return series included) for the state's light entries, read
    from the run folder once per iteration (memoised by the entries' files)."""
    key = tuple(r.result_file for r in results)
    cached = ctx.memo.loaded_results
    if cached is not None and cached[0] == key:
        return cached[1]
    out = []
    for r in results:
        if r.result_file:
            text = ctx.run.path(r.result_file).read_text(encoding="utf-8")
            out.append(BacktestResult.model_validate_json(text))
        else:
            out.append(BacktestResult.model_validate(r.model_dump(exclude={"result_file"})))
    ctx.memo.loaded_results = (key, out)
    return out
