"""Repairs aimed at the failing criterion: pure moves of a spec along what failed.

A near miss is pursued along what it missed, not by random tuning: the failure analysis names
the criteria the best fails and each one's category (``gate.failure.criterion_category``), and
each category has its moves:

* drawdown: a volatility target, stops, a regime filter (and, for a portfolio, more names);
* alpha (alpha t, beta, deflated alpha) or market exposure: hedge it (long/short, rotation's
  ranking as long/short), time it;
* too few trades: faster signals (shorter lookbacks, more frequent rebalancing);
* cost drag: slower signals, less turnover;
* weak exits (win rate, profit factor): trailing, ATR and time stops.

A single-symbol block spec moves with ``strategies.mutate.HINT_MOVES`` (``block_moves``); a
portfolio spec (``strategies.portfolio``) with ``PORTFOLIO_MOVES`` here (``portfolio_moves``).
Each family's plugin names its moves (``repair_moves``); this module never asks a spec's kind. Every move returns a new spec and what
it changed, or None when it does not apply (a switch already on, a family without that
parameter, a value at the edge of its grid); values are snapped to ``PARAM_SPACE``.
Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence

from strategies.families import PARAM_SPACE, reconcile
from strategies.family_api import RepairMoves
from strategies.mutate import HINT_MOVES, Move, root_name
from strategies.portfolio import APPROACH
from strategies.regime import REGIME_FILTERS
from strategies.spec import ParamValue, PortfolioFamily, StrategySpec

# (spec, the regime filters the run's data has) -> (changed spec, what changed) or None.
PortfolioMove = Callable[[StrategySpec, Collection[str]], tuple[StrategySpec, str] | None]

FASTER = 0.67  # a rebalance interval x this: faster signals, more trades
SLOWER = 1.5  # x this: slower signals, less turnover
LOWER_VOL = 0.67  # a volatility target x this: smaller positions in the storms
Z_STEPS = 5  # the pairs family's entry z-score, in 0.1 grid steps: up (fewer trades) or down

# Hints whose block moves put the index regime filter first when the run has its data: the
# market's direction drove the result (``strategies.mutate.REGIME_HINTS`` for REFINE).
_REGIME_FIRST = frozenset({"market_exposure", "low_alpha"})
# Hints whose block moves take the index regime filter after their own first move.
_REGIME_AFTER = frozenset({"drawdown"})


def _with_params(spec: StrategySpec, **changes: ParamValue) -> StrategySpec | None:
    """``spec`` with ``changes`` snapped to the grid, or None when a parameter is not the
    family's or nothing changes."""
    if any(name not in spec.parameters for name in changes):
        return None
    params = dict(spec.parameters)
    for name, value in changes.items():
        r = PARAM_SPACE.get(name)
        params[name] = value if r is None or isinstance(value, bool) else r.snap(value)
    if params == spec.parameters:
        return None
    return spec.model_copy(update={"parameters": params})


def _fmt(v: ParamValue) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _scaled(name: str, factor: float) -> PortfolioMove:
    def move(spec: StrategySpec, _filters: Collection[str]) -> tuple[StrategySpec, str] | None:
        if name not in spec.parameters:
            return None
        old = spec.parameters[name]
        cand = _with_params(spec, **{name: float(old) * factor})
        if cand is None:
            return None
        return cand, f"{name} {_fmt(old)}->{_fmt(cand.parameters[name])}"

    return move


def _stepped(name: str, steps: int) -> PortfolioMove:
    def move(spec: StrategySpec, _filters: Collection[str]) -> tuple[StrategySpec, str] | None:
        if name not in spec.parameters:
            return None
        old = spec.parameters[name]
        cand = _with_params(spec, **{name: float(old) + steps * PARAM_SPACE[name].step})
        if cand is None:
            return None
        return cand, f"{name} {_fmt(old)}->{_fmt(cand.parameters[name])}"

    return move


def _switch_on(name: str) -> PortfolioMove:
    def move(spec: StrategySpec, _filters: Collection[str]) -> tuple[StrategySpec, str] | None:
        if spec.parameters.get(name, True) is not False:  # absent, or already on
            return None
        return spec.model_copy(update={"parameters": spec.parameters | {name: True}}), f"{name} on"

    return move


def _lower_target_vol(
    spec: StrategySpec, _filters: Collection[str]
) -> tuple[StrategySpec, str] | None:
    """The volatility target on (it may be already) and a third lower."""
    if "target_vol" not in spec.parameters or "vol_target" not in spec.parameters:
        return None
    old = spec.parameters["target_vol"]
    cand = _with_params(spec, vol_target=True, target_vol=float(old) * LOWER_VOL)
    if cand is None or cand.parameters["target_vol"] == old:
        return None
    return cand, f"vol_target on, target_vol {_fmt(old)}->{_fmt(cand.parameters['target_vol'])}"


def _regime(spec: StrategySpec, filters: Collection[str]) -> tuple[StrategySpec, str] | None:
    """The first regime filter the run's data has that the spec lacks: cash when risk-off."""
    for f in REGIME_FILTERS:
        if f in filters and f not in spec.filters:
            return spec.model_copy(update={"filters": [*spec.filters, f]}), f"+{f}"
    return None


