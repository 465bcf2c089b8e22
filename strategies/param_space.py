"""The user's parameter space (``--param-space FILE``): per family, per parameter, a narrower
grid than the code's (``strategies.families.PARAM_SPACE``).

A ``ParamSpace`` holds only the user's ranges; every other parameter keeps the code's. It is a
typed value carried by the run's config (never a module global), so the manifest records it
and ``--resume`` reads it back. A user range must be a sub-grid of the code's (its low, high and
step on the code's grid, inside its bounds): snapping to the code's grid then never moves a
value off the user's, and the user's grid never asks the code for a value it cannot take.

The file is TOML (``.toml``) or JSON (``.json``), one table per family and parameter::

    [momentum.roc_period]
    low = 10
    high = 60
    step = 5          # optional: the code's step
    kind = "int"      # optional: must be the code's
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from strategies.families import (
    ORDERED_PAIRS,
    PARAM_SPACE,
    ParamRange,
    snap_params,
)
from strategies.spec import StrategySpec

KEYS = ("low", "high", "step", "kind")
SUFFIXES = (".toml", ".json")


class ParamSpaceError(ValueError):
    """A bad ``--param-space`` file: the message names the file, family, parameter and fix."""


class ParamSpace(BaseModel):
    """The user's ranges, family -> parameter -> ``ParamRange``; empty is the code's grid."""

    model_config = ConfigDict(frozen=True)

    ranges: dict[str, dict[str, ParamRange]] = Field(default_factory=dict)
    source: str | None = None  # the file it was read from (for the record)

    def range_for(self, family: str, name: str) -> ParamRange | None:
        """The user's range of ``name`` in ``family``, else the code's (None: not a grid
        parameter)."""
        own = self.ranges.get(family)
        if own is not None and name in own:
            return own[name]
        return PARAM_SPACE.get(name)

    def project(self, spec: StrategySpec) -> StrategySpec:
        """``spec`` with every parameter the user ranged snapped into the user's grid (the
        spec itself when the user ranged none of its family's)."""
        own = self.ranges.get(spec.family.value)
        if not own or not set(own) & set(spec.parameters):
            return spec
        params = dict(spec.parameters)
        for name, r in own.items():
            if name in params and not isinstance(params[name], bool):
                params[name] = r.snap(float(params[name]))
        return spec.model_copy(update={"parameters": snap_params(params)})

    def contains(self, spec: StrategySpec) -> bool:
        """Whether every parameter the user ranged is on the user's grid."""
        own = self.ranges.get(spec.family.value) or {}
        return all(
            r.snap(float(spec.parameters[name])) == spec.parameters[name]
            for name, r in own.items()
            if name in spec.parameters
        )


DEFAULT_SPACE = ParamSpace()


def load_param_space(path: Path, grid: Mapping[str, frozenset[str]]) -> ParamSpace:
    """Read and check a ``--param-space`` file against ``grid``, each family's tunable
    parameters (``FamilyRegistry.grid_parameters()``); ``ParamSpaceError`` on any problem."""
    if path.suffix.lower() not in SUFFIXES:
        raise ParamSpaceError(f"{path}: use a .toml or .json file (see docs/param_space.toml)")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamSpaceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ParamSpaceError(f"{path}: not valid {path.suffix[1:].upper()} ({exc})") from None
    return parse_param_space(data, source=str(path), grid=grid)


