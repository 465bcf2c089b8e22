"""The loop's routes: one enum for what built a variant and where the router sends the loop.

A variant carries the route that built it (``INITIAL`` for the first iteration, else the
router's TUNE, FIX, REFINE or RESEARCH), and the router decides one of SUCCESS, TUNE, FIX,
REFINE, RESEARCH or ABANDON after each gate. Both are this one enum; two validated subsets
keep each field to the members it can hold. It lives on this floor, below the gate, because
``StrategyVariant`` records its route.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator


class Route(StrEnum):
    """A step of the develop loop (the router's choices, and INITIAL for the first build)."""

    INITIAL = "INITIAL"
    SUCCESS = "SUCCESS"
    TUNE = "TUNE"
    FIX = "FIX"
    REFINE = "REFINE"
    RESEARCH = "RESEARCH"
    ABANDON = "ABANDON"


# The routes that build variants, and those the router can decide.
BUILDS = frozenset({Route.INITIAL, Route.TUNE, Route.FIX, Route.REFINE, Route.RESEARCH})
DECIDES = frozenset(Route) - {Route.INITIAL}


def _builds(route: Route) -> Route:
    """``route`` if it builds variants; a ValueError naming the ones that do otherwise."""
    if route not in BUILDS:
        raise ValueError(f"{route} builds no variant; one of {', '.join(sorted(BUILDS))}")
    return route


def _decides(route: Route) -> Route:
    """``route`` if the router can decide it; a ValueError otherwise."""
    if route not in DECIDES:
        raise ValueError(f"{route} is not a router decision; one of {', '.join(sorted(DECIDES))}")
    return route


# A field holding the route that built a variant (its origin), or one the router decided.
Origin = Annotated[Route, AfterValidator(_builds)]
Decided = Annotated[Route, AfterValidator(_decides)]
