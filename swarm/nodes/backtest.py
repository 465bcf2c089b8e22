"""The parallel backtest node (not an agent): map over variants × symbols × folds, reduce in the gate.

Each mapped task hands one job to the run's executor (a process pool by default)
and waits; the generated code never runs inside the orchestrator's process.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from backtest.contracts import BacktestJob
from swarm.context import RunContext
from swarm.state import DevelopState

BACKTEST_NODE = "backtest"


def job_id(iteration: int, variant_id: str, symbol: str, fold: int) -> str:
    return f"{variant_id}|{symbol}|f{fold}"


def fan_out_backtests(state: DevelopState) -> list[Send]:
    sends = []
    for variant in state.get("variants", []):
        for symbol in state["symbols"]:
            for fold in range(state["n_folds"]):
                sends.append(
                    Send(
                        BACKTEST_NODE,
                        {
                            "iteration": state["iteration"],
                            "variant_id": variant["variant_id"],
                            "code": variant["code"],
                            "symbol": symbol,
                            "fold": fold,
                        },
                    )
                )
    return sends


def backtest(payload: dict[str, Any], runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    fold = ctx.folds[payload["fold"]]
    job = BacktestJob(
        job_id=job_id(payload["iteration"], payload["variant_id"], payload["symbol"], fold.index),
        variant_id=payload["variant_id"],
        code=payload["code"],
        symbol=payload["symbol"],
        bars=ctx.insample_bars(payload["symbol"]),  # the holdout stays sealed
        fold=fold,
        costs=ctx.config.costs,
        periods_per_year=ctx.periods_per_year,
    )
    result = ctx.executor.submit(job).result()
    ctx.progress.tick()
    return {"results": [result.model_dump(mode="json")]}