def _long_short(spec: StrategySpec, _filters: Collection[str]) -> tuple[StrategySpec, str] | None:
    """Short the laggards too: the market's drift nets out (cross-sectional momentum only)."""
    if spec.family != PortfolioFamily.CROSS_SECTIONAL_MOMENTUM or spec.long_short:
        return None
    return spec.model_copy(update={"long_short": True}), "long/short"


def _rotation_long_short(
    spec: StrategySpec, _filters: Collection[str]
) -> tuple[StrategySpec, str] | None:
    """Rotation's ranking as cross-sectional long/short: long the strongest, short the
    weakest, so the market's drift nets out of what the ranking earns."""
    if spec.family != PortfolioFamily.ROTATION:
        return None
    xs = PortfolioFamily.CROSS_SECTIONAL_MOMENTUM
    changed = spec.model_copy(
        update={
            "family": xs,
            "approach": APPROACH[xs],
            "long_short": True,
            "parameters": spec.parameters | {"xs_top_n": 1},
        }
    )
    return changed, "cross-sectional long/short of the same ranking"


PORTFOLIO_MOVES: dict[str, tuple[PortfolioMove, ...]] = {
    "drawdown": (
        _switch_on("vol_target"),
        _regime,
        _lower_target_vol,
        _stepped("xs_top_n", +1),  # more names, less single-name risk
        _switch_on("inverse_vol"),
        _switch_on("cash_filter"),
    ),
    "low_alpha": (_long_short, _rotation_long_short, _regime),
    "market_exposure": (_long_short, _rotation_long_short, _regime),
    "too_few_trades": (_scaled("rebalance_bars", FASTER), _stepped("entry_z", -Z_STEPS)),
    "cost_drag": (_scaled("rebalance_bars", SLOWER), _stepped("entry_z", +Z_STEPS)),
}


def _block_regime(block: str) -> Move:
    def move(spec: StrategySpec, _rng: random.Random) -> tuple[StrategySpec, str] | None:
        if block in spec.filters:
            return None
        return spec.model_copy(update={"filters": [*spec.filters, block]}), f"+{block}"

    return move


def _block_moves(hint: str, regime_filters: Collection[str]) -> list[Move]:
    """The block moves of ``hint``, the run's regime filters placed where the hint wants."""
    own = list(HINT_MOVES.get(hint, ()))
    regime = [_block_regime(f) for f in REGIME_FILTERS if f in regime_filters]
    if hint in _REGIME_FIRST:
        return regime + own
    if hint in _REGIME_AFTER:
        return own[:1] + regime + own[1:]
    return own


def block_moves(
    spec: StrategySpec, hint: str, rng: random.Random, regime_filters: Collection[str]
) -> list[tuple[StrategySpec, str] | None]:
    """A single-symbol block spec's moves along ``hint`` (``strategies.mutate.HINT_MOVES``,
    the run's regime filters where the hint wants them), applied in order."""
    return [move(spec, rng) for move in _block_moves(hint, regime_filters)]


def portfolio_moves(
    spec: StrategySpec, hint: str, rng: random.Random, regime_filters: Collection[str]
) -> list[tuple[StrategySpec, str] | None]:
    """A portfolio spec's moves along ``hint`` (``PORTFOLIO_MOVES``), applied in order."""
    return [move(spec, regime_filters) for move in PORTFOLIO_MOVES.get(hint, ())]


def _candidates(
    spec: StrategySpec,
    hint: str,
    moves: RepairMoves,
    rng: random.Random,
    regime_filters: Collection[str],
) -> list[StrategySpec]:
    """Every move of ``hint`` that applies to ``spec``, reconciled and named, in order."""
    out: list[StrategySpec] = []
    for result in moves(spec, hint, rng, regime_filters):
        if result is None:
            continue
        changed, what = result
        cand = reconcile(changed)
        out.append(
            cand.model_copy(update={"name": f"{root_name(spec.name)} | repair {hint}: {what}"})
        )
    return out


def repairs(
    spec: StrategySpec,
    failing_hints: Sequence[str],
    *,
    moves: RepairMoves,
    rng: random.Random,
    seen: Collection[str],
    regime_filters: Collection[str] = (),
) -> list[StrategySpec]:
    """Fresh repairs of ``spec`` along ``failing_hints`` (the failing criteria's categories,
    worst first), in priority order: each category's first move, then each one's second...,
    so every failing criterion gets its best repair early. None has a trial key in ``seen``
    or another's; ``seen`` is not modified.

    ``moves``: the spec's family's moves (its plugin's ``repair_moves``: ``block_moves`` or
    ``portfolio_moves``). ``regime_filters``: the regime filters whose index files the run's
    data has; only those may be added. An LLM's own code gets none (its proposer revises it)."""
    if spec.is_custom:
        return []
    hints = list(dict.fromkeys(str(h) for h in failing_hints))
    lanes = [_candidates(spec, h, moves, rng, regime_filters) for h in hints]
    taken = set(seen) | {reconcile(spec).trial_key()}
    out: list[StrategySpec] = []
    for rank in range(max((len(lane) for lane in lanes), default=0)):
        for lane in lanes:
            if rank < len(lane) and (key := lane[rank].trial_key()) not in taken:
                taken.add(key)
                out.append(lane[rank])
    return out
