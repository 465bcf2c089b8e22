"""One Route enum: what built a variant and what the router decided, each field kept to its
subset (a variant is never built by SUCCESS; the router never decides INITIAL)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gate.contracts import GateDecision, IterationSummary
from gate.contracts import Route as GateRoute
from strategies.route import BUILDS, DECIDES, Route
from strategies.spec import StrategySpec, StrategyVariant

pytestmark = pytest.mark.unit

SPEC = StrategySpec(family="momentum", name="m", approach="a", entry="roc_momentum")


def _variant(route: str) -> StrategyVariant:
    return StrategyVariant(
        variant_id="v", iteration=1, route=route, spec=SPEC, code="", code_sha256="x"
    )


def test_the_gate_and_the_variants_share_one_enum() -> None:
    assert GateRoute is Route
    assert (
        set(Route) == BUILDS | DECIDES
        and {
            Route.TUNE,
            Route.FIX,
            Route.REFINE,
            Route.RESEARCH,
        }
        == BUILDS & DECIDES
    )


@pytest.mark.parametrize("route", sorted(BUILDS))
def test_a_variant_records_the_route_that_built_it(route: Route) -> None:
    assert _variant(route.value).route is route


@pytest.mark.parametrize("route", [Route.SUCCESS, Route.ABANDON])
def test_no_variant_is_built_by_a_final_route(route: Route) -> None:
    with pytest.raises(ValidationError, match="builds no variant"):
        _variant(route.value)


def test_the_router_never_decides_initial() -> None:
    with pytest.raises(ValidationError, match="not a router decision"):
        GateDecision(
            iteration=1, decision="INITIAL", best_variant_id=None, evaluations=[], reasoning=""
        )
    with pytest.raises(ValidationError, match="not a router decision"):
        IterationSummary(iteration=1, route="INITIAL", best_variant_id=None, best_score=0.0)
    ok = GateDecision(
        iteration=1, decision="ABANDON", best_variant_id=None, evaluations=[], reasoning=""
    )
    assert ok.decision is Route.ABANDON
    assert ok.model_dump(mode="json")["decision"] == "ABANDON"
