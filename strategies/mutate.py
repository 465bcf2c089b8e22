"""TUNE / FIX / REFINE: pure, rng-deterministic edits of a spec.

Every function returns specs whose trial key is not in ``seen`` (the gate's trial ledger) and
whose name says what changed, e.g. ``"momentum-roc_momentum | tune roc_period 20->25"``.
``seen`` is never modified. When no fresh spec can be found a ``LookupError`` is raised (``tune``
instead returns fewer specs than asked).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection

from strategies.blocks import ENTRIES, SIBLINGS
from strategies.families import (
    PARAM_SPACE,
    TEMPLATES,
    ParamRange,
    block_family,
    jitter,
    reconcile,
    snap_params,
    spec_from_template,
)
from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.regime import REGIME_FILTERS
from strategies.spec import ParamValue, StrategySpec

FIX_PROBLEMS = ("zero_trades", "too_few_trades", "exception", "lookahead")

# Parameters that are lookbacks: "shorter" means more, faster signals.
LOOKBACKS = frozenset(
    {
        "roc_period",
        "fast_period",
        "slow_period",
        "macd_fast",
        "macd_slow",
        "macd_signal",
        "rsi_period",
        "bb_period",
        "donchian_period",
        "donchian_exit_period",
        "trend_period",
    }
)
# Thresholds, with the direction (in grid steps) that lets more trades through.
LOOSER: dict[str, int] = {
    "roc_threshold": -1,
    "rsi_oversold": +1,
    "rsi_exit": -1,
    "bb_width": -1,
    "adx_min": -1,
    "volume_mult": -1,
    "atr_max_pct": +1,
    "max_hold_bars": -1,
}
REVERSION_ENTRIES = frozenset({"rsi_reversion", "bollinger_reversion"})


def root_name(name: str) -> str:
    """The name without previous edit notes (keeps names from growing every iteration)."""
    return name.split(" | ")[0].strip() or name


def _fmt(v: ParamValue) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _renamed(spec: StrategySpec, note: str) -> StrategySpec:
    return spec.model_copy(update={"name": f"{root_name(spec.name)} | {note}"})


def _diff(old: dict[str, ParamValue], new: dict[str, ParamValue]) -> list[str]:
    return [f"{k} {_fmt(old[k])}->{_fmt(v)}" for k, v in new.items() if k in old and old[k] != v]


def _tunable(spec: StrategySpec) -> list[str]:
    return [p for p in spec.parameters if p in PARAM_SPACE and PARAM_SPACE[p].tunable]


# TUNE -------------------------------------------------------------------------------------------


def tune(
    spec: StrategySpec,
    n: int,
    *,
    rng: random.Random,
    seen: set[str],
    space: ParamSpace = DEFAULT_SPACE,
) -> list[StrategySpec]:
    """Up to n parameter variations around ``spec``: one or two params moved by grid steps.

    Moves start at one or two steps and widen as nearby keys turn out to be taken. ``space``:
    the user's grid (``--param-space``); the parent is first snapped into it.
    """
    base = space.project(reconcile(spec))
    family = base.family.value
    # A parameter the code never reads would make a new trial key with the parent's trades.
    names = [p for p in _tunable(base) if p not in inert_params(base)]
    taken = set(seen) | {base.trial_key()}
    out: list[StrategySpec] = []
    if not names:
        return out
    budget = 80 * n + 200
    for attempt in range(budget):
        if len(out) >= n:
            break
        max_steps = min(6, 2 + attempt // (10 * n + 10))
        k = 1 if attempt < 2 * n else rng.choice((1, 2))
        params = dict(base.parameters)
        for name in rng.sample(names, min(k, len(names))):
            r = _range(space, family, name)
            steps = rng.randint(1, max_steps) * rng.choice((-1, 1))
            params[name] = r.snap(float(params[name]) + steps * r.step)
        params = snap_params(params)
        changes = _diff(base.parameters, params)
        if not changes:
            continue
        cand = base.model_copy(update={"parameters": params})
        key = cand.trial_key()
        if key in taken or not space.contains(cand):
            continue
        taken.add(key)
        out.append(_renamed(cand, "tune " + ", ".join(changes)))
    return out


def toward_more_trades(
    spec: StrategySpec,
    n: int,
    *,
    rng: random.Random,
    seen: set[str],
    space: ParamSpace = DEFAULT_SPACE,
) -> list[StrategySpec]:
    """Up to n small, directed moves that let more signals through: one grid step shorter on
    a lookback or looser on a threshold, then two such moves together.

    For a near miss on the trade floor: random tuning moves half its trials the wrong way.
    """
    base = space.project(reconcile(spec))
    family = base.family.value
    direction = {name: -1 for name in _tunable(base) if name in LOOKBACKS}
    direction |= {name: LOOSER[name] for name in _tunable(base) if name in LOOSER}
    names = sorted(direction)
    rng.shuffle(names)
    moves = [(a,) for a in names] + [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    taken = set(seen) | {base.trial_key()}
    out: list[StrategySpec] = []
    for move in moves:
        if len(out) >= n:
            break
        params = dict(base.parameters)
        for name in move:
            r = _range(space, family, name)
            params[name] = r.snap(float(params[name]) + direction[name] * r.step)
        params = snap_params(params)
        changes = _diff(base.parameters, params)
        cand = base.model_copy(update={"parameters": params})
        if not changes or cand.trial_key() in taken or not space.contains(cand):
            continue
        taken.add(cand.trial_key())
        out.append(_renamed(cand, "tune toward more trades " + ", ".join(changes)))
    return out


def neighbourhood(
    spec: StrategySpec,
    n: int,
    *,
    seed: int | tuple[int, ...],
    seen: set[str],
    radius: int = 6,
    frozen: Collection[str] = (),
    space: ParamSpace = DEFAULT_SPACE,
) -> list[StrategySpec]:
    """Up to n distinct parameter sets around ``spec``: a Latin-hypercube sample of every
    tunable parameter within ``radius`` grid steps of the parent's value (TUNE through the
    screen, ``backtest.screen``).

    A Latin hypercube stratifies every parameter at once: n sets cover each parameter's
    2 x radius + 1 offsets about evenly, where independent draws would leave gaps. The sample
    is a pure function of ``seed`` (a numpy ``SeedSequence`` entropy); sets that snap onto the
    parent, onto each other or onto a key in ``seen`` are dropped and re-drawn, a few rounds.

    A portfolio spec (``strategies.portfolio``) moves within the same grid (``PARAM_SPACE``,
    ``reconcile`` giving its family's parameters); ``frozen`` names parameters kept at the
    parent's value; those the spec's code does not read (``inert_params``) always are.
    ``space``: the user's grid (``--param-space``): the parent is snapped into it first, steps
    are its steps, and a set ordering pushes off it is dropped.
    """
    import numpy as np
    from scipy.stats import qmc

    base = space.project(reconcile(spec))
    family = base.family.value
    names = [p for p in _tunable(base) if p not in frozen and p not in inert_params(base)]
    if not names or n <= 0:
        return []
    taken = set(seen) | {base.trial_key()}
    out: list[StrategySpec] = []
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    width = 2 * radius + 1
    for _round in range(4):
        need = n - len(out)
        if need <= 0:
            break
        sample = qmc.LatinHypercube(d=len(names), rng=rng).random(need + need // 2 + 1)
        offsets = np.minimum((sample * width).astype(int), width - 1) - radius
        for row in offsets.tolist():
            params = dict(base.parameters)
            for name, steps in zip(names, row, strict=True):
                r = _range(space, family, name)
                params[name] = r.snap(float(params[name]) + steps * r.step)
            params = snap_params(params)
            changes = _diff(base.parameters, params)
            cand = base.model_copy(update={"parameters": params})
            key = cand.trial_key()
            if not changes or key in taken or not space.contains(cand):
                continue
            taken.add(key)
            out.append(_renamed(cand, "screen " + ", ".join(changes)))
            if len(out) >= n:
                break
    return out


def search_box(
    spec: StrategySpec,
    *,
    radius: int = 6,
    frozen: Collection[str] = (),
    space: ParamSpace = DEFAULT_SPACE,
) -> tuple[StrategySpec, dict[str, ParamRange]]:
    """(the parent snapped into ``space``, each parameter ``neighbourhood`` moves with the
    grid it may take: ``radius`` of its steps either side of the parent's value, inside the
    space). What a model-based sampler (``backtest.screen.tpe``) searches."""
    base = space.project(reconcile(spec))
    family = base.family.value
    names = [p for p in _tunable(base) if p not in frozen and p not in inert_params(base)]
    box: dict[str, ParamRange] = {}
    for name in names:
        r = _range(space, family, name)
        at = r.snap(float(base.parameters[name]))
        box[name] = ParamRange(
            r.snap(at - radius * r.step), r.snap(at + radius * r.step), r.step, r.kind
        )
    return base, box


def moved(base: StrategySpec, params: dict[str, ParamValue], note: str) -> StrategySpec | None:
    """``base`` with ``params`` (snapped, ordered pairs kept ordered), named by what changed
    after ``note``; None when nothing did."""
    params = snap_params(params)
    changes = _diff(base.parameters, params)
    if not changes:
        return None
    cand = base.model_copy(update={"parameters": params})
    return _renamed(cand, f"{note} " + ", ".join(changes))


def _range(space: ParamSpace, family: str, name: str) -> ParamRange:
    r = space.range_for(family, name)
    assert r is not None, name  # _tunable keeps grid parameters only
    return r


def inert_params(spec: StrategySpec) -> frozenset[str]:
    """Tunable parameters a portfolio spec's code never reads: ``target_vol`` without the
    volatility target. Moving one makes a new trial key with the parent's very trades."""
    if spec.parameters.get("vol_target") is False:  # the switch off (portfolio families)
        return frozenset({"target_vol"})
    return frozenset()


# FIX --------------------------------------------------------------------------------------------


def _loosen(spec: StrategySpec, strength: int) -> dict[str, ParamValue]:
    params = dict(spec.parameters)
    for name, value in spec.parameters.items():
        r = PARAM_SPACE.get(name)
        if r is None:
            continue
        if name in LOOKBACKS:
            params[name] = r.snap(float(value) * 0.75**strength)
        elif name in LOOSER:
            params[name] = r.snap(float(value) + LOOSER[name] * 2 * strength * r.step)
    return snap_params(params)


def _first_fresh(cands: list[StrategySpec], seen: set[str]) -> StrategySpec | None:
    for cand in cands:
        if cand.trial_key() not in seen:
            return cand
    return None


def _jitter_fresh(
    spec: StrategySpec, note: str, rng: random.Random, seen: set[str]
) -> StrategySpec:
    for _ in range(200):
        cand = jitter(spec, rng)
        if cand.trial_key() not in seen:
            return _renamed(cand, note + " (jittered)")
    raise LookupError(f"no unseen variant near {spec.name!r}")


def _fix_trades(
    spec: StrategySpec, problem: str, rng: random.Random, seen: set[str]
) -> StrategySpec:
    cands: list[StrategySpec] = []
    drop_first = problem == "zero_trades"
    for strength in range(1, 5):
        for drop in (drop_first, not drop_first):
            filters = list(spec.filters)
            notes = []
            if drop and filters:
                removed = filters.pop()  # the last-added filter is the newest constraint
                notes.append(f"-{removed}")
            trial = reconcile(spec.model_copy(update={"filters": filters}))
            params = _loosen(trial, strength)
            changes = _diff(trial.parameters, params)
            if changes:
                notes.append("shorter lookbacks/looser thresholds x" + str(strength))
            if not notes:
                continue
            cand = trial.model_copy(update={"parameters": params})
            cands.append(_renamed(cand, f"fix {problem}: " + ", ".join(notes)))
    fresh = _first_fresh(cands, seen)
    if fresh is not None:
        return fresh
    return _jitter_fresh(cands[0] if cands else spec, f"fix {problem}", rng, seen)


def _fix_rerender(
    spec: StrategySpec, problem: str, rng: random.Random, seen: set[str]
) -> StrategySpec:
    family = block_family(spec)
    templates = TEMPLATES[family]
    # Same entry first: keep the idea, reset the design to a known-good one.
    order = sorted(range(len(templates)), key=lambda i: templates[i].entry != spec.entry)
    note = f"fix {problem}: family defaults"
    cands = [
        _renamed(spec_from_template(family, i, long_short=spec.long_short), note) for i in order
    ]
    fresh = _first_fresh(cands, seen)
    if fresh is not None:
        return fresh
    return _jitter_fresh(cands[0], note, rng, seen)


def fix(spec: StrategySpec, problem: str, *, rng: random.Random, seen: set[str]) -> StrategySpec:
    """Repair what failed: too few trades loosen the design, exceptions/lookahead reset it."""
    if problem not in FIX_PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; expected one of {FIX_PROBLEMS}")
    if problem in ("zero_trades", "too_few_trades"):
        return _fix_trades(spec, problem, rng, seen)
    return _fix_rerender(spec, problem, rng, seen)


# REFINE -----------------------------------------------------------------------------------------

Move = Callable[[StrategySpec, random.Random], tuple[StrategySpec, str] | None]


def _add_filter(block: str) -> Move:
    def move(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
        if block in spec.filters:
            return None
        if block == "adx" and spec.entry in REVERSION_ENTRIES:
            return None  # reversion wants a range, not a trend
        return spec.model_copy(update={"filters": [*spec.filters, block]}), f"+{block}"

    return move


def _add_exit(block: str) -> Move:
    def move(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
        if block in spec.exits:
            return None
        return spec.model_copy(update={"exits": [*spec.exits, block]}), f"+{block}"

    return move


def _set_sizing(block: str) -> Move:
    def move(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
        if spec.sizing == block:
            return None
        return spec.model_copy(update={"sizing": block}), f"sizing {spec.sizing}->{block}"

    return move


def _swap_entry(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
    siblings = [s for s in SIBLINGS.get(spec.entry, ()) if s in ENTRIES]
    if not siblings:
        return None
    new = rng.choice(siblings)
    return spec.model_copy(update={"entry": new}), f"entry {spec.entry}->{new}"


def _scaled_lookbacks(factor: float, label: str) -> Move:
    """Every lookback times ``factor`` (snapped to its grid), or None when none moves."""

    def move(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
        params = dict(spec.parameters)
        for name in spec.parameters:
            if name in LOOKBACKS:
                params[name] = PARAM_SPACE[name].snap(float(params[name]) * factor)
        params = snap_params(params)
        if params == spec.parameters:
            return None
        return spec.model_copy(update={"parameters": params}), label

    return move


_slower = _scaled_lookbacks(1.5, "slower lookbacks x1.5")  # fewer trades: costs eat less
# More, faster signals for a spec that trades too little: the mirror of ``_slower``.
_faster = _scaled_lookbacks(0.67, "faster lookbacks x0.67")


def _hedged(spec: StrategySpec, rng: random.Random) -> tuple[StrategySpec, str] | None:
    """Long/short where the entry has a short mirror: the market's drift nets out."""
    entry = ENTRIES.get(spec.entry)
    if spec.long_short or entry is None or not entry.shortable:
        return None
    return spec.model_copy(update={"long_short": True}), "long/short"


HINT_MOVES: dict[str, tuple[Move, ...]] = {
    "market_exposure": (
        _add_filter("trend_sma"),
        _hedged,
        _add_filter("vol_regime"),
        _add_exit("trailing_stop"),
        _add_exit("max_hold"),
    ),
    # A drawdown over the limit (however deep): size to a volatility target, stop the losers,
    # stand aside in the wrong regime.
    "drawdown": (
        _set_sizing("volatility_target"),
        _add_exit("atr_stop"),
        _add_exit("trailing_stop"),
        _add_filter("trend_sma"),
        _add_filter("vol_regime"),
    ),
    # Win rate or profit factor below the bar: the exits decide how trades end.
    "weak_exits": (
        _add_exit("trailing_stop"),
        _add_exit("max_hold"),
        _add_exit("atr_stop"),
    ),
    "too_few_trades": (_faster,),
    "deep_drawdown": (
        _add_exit("atr_stop"),
        _add_exit("trailing_stop"),
        _set_sizing("volatility_target"),
        _add_filter("trend_sma"),
        _add_filter("vol_regime"),
    ),
    "cost_drag": (
        _add_filter("adx"),
        _add_filter("trend_sma"),
        _slower,
        _add_filter("volume_confirm"),
    ),
    "fold_collapse": (
        _add_filter("vol_regime"),
        _add_filter("trend_sma"),
        _set_sizing("volatility_target"),
        _swap_entry,
    ),
    "regime_mismatch": (
        _swap_entry,
        _add_filter("trend_sma"),
        _add_filter("adx"),
        _add_filter("vol_regime"),
    ),
}
HINT_MOVES["low_alpha"] = HINT_MOVES["market_exposure"]  # returns of the strategy's own
GENERIC_MOVES: tuple[Move, ...] = (
    _add_filter("trend_sma"),
    _add_exit("atr_stop"),
    _add_exit("trailing_stop"),
    _set_sizing("volatility_target"),
    _swap_entry,
    _add_filter("vol_regime"),
    _add_filter("adx"),
    _add_exit("max_hold"),
)


# Hints that the market's direction drove the result: the index regime filter (trade only
# when the market is risk-on) is the first design change for them, when the run can feed it.
REGIME_HINTS = frozenset({"market_exposure", "regime_mismatch"})


def refine(
    spec: StrategySpec,
    *,
    failure_hint: str,
    rng: random.Random,
    seen: set[str],
    regime_filters: Collection[str] = (),
) -> StrategySpec:
    """A design change driven by the failure hint (unknown hints use a generic order).

    ``regime_filters``: the regime filters (``strategies.regime``) whose index files the
    run's data has; only those may be added (a variant reading a missing file would fail
    every job). For a market-exposure or regime-mismatch hint they come first."""
    moves: list[Move] = []
    if failure_hint in REGIME_HINTS:
        moves += [_add_filter(f) for f in REGIME_FILTERS if f in regime_filters]
    moves += HINT_MOVES.get(failure_hint, ())
    moves += [m for m in GENERIC_MOVES if m not in moves]
    tried: list[StrategySpec] = []
    for move in moves:
        result = move(spec, rng)
        if result is None:
            continue
        changed, what = result
        cand = _renamed(reconcile(changed), f"refine {failure_hint}: {what}")
        if cand.trial_key() not in seen:
            return cand
        tried.append(cand)
    if not tried:
        raise LookupError(f"no design change applies to {spec.name!r}")
    return _jitter_fresh(tried[0], tried[0].name.split(" | ", 1)[1], rng, seen)
