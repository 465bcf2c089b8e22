"""A grid family's parameter grid: the nearest grid point, and a spec's neighbours on it.

Shared by the families that search a small grid of their own (``earnings_drift``,
``analyst_revision``, ``putcall_regime``, ``sentiment_momentum``): TUNE moves one or two
parameters one grid step, in an order the run's rng shuffles (so a seed reproduces it).
``grid_proposals`` is a grid family's whole proposer (``value_quality``'s; the four older
families still carry their own copy of it).

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from strategies.family_api import Proposal
from strategies.spec import ParamValue, StrategySpec

Params = dict[str, ParamValue]
Snap = Callable[[str, ParamValue], ParamValue]  # a family's own: the nearest point, typed
TUNE_WHY = "tune around the best so far"


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


def grid_proposals(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    grid: Mapping[str, Sequence[ParamValue]],
    snap: Snap,
    ideas: Sequence[tuple[Params, bool, str]],
    make: Callable[[Params, bool], StrategySpec],
    settle: Callable[[StrategySpec], StrategySpec],
    trades_as: Callable[[StrategySpec], object] | None = None,
    tried: Sequence[StrategySpec] = (),
) -> list[Proposal]:
    """Up to ``n`` fresh specs of a grid family (no trial key in ``seen``), deterministic for
    ``rng``: TUNE, FIX and REFINE around ``best`` (REFINE: its other side first, then one or
    two grid steps), then the family's listed ``ideas``, then random grid points.

    ``make(params, long_short)``: a new spec; ``settle(spec)``: a spec reconciled and named.
    ``trades_as(spec)``: what the spec would trade (None: the trial key alone tells specs
    apart); a proposal that would trade as one of ``tried``, the best or an earlier proposal
    is not made: the gate would count a trial that cannot differ."""
    taken = set(seen)
    out: list[Proposal] = []
    traded: set[object] = set()
    if trades_as is not None:
        traded = {trades_as(settle(s)) for s in [*tried, *([best[1]] if best else [])]}

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) >= n or spec.trial_key() in taken:
            return
        if trades_as is not None:
            same = trades_as(spec)
            if same in traded:
                return
            traded.add(same)
        taken.add(spec.trial_key())
        out.append(Proposal(spec, parent, why))

    if best is not None and route in ("TUNE", "FIX", "REFINE"):
        best_id, base = best
        if route == "REFINE":
            flipped = settle(base.model_copy(update={"long_short": not base.long_short}))
            add(flipped, best_id, f"refine: {'long/short' if flipped.long_short else 'long only'}")
        for params in neighbour_params(grid, snap, base.parameters, rng):
            add(settle(base.model_copy(update={"parameters": params})), best_id, TUNE_WHY)
    for params, long_short, note in ideas:
        add(make(params, long_short), None, f"new idea: {note}")
    for _ in range(200):  # every listed idea tried: random grid points
        if len(out) >= n:
            break
        params = {k: rng.choice(g) for k, g in grid.items()}
        add(make(params, rng.random() < 0.5), None, "random grid point")
    return out
