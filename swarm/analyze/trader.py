"""The trader: a direction from the debate, prices anchored on ATR, and the thesis validator.

Entry is the last close, the stop ``stop_atr`` ATRs away on the losing side, the target
``reward_risk`` times that risk on the winning side. Code owns these prices in every brain: a
model's stop and target are overwritten by :func:`anchor` (a model once set a 3.9-ATR stop
with a 1.1R target), except when the ATR is below one tick, where the anchors cannot be
quoted and the model's prices are kept (logged). The trader never sizes: quantity is the risk
engine's. The validator runs after anchoring and fails closed: a thesis it cannot vouch for
is not traded.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from swarm.analyze.contracts import (
    RULES,
    AnalysisConfig,
    Direction,
    Side,
    TraderThesis,
    ValidatorCheck,
)

DIRECTION_OF = {Side.BULL: Direction.LONG, Side.BEAR: Direction.SHORT, Side.NONE: Direction.FLAT}
TICK = 0.01  # the smallest price step of the US equities the desk trades


def anchored_prices(
    direction: Direction, *, close: float, atr: float, stop_atr: float, reward_risk: float
) -> tuple[float, float]:
    """(stop, target) for ``direction``: the formula the tests pin."""
    if direction == Direction.FLAT:
        return close, close
    sign = 1.0 if direction == Direction.LONG else -1.0
    stop = close - sign * stop_atr * atr
    target = close + sign * reward_risk * abs(close - stop)
    return stop, target


class Anchoring(BaseModel):
    """What :func:`anchor` did to a proposed thesis, for the decision's event log."""

    kept_proposal: bool  # True only when the ATR is sub-tick
    proposed_stop: float
    proposed_target: float
    stop: float
    target: float
    atr: float
    tick: float

    @property
    def changed(self) -> bool:
        """Whether anchoring moved the stop or target from what was proposed."""
        return (self.stop, self.target) != (self.proposed_stop, self.proposed_target)

    def event(self) -> dict[str, float | str]:
        """The anchoring as an LLM event for the log."""
        kind = "trader_subtick_kept" if self.kept_proposal else "trader_anchored"
        return {"kind": kind, **self.model_dump(exclude={"kept_proposal"})}


def anchor(
    proposed: TraderThesis, *, close: float, cfg: AnalysisConfig, tick: float = TICK
) -> tuple[TraderThesis, Anchoring]:
    """``proposed`` with entry = ``close`` and stop and target = the ATR anchors, whoever
    proposed them. Sub-tick ATR (``atr < tick``): the proposer's stop and target are kept,
    since an anchor closer than one tick to the entry cannot be quoted. Not validated here:
    the caller validates the anchored thesis."""
    atr = proposed.atr
    sub_tick = math.isfinite(atr) and 0 < atr < tick
    if sub_tick:
        stop, target = proposed.stop, proposed.target
    else:
        stop, target = anchored_prices(
            proposed.direction,
            close=close,
            atr=atr,
            stop_atr=cfg.stop_atr,
            reward_risk=cfg.reward_risk,
        )
    report = Anchoring(
        kept_proposal=sub_tick,
        proposed_stop=proposed.stop,
        proposed_target=proposed.target,
        stop=stop,
        target=target,
        atr=atr,
        tick=tick,
    )
    return proposed.model_copy(update={"entry": close, "stop": stop, "target": target}), report


def propose(
    winner: Side, *, close: float, atr: float, cfg: AnalysisConfig, conviction: float
) -> TraderThesis:
    """The rules trader's thesis: the debate's direction at the close, stop and target anchored to
    the ATR."""
    direction = DIRECTION_OF[winner]
    stop, target = anchored_prices(
        direction, close=close, atr=atr, stop_atr=cfg.stop_atr, reward_risk=cfg.reward_risk
    )
    if direction == Direction.FLAT:
        why = "the debate produced no winner: no direction to trade"
    else:
        why = (
            f"{direction.value} at the close {close:.2f} on a {winner.value} verdict (conviction "
            f"{conviction:.2f}); stop {stop:.2f} = {cfg.stop_atr:g} x ATR{cfg.atr_period} "
            f"{atr:.2f} away, target {target:.2f} = {cfg.reward_risk:g}R, "
            f"{cfg.horizon_days} bars to play out"
        )
    thesis = TraderThesis(
        direction=direction,
        entry=close,
        stop=stop,
        target=target,
        atr=atr,
        atr_period=cfg.atr_period,
        horizon_days=cfg.horizon_days,
        rationale=why,
        model_used=RULES,
    )
    return validate(thesis, max_stop_atr=cfg.max_stop_atr)


def validate(thesis: TraderThesis, *, max_stop_atr: float) -> TraderThesis:
    """Every check the thesis must pass; ``valid`` only if all pass (fails closed on NaN)."""
    e, s, t, atr = thesis.entry, thesis.stop, thesis.target, thesis.atr
    finite = all(math.isfinite(x) for x in (e, s, t, atr)) and atr > 0 and e > 0
    sign = {Direction.LONG: 1.0, Direction.SHORT: -1.0}.get(thesis.direction, 0.0)
    risk = abs(e - s) if finite else math.nan
    checks = [
        ValidatorCheck(
            name="direction", ok=sign != 0.0, detail=f"direction {thesis.direction.value}"
        ),
        ValidatorCheck(
            name="finite_prices", ok=finite, detail=f"entry {e}, stop {s}, target {t}, ATR {atr}"
        ),
        ValidatorCheck(
            name="stop_not_entry",
            ok=finite and risk > 1e-9 * e,
            detail=f"|entry - stop| = {risk:.6g}",
        ),
        ValidatorCheck(
            name="stop_side",
            ok=finite and sign != 0 and (e - s) * sign > 0,
            detail=f"stop {s:.4f} must be {'below' if sign > 0 else 'above'} entry {e:.4f}",
        ),
        ValidatorCheck(
            name="target_side",
            ok=finite and sign != 0 and (t - e) * sign > 0,
            detail=f"target {t:.4f} must be {'above' if sign > 0 else 'below'} entry {e:.4f}",
        ),
        ValidatorCheck(
            name="stop_within_max_atr",
            ok=finite and risk <= max_stop_atr * atr + 1e-12,
            detail=f"stop {risk / atr if finite else math.nan:.2f} ATR away, max {max_stop_atr:g}",
        ),
    ]
    return thesis.model_copy(update={"validator": checks, "valid": all(c.ok for c in checks)})
