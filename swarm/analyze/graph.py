"""The analysis graph, wired in one place: analysts fan out (``Send``), a quorum gates the
desk, then debate -> manager -> trader -> risk team -> judge -> risk engine -> decision.

A second graph beside the develop graph (``swarm.graph``), not a copy: it shares the
feature bundle, the research subagents, the LLM client and memory, not its nodes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

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
# The desk after the quorum, in order: the graph chains these nodes, and ``run_in_process``
# calls the same nodes in the same order.
DESK = (
    (DEBATE, nodes.debate),
    (MANAGER, nodes.manager),
    (TRADER, nodes.trader),
    (RISK_TEAM, nodes.risk_team),
    (JUDGE, nodes.judge),
    (RISK_ENGINE, nodes.risk_engine),
)


@lru_cache(maxsize=1)
def build_analyze_graph():
    """Compiled once per process: a replay over many dates reuses it."""
    g = StateGraph(AnalyzeState, context_schema=AnalysisInputs)
    g.add_node(ANALYST, nodes.analyst)
    g.add_node(QUORUM, nodes.check_quorum)
    for name, node in DESK:
        g.add_node(name, node)
    g.add_node(FINALIZE, nodes.finalize)

    g.add_conditional_edges(START, nodes.fan_out_analysts, [ANALYST])
    g.add_edge(ANALYST, QUORUM)
    g.add_conditional_edges(QUORUM, after_quorum, [DEBATE, FINALIZE])
    for (name, _), (after, _) in zip(DESK, DESK[1:], strict=False):
        g.add_edge(name, after)
    g.add_edge(DESK[-1][0], FINALIZE)
    g.add_edge(FINALIZE, END)
    return g.compile()


def after_quorum(state: AnalyzeState) -> str:
    """A desk without its quorum goes straight to a DEGRADED decision: no debate, no trade."""
    return DEBATE if state["quorum"].met else FINALIZE


@lru_cache(maxsize=1)
def _reduced_keys() -> frozenset[str]:
    """The state keys the graph merges with a reducer (``Annotated[list, operator.add]``)."""
    hints = get_type_hints(AnalyzeState, include_extras=True)
    return frozenset(k for k, h in hints.items() if get_origin(h) is Annotated and get_args(h)[1:])


def run_in_process(inputs: AnalysisInputs) -> dict[str, Any]:
    """The graph's final state, computed by calling its nodes in the graph's order in this
    thread: the same decision (tested against ``build_analyze_graph().invoke``) without the
    ~15 ms a decision of LangGraph's scheduling, which dominates a rules-brain replay of
    thousands of dates. Analysts run one after another, so an LLM desk keeps the graph."""
    runtime = Runtime(context=inputs)
    reduced = _reduced_keys()
    state: dict[str, Any] = {}

    def merge(update: dict[str, Any]) -> None:
        for key, value in update.items():
            state[key] = state.get(key, []) + value if key in reduced else value

    for send in nodes.fan_out_analysts(state):  # the fan-out's order: the graph's write order
        merge(nodes.analyst(send.arg, runtime))
    merge(nodes.check_quorum(state))
    if after_quorum(state) == DEBATE:
        for _, node in DESK:
            merge(node(state, runtime))
    merge(nodes.finalize(state, runtime))
    return state


def mermaid() -> str:
    """The analyze graph as a mermaid diagram."""
    return build_analyze_graph().get_graph().draw_mermaid()
