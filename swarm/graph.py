"""The develop graph, wired in one place. Node ids are constants; routes are enums."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from swarm.context import RunContext
from swarm.edges import (  # noqa: F401 - node ids and edges, re-exported for callers
    BACKTEST,
    DATA_EXTRACTOR,
    FAILURE,
    FINALIZE,
    GATE,
    HOLDOUT,
    LEADER,
    ROUTE_NODE,
    ROUTER,
    STRATEGY_DEV,
    SUBAGENT,
    SYNTH,
    TRAJECTORY,
    after_failure,
    after_gate,
    after_router,
)
from swarm.nodes import backtest as bt_nodes
from swarm.nodes import gate as gate_nodes
from swarm.nodes import research as research_nodes
from swarm.nodes.finalize import finalize, holdout
from swarm.nodes.strategy import strategy_dev
from swarm.state import DevelopState


def build_graph(checkpointer=None):
    """The develop graph: research, strategy development, backtests fanned out, gate, failure and
    trajectory analysis, router, holdout and finalize."""
    g = StateGraph(DevelopState, context_schema=RunContext)
    # The research half, wired once (swarm.nodes.research), shared with `swarm.research`.
    research_nodes.add_research(g)
    g.add_node(STRATEGY_DEV, strategy_dev)
    g.add_node(BACKTEST, bt_nodes.backtest)
    g.add_node(GATE, gate_nodes.gate)
    g.add_node(FAILURE, gate_nodes.failure_analysis)
    g.add_node(TRAJECTORY, gate_nodes.trajectory)
    g.add_node(ROUTER, gate_nodes.router)
    g.add_node(HOLDOUT, holdout)
    g.add_node(FINALIZE, finalize)

    g.add_edge(START, DATA_EXTRACTOR)
    g.add_edge(LEADER, STRATEGY_DEV)
    # Map: variants × symbols × folds to the executor; reduce: the gate.
    g.add_conditional_edges(STRATEGY_DEV, _fan_out_or_gate, [BACKTEST, GATE])
    g.add_edge(BACKTEST, GATE)
    g.add_conditional_edges(GATE, after_gate, [FAILURE, ROUTER])
    g.add_conditional_edges(FAILURE, after_failure, [TRAJECTORY, ROUTER])
    g.add_edge(TRAJECTORY, ROUTER)
    g.add_conditional_edges(ROUTER, after_router, [STRATEGY_DEV, DATA_EXTRACTOR, HOLDOUT, FINALIZE])
    g.add_edge(HOLDOUT, FINALIZE)
    g.add_edge(FINALIZE, END)
    return g.compile(checkpointer=checkpointer)


def _fan_out_or_gate(state: DevelopState):
    # Every proposal rejected by validation: nothing to run, let the gate see an empty round.
    return bt_nodes.fan_out_backtests(state) or GATE


def mermaid() -> str:
    """The develop graph as a mermaid diagram."""
    return build_graph().get_graph().draw_mermaid()
