"""The develop graph, wired in one place. Node ids are constants; routes are enums."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from gate.contracts import Route
from swarm.context import RunContext
from swarm.nodes import backtest as bt_nodes
from swarm.nodes import gate as gate_nodes
from swarm.nodes import research as research_nodes
from swarm.nodes.finalize import finalize, holdout
from swarm.nodes.strategy import strategy_dev
from swarm.research.models import Domain
from swarm.state import DevelopState

DATA_EXTRACTOR = "data_extractor"
SUBAGENT = research_nodes.SUBAGENT_NODE
SYNTH = {d: f"synthesizer_{d.value}" for d in Domain}
LEADER = "leader"
STRATEGY_DEV = "strategy_dev"
BACKTEST = bt_nodes.BACKTEST_NODE
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


def after_gate(state: DevelopState) -> str:
    """A pass goes straight to the router; otherwise failure analysis first."""
    return ROUTER if any(e.passed for e in state.get("evaluations", [])) else FAILURE


def after_failure(state: DevelopState) -> str:
    """The trajectory needs this iteration plus at least one before it on the same line."""
    return TRAJECTORY if gate_nodes.current_line(state.get("history", [])) else ROUTER


def after_router(state: DevelopState) -> str:
    return ROUTE_NODE[Route(state["route"])]


def build_graph(checkpointer=None):
    g = StateGraph(DevelopState, context_schema=RunContext)
    g.add_node(DATA_EXTRACTOR, research_nodes.data_extractor)
    g.add_node(SUBAGENT, research_nodes.research_subagent)
    for domain, node in SYNTH.items():
        g.add_node(node, research_nodes.make_synthesizer(domain))
    g.add_node(LEADER, research_nodes.leader)
    g.add_node(STRATEGY_DEV, strategy_dev)
    g.add_node(BACKTEST, bt_nodes.backtest)
    g.add_node(GATE, gate_nodes.gate)
    g.add_node(FAILURE, gate_nodes.failure_analysis)
    g.add_node(TRAJECTORY, gate_nodes.trajectory)
    g.add_node(ROUTER, gate_nodes.router)
    g.add_node(HOLDOUT, holdout)
    g.add_node(FINALIZE, finalize)

    g.add_edge(START, DATA_EXTRACTOR)
    # Map: 15 specialists in parallel; reduce: 3 domain synthesizers, then the leader.
    g.add_conditional_edges(DATA_EXTRACTOR, research_nodes.fan_out_subagents, [SUBAGENT])
    for node in SYNTH.values():
        g.add_edge(SUBAGENT, node)
        g.add_edge(node, LEADER)
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
    return build_graph().get_graph().draw_mermaid()
