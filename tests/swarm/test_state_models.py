"""The graph state holds models: they survive the checkpoint, and Send payloads are typed."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from backtest.contracts import JobStatus
from experiments.records import Series
from gate.contracts import FailureAnalysis, FailureType, Hint, LoopCounters, Route
from strategies.spec import Origin
from swarm.nodes.backtest import fan_out_backtests
from swarm.nodes.research import fan_out_subagents
from swarm.research.subagents import SUBAGENTS
from swarm.state import (
    BacktestTask,
    BestSoFar,
    DevelopState,
    Evaluation,
    StoredResult,
    SubagentTask,
    checkpoint_allowlist,
)

pytestmark = pytest.mark.unit


def _state_values() -> dict:
    best = BestSoFar(variant_id="v1", family="trend", trial_key="k", metrics=None, score=0.4,
                     portfolio=Series(dates=["2020-01-02"], values=[0.01]))  # fmt: skip
    return {
        "route": Origin.TUNE,
        "counters": LoopCounters(iteration=2, strategy_iterations=2),
        "evaluations": [Evaluation(variant_id="v1", family="trend", trial_key="k", metrics=None)],
        "best": best,
        "failure": FailureAnalysis(
            failure_type=FailureType.DESIGN_FLAW,
            root_cause="r",
            confidence=0.5,
            hints=[Hint.MARKET_EXPOSURE],
        ),  # fmt: skip
        "results": [
            StoredResult(
                job_id="j",
                variant_id="v1",
                symbol="A",
                fold=0,
                status=JobStatus.OK,
                result_file="backtests/v1/A-f0.json",
            )
        ],  # fmt: skip
    }


def test_models_come_back_from_the_checkpoint_as_models(caplog) -> None:
    def put(state: DevelopState) -> dict:
        return _state_values()

    g = StateGraph(DevelopState)
    g.add_node("put", put)
    g.add_edge(START, "put")
    g.add_edge("put", END)
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    serde = JsonPlusSerializer(allowed_msgpack_modules=checkpoint_allowlist())
    app = g.compile(checkpointer=SqliteSaver(conn, serde=serde))
    cfg = {"configurable": {"thread_id": "t"}}
    with caplog.at_level(logging.WARNING):
        app.invoke({}, cfg)
        values = app.get_state(cfg).values
    assert values["counters"] == LoopCounters(iteration=2, strategy_iterations=2)
    assert isinstance(values["best"], BestSoFar) and values["best"].portfolio.values == [0.01]
    assert values["failure"].hints == [Hint.MARKET_EXPOSURE]
    assert values["results"][0].result_file == "backtests/v1/A-f0.json"
    assert values["route"] == Origin.TUNE == Route.TUNE
    assert "unregistered type" not in caplog.text  # every state type is on the allowlist


def test_models_still_answer_by_key_for_readers_not_yet_moved() -> None:
    values = _state_values()
    assert values["best"]["variant_id"] == "v1"
    assert values["evaluations"][0]["variant_id"] == "v1"


def test_send_payloads_are_typed() -> None:
    state = {"iteration": 3, "symbols": ["A", "B"], "n_folds": 2,
             "variants": [{"variant_id": "v1", "code_sha256": "c"}]}  # fmt: skip
    sends = fan_out_backtests(state)
    assert len(sends) == 4 and all(isinstance(s.arg, BacktestTask) for s in sends)
    assert sends[-1].arg == BacktestTask(
        iteration=3, variant_id="v1", code_sha256="c", symbol="B", fold=1
    )
    subs = fan_out_subagents({"research_round": 2, "iteration": 4})
    assert len(subs) == len(SUBAGENTS)
    assert subs[0].arg == SubagentTask(subagent_id=SUBAGENTS[0].id, research_round=2, iteration=4)