def parse_param_space(data: Any, *, source: str, grid: Mapping[str, frozenset[str]]) -> ParamSpace:
    """The checked ``ParamSpace`` of a parsed file (``ParamSpaceError`` naming ``source``,
    the family and the parameter on the first problem). ``grid``: each family's tunable
    parameters, as the family plugins name them (``FamilyRegistry.grid_parameters()``)."""
    if not isinstance(data, dict) or not data:
        raise ParamSpaceError(
            f"{source}: expected one table per family, e.g. [momentum.roc_period] low = 10 "
            "high = 60"
        )
    ranges: dict[str, dict[str, ParamRange]] = {}
    for family, table in data.items():
        known = grid.get(family)
        if not known:
            raise ParamSpaceError(
                f"{source}: unknown family {family!r}; use one of {', '.join(grid)}"
            )
        if not isinstance(table, dict) or not table:
            raise ParamSpaceError(
                f"{source}: [{family}] must hold one table per parameter, e.g. "
                f"[{family}.{sorted(known)[0]}] low = ... high = ..."
            )
        ranges[family] = {}
        for name, entry in table.items():
            where = f"{source}: [{family}.{name}]"
            if name not in known:
                raise ParamSpaceError(
                    f"{where}: not a tunable parameter of {family}; use one of "
                    f"{', '.join(sorted(known))}"
                )
            ranges[family][name] = parse_range(entry, PARAM_SPACE[name], where=where)
        _check_order(ranges[family], where=f"{source}: [{family}]")
    return ParamSpace(ranges=ranges, source=source)


def _number(entry: dict, key: str, code: ParamRange, where: str) -> float:
    value = entry.get(key, code.step if key == "step" else None)
    if value is None:
        raise ParamSpaceError(f"{where}: {key} is missing; give low and high (step optional)")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParamSpaceError(f"{where}: {key} = {value!r} is not a number")
    if code.kind == "int" and float(value) != int(value):
        raise ParamSpaceError(f"{where}: {key} = {value} must be a whole number (an int parameter)")
    return float(value)


def _on_grid(value: float, origin: float, step: float) -> bool:
    k = (value - origin) / step
    return abs(k - round(k)) < 1e-6


def parse_range(entry: Any, code: ParamRange, *, where: str) -> ParamRange:
    """One parameter's checked range: a sub-grid of the code's ``code``."""
    if not isinstance(entry, dict):
        raise ParamSpaceError(f"{where}: expected a table with low, high (and step, kind)")
    extra = sorted(set(entry) - set(KEYS))
    if extra:
        raise ParamSpaceError(f"{where}: unknown key(s) {', '.join(extra)}; use {', '.join(KEYS)}")
    kind = entry.get("kind", code.kind)
    if kind != code.kind:
        raise ParamSpaceError(
            f"{where}: kind {kind!r}, but the code reads {code.kind!r}; use kind = {code.kind!r}"
        )
    low, high, step = (_number(entry, k, code, where) for k in ("low", "high", "step"))
    if low > high:
        raise ParamSpaceError(f"{where}: low {low:g} > high {high:g}; make low <= high")
    if low < code.low or high > code.high:
        raise ParamSpaceError(
            f"{where}: {low:g}..{high:g} is outside what the code takes "
            f"({code.low:g}..{code.high:g}); narrow it"
        )
    if step <= 0 or not _on_grid(step, 0.0, code.step):
        raise ParamSpaceError(
            f"{where}: step {step:g} must be a positive multiple of the code's step {code.step:g}"
        )
    for key, v in (("low", low), ("high", high)):
        if not _on_grid(v, code.low, code.step):
            raise ParamSpaceError(
                f"{where}: {key} {v:g} is off the code's grid ({code.low:g} + k x {code.step:g})"
            )
    cast = int if code.kind == "int" else float
    return ParamRange(cast(low), cast(high), cast(step), code.kind, code.tunable)


def _check_order(ranges: dict[str, ParamRange], *, where: str) -> None:
    """Ordered pairs (``fast_period`` < ``slow_period``, ...) must leave room for both."""
    for a, b in ORDERED_PAIRS:
        ra, rb = ranges.get(a, PARAM_SPACE[a]), ranges.get(b, PARAM_SPACE[b])
        if (a in ranges or b in ranges) and ra.low >= rb.high:
            raise ParamSpaceError(
                f"{where}: {a} must stay below {b}, but {a}'s low {ra.low:g} >= {b}'s high "
                f"{rb.high:g}; lower {a} or raise {b}"
            )
