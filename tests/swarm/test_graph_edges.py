"""The develop graph's edges: pure functions of the state, returning the graph's node ids."""

import pytest

from gate.contracts import Route
from swarm import graph

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("route", list(Route))
def test_every_route_leads_to_a_node_of_the_graph(route) -> None:
    node = graph.after_router({"route": route.value})
    assert node == graph.ROUTE_NODE[route]
    assert node in graph.build_graph().get_graph().nodes


def test_a_pass_skips_failure_analysis() -> None:
    passed = {"evaluations": [{"passed": False}, {"passed": True}]}
    assert graph.after_gate(passed) == graph.ROUTER
    assert graph.after_gate({"evaluations": [{"passed": False}]}) == graph.FAILURE
    assert graph.after_gate({}) == graph.FAILURE


def test_trajectory_only_with_history_on_the_current_line() -> None:
    assert graph.after_failure({"history": []}) == graph.ROUTER
    assert graph.after_failure({"history": [{"route": "TUNE"}]}) == graph.TRAJECTORY
    # A research round starts a new line: the iterations before it do not count.
    after_research = {"history": [{"route": "TUNE"}, {"route": "RESEARCH"}]}
    assert graph.after_failure(after_research) == graph.ROUTER
