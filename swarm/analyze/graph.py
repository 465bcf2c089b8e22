"""The analysis graph, wired in one place: analysts fan out (``Send``), a quorum gates the
desk, then debate -> manager -> trader -> risk team -> judge -> risk engine -> decision.

A second graph beside the develop graph (``swarm.graph``), not a copy: it shares the
feature bundle, the research subagents, the LLM client and memory, not its nodes.
"""

from __future__ import annotations

from functools import lru_cache

from langgraph.graph import END, START, StateGraph

from swarm.analyze import nodes
from swarm.analyze.nodes import AnalysisInputs, AnalyzeState

ANALYST = nodes.ANALYST_NODE
QUORUM = "quorum"
DEBATE = "debate"
MANAGER = "research_manager"
TRADER = "trader"
RISK_TEAM = "risk_team"
JUDGE = "risk_judge"
RISK_ENGINE = "risk_engine"
FINALIZE = "decision"


@lru_cache(maxsize=1)
def build_analyze_graph():
    """Compiled once per process: a replay over many dates reuses it."""
    g = StateGraph(AnalyzeState, context_schema=AnalysisInputs)
    g.add_node(ANALYST, nodes.analyst)
    g.add_node(QUORUM, nodes.check_quorum)
    g.add_node(DEBATE, nodes.debate)
    g.add_node(MANAGER, nodes.manager)
    g.add_node(TRADER, nodes.trader)
    g.add_node(RISK_TEAM, nodes.risk_team)
    g.add_node(JUDGE, nodes.judge)
    g.add_node(RISK_ENGINE, nodes.risk_engine)
    g.add_node(FINALIZE, nodes.finalize)

    g.add_conditional_edges(START, nodes.fan_out_analysts, [ANALYST])
    g.add_edge(ANALYST, QUORUM)
    g.add_conditional_edges(QUORUM, after_quorum, [DEBATE, FINALIZE])
    g.add_edge(DEBATE, MANAGER)
    g.add_edge(MANAGER, TRADER)
    g.add_edge(TRADER, RISK_TEAM)
    g.add_edge(RISK_TEAM, JUDGE)
    g.add_edge(JUDGE, RISK_ENGINE)
    g.add_edge(RISK_ENGINE, FINALIZE)
    g.add_edge(FINALIZE, END)
    return g.compile()


def after_quorum(state: AnalyzeState) -> str:
    """A desk without its quorum goes straight to a DEGRADED decision: no debate, no trade."""
    return DEBATE if state["quorum"].met else FINALIZE


def mermaid() -> str:
    """The analyze graph as a mermaid diagram."""
    return build_analyze_graph().get_graph().draw_mermaid()
