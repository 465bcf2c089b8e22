"""``--sizing BLOCK[:FRACTION]``: the run's position sizing, fixed on every spec it writes.

Why: the sizing is otherwise the search's choice (each family's template, and REFINE may
swap it for a volatility target), so two runs of one directive can size differently. A
researcher who knows how the book will be sized (half the equity per position, say) asks for
it once, and every catalogue spec the run writes uses it; it is recorded in the run's config
(``RunConfig.sizing``), so the folder reproduces the run.

``BLOCK`` is one of the catalogue's sizing blocks (``strategies.blocks.SIZINGS``:
``fixed_fraction``, ``fixed_risk``, ``volatility_target``); ``FRACTION`` sets
``position_fraction``, the share of equity one position may take (all three blocks are capped
by it), on its grid (``strategies.families.PARAM_SPACE``: 0.1 to 0.95 in steps of 0.05).
Without ``FRACTION`` the block's parameters keep the spec's values or their defaults, and
``fixed_risk``'s ``risk_pct`` and ``volatility_target``'s ``target_vol`` stay tunable.

The portfolio families (target weights), the decision pipeline (its risk engine) and an LLM's
own code size themselves: the option leaves them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from strategies.blocks import SIZINGS
from strategies.families import PARAM_SPACE, reconcile
from strategies.spec import StrategySpec
from swarm.errors import UserInputError

if TYPE_CHECKING:
    from strategies.family_api import Proposal

FRACTION = "position_fraction"


def parse_sizing(text: str | None) -> tuple[str, float | None] | None:
    """``--sizing``'s (block, fraction or None); None when not given. Bad text raises one
    ``UserInputError`` line naming the option and the fix."""
    if text is None:
        return None
    blocks = ", ".join(SIZINGS)
    grid = PARAM_SPACE[FRACTION]
    usage = f"use BLOCK or BLOCK:FRACTION with BLOCK one of {blocks}, e.g. fixed_fraction:0.5"
    block, sep, rest = str(text).strip().partition(":")
    block = block.strip().lower().replace("-", "_")
    if block not in SIZINGS:
        raise UserInputError(f"--sizing: {text!r} names no sizing block; {usage}")
    if not sep:
        return block, None
    try:
        fraction = float(rest)
    except ValueError:
        fraction = math.nan
    on_grid = math.isfinite(fraction) and grid.snap(fraction) == fraction
    if not (on_grid and grid.low <= fraction <= grid.high):
        raise UserInputError(
            f"--sizing: fraction {rest.strip()!r} is not a share of equity on the grid; give "
            f"{grid.low:g} to {grid.high:g} in steps of {grid.step:g}, e.g. {block}:0.5"
        )
    return block, fraction


def normalised(text: str | None) -> str | None:
    """The form the run's config records (``fixed_fraction:0.5``), checked."""
    parsed = parse_sizing(text)
    if parsed is None:
        return None
    block, fraction = parsed
    return block if fraction is None else f"{block}:{fraction:g}"


def pin_sizing(spec: StrategySpec, sizing: str | None) -> StrategySpec:
    """``spec`` with the run's sizing: its block and (given) fraction, the block's other
    parameters kept or defaulted (``reconcile``). A spec without a catalogue sizing block
    (portfolio, decision pipeline) is returned as it is."""
    parsed = parse_sizing(sizing)
    if parsed is None or spec.sizing not in SIZINGS:
        return spec
    block, fraction = parsed
    params = dict(spec.parameters)
    if fraction is not None:
        params[FRACTION] = fraction
    pinned = reconcile(spec.model_copy(update={"sizing": block, "parameters": params}))
    return spec if pinned == spec else pinned


def pin_proposals(
    proposals: Sequence[Proposal],
    sizing: str | None,
    *,
    seen: Collection[str],
    own_code: Collection[str],
) -> list[Proposal]:
    """Each proposal with the run's sizing (``pin_sizing``); one whose spec has its own code
    (``own_code``: trial keys) kept as written. Two proposals the pinning makes one trial,
    or one already tried (``seen``), are dropped: a trial is run once."""
    if sizing is None:
        return list(proposals)
    out: list[Proposal] = []
    keys = set(seen)
    for prop in proposals:
        key = prop.spec.trial_key()
        if key in own_code:
            out.append(prop)
            continue
        spec = pin_sizing(prop.spec, sizing)
        key = spec.trial_key()
        if key in keys:
            continue
        keys.add(key)
        out.append(type(prop)(spec, prop.parent_id, prop.why))
    return out
