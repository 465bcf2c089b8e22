"""The develop graph's edges: pure functions of the state, returning the graph's node ids."""

import pytest

from gate.contracts import IterationSummary, Route
from strategies.route import DECIDES
from swarm import graph
from swarm.state import Evaluation

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("route", sorted(DECIDES))
def test_every_route_leads_to_a_node_of_the_graph(route) -> None:
    node = graph.after_router({"route": route.value})
    assert node == graph.ROUTE_NODE[route]
    assert node in graph.build_graph().get_graph().nodes


def _ev(passed: bool) -> Evaluation:
    return Evaluation(variant_id="v", family="trend", trial_key="k", metrics=None, passed=passed)


def _it(route: Route) -> IterationSummary:
    return IterationSummary(iteration=1, route=route, best_variant_id=None, best_score=0.0)


def test_a_pass_skips_failure_analysis() -> None:
    passed = {"evaluations": [_ev(False), _ev(True)]}
    assert graph.after_gate(passed) == graph.ROUTER
    assert graph.after_gate({"evaluations": [_ev(False)]}) == graph.FAILURE
    assert graph.after_gate({}) == graph.FAILURE


def test_trajectory_only_with_history_on_the_current_line() -> None:
    assert graph.after_failure({"history": []}) == graph.ROUTER
    assert graph.after_failure({"history": [_it(Route.TUNE)]}) == graph.TRAJECTORY
    # A research round starts a new line: the iterations before it do not count.
    after_research = {"history": [_it(Route.TUNE), _it(Route.RESEARCH)]}
    assert graph.after_failure(after_research) == graph.ROUTER


def test_node_ids_live_in_one_module_and_match_the_nodes() -> None:
    from swarm import edges
    from swarm.nodes import backtest as bt_nodes
    from swarm.nodes import research as research_nodes

    assert edges.BACKTEST == bt_nodes.BACKTEST_NODE  # the Send target of the fan-out
    assert research_nodes.SUBAGENT_NODE == edges.SUBAGENT
    ids = {v for k, v in vars(edges).items() if k.isupper() and isinstance(v, str)}
    ids |= set(edges.SYNTH.values())
    assert ids == set(graph.build_graph().get_graph().nodes) - {"__start__", "__end__"}


def test_research_graph_is_the_develop_graphs_research_half() -> None:
    from swarm import edges
    from swarm.nodes.research import build_research_graph

    research = build_research_graph().get_graph()
    develop = graph.build_graph().get_graph()
    inner = {edges.DATA_EXTRACTOR, edges.SUBAGENT, edges.LEADER, *edges.SYNTH.values()}
    assert set(research.nodes) - {"__start__", "__end__"} == inner

    def pairs(g) -> set:
        return {(e.source, e.target) for e in g.edges if {e.source, e.target} <= inner}

    assert pairs(research) == pairs(develop)
