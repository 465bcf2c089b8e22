"""The develop graph's edges: pure functions of the state, returning the graph's node ids."""

import pytest

from gate.contracts import IterationSummary, Route
from swarm import graph
from swarm.state import Evaluation

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("route", list(Route))
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
