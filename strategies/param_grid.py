"""A grid family's parameter grid: the nearest grid point, and a spec's neighbours on it.

Shared by the families that search a small grid of their own (``earnings_drift``,
``analyst_revision``, ``putcall_regime``, ``sentiment_momentum``): TUNE moves one or two
parameters one grid step, in an order the run's rng shuffles (so a seed reproduces it).

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from strategies.spec import ParamValue, StrategySpec

Params = dict[str, ParamValue]
Snap = Callable[[str, ParamValue], ParamValue]  # a family's own: the nearest point, typed


def nearest(grid: Sequence[float], value: ParamValue) -> float:
    """The grid point nearest ``value`` (ties: the lower one)."""
    return min(grid, key=lambda g: (abs(g - float(value)), g))


def grid_step(
    grid: Mapping[str, Sequence[ParamValue]], snap: Snap, params: Params, name: str, step: int
) -> Params | None:
    """``params`` with ``name`` moved ``step`` grid points, or None off the grid's ends."""
    values = grid[name]
    i = list(values).index(snap(name, params[name])) + step
    return None if not 0 <= i < len(values) else params | {name: values[i]}


def neighbour_params(
    grid: Mapping[str, Sequence[ParamValue]], snap: Snap, params: Params, rng: random.Random
) -> list[Params]:
    """Every parameter set one or two grid steps from ``params``: single moves first, each
    group in the order ``rng`` shuffles it."""
    singles, doubles = [], []
    names = list(grid)
    for name in names:
        for step in (-1, 1):
            moved = grid_step(grid, snap, params, name, step)
            if moved is not None:
                singles.append(moved)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for sa in (-1, 1):
                for sb in (-1, 1):
                    one = grid_step(grid, snap, params, a, sa)
                    two = grid_step(grid, snap, one, b, sb) if one is not None else None
                    if two is not None:
                        doubles.append(two)
    rng.shuffle(singles)
    rng.shuffle(doubles)
    return singles + doubles


def new_spec(
    kind: str, approach: str, parameters: Params | None, *, long_short: bool
) -> StrategySpec:
    """A grid family's spec before ``reconcile``: its kind as family, name and entry."""
    return StrategySpec(
        family=kind,
        name=kind,
        approach=approach,
        entry=kind,
        long_short=long_short,
        parameters=dict(parameters or {}),
    )


def settled(spec: StrategySpec, kind: str, params: Mapping[str, ParamValue]) -> StrategySpec:
    """``spec`` as its grid family runs it: its own entry, no blocks, a fixed fraction of the
    account on one symbol, exactly ``params``."""
    return spec.model_copy(
        update={
            "entry": kind,
            "filters": [],
            "exits": [],
            "sizing": "fixed_fraction",
            "scope": "symbol",
            "parameters": dict(params),
        }
    )
