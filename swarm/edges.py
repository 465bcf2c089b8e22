"""The develop graph's node ids and its edges: pure functions of the state that return
node ids, so every branch has a unit test (tests/swarm/test_graph_edges.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.contracts import Route
from gate.routing import current_line
from swarm.research.models import Domain

DATA_EXTRACTOR = "data_extractor"
SUBAGENT = "research_subagent"
SYNTH = {d: f"synthesizer_{d.value}" for d in Domain}
LEADER = "leader"
STRATEGY_DEV = "strategy_dev"
BACKTEST = "backtest"  # swarm.nodes.backtest.BACKTEST_NODE (its Send target)
GATE = "gate"
FAILURE = "failure_analysis"
TRAJECTORY = "trajectory"
ROUTER = "router"
HOLDOUT = "holdout"
FINALIZE = "finalize"
# Where each route of the router leads.
ROUTE_NODE = {
    Route.SUCCESS: HOLDOUT,
    Route.ABANDON: FINALIZE,
    Route.RESEARCH: DATA_EXTRACTOR,
    Route.TUNE: STRATEGY_DEV,
    Route.FIX: STRATEGY_DEV,
    Route.REFINE: STRATEGY_DEV,
}


def after_gate(state: Mapping[str, Any]) -> str:
    """A pass goes straight to the router; otherwise failure analysis first."""
    return ROUTER if any(e.passed for e in state.get("evaluations", [])) else FAILURE


def after_failure(state: Mapping[str, Any]) -> str:
    """The trajectory needs this iteration plus at least one before it on the same line."""
    return TRAJECTORY if current_line(state.get("history", [])) else ROUTER


def after_router(state: Mapping[str, Any]) -> str:
    """The node the router's route leads to."""
    return ROUTE_NODE[Route(state["route"])]
