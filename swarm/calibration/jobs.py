"""The runs one calibration asks for: a ``RunSpec`` per scenario and index, from the CLI's
options, every option checked before any folder is made."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

from strategies.param_space import ParamSpace
from swarm.calibration.scenarios import (
    MAX_BASE_SEED,
    MAX_RUNS,
    parse_kinds,
    scenario_for,
    universe_seed,
)
from swarm.calibration.synthetic_universe import UniverseSpec
from swarm.cli_args import screen_options
from swarm.errors import UserInputError


@dataclass(frozen=True)
class LoopOptions:
    """The develop options calibration may change (None: the develop loop's default)."""

    variants: int | None = None
    max_iterations: int | None = None
    criteria: str | None = None
    criteria_replace: bool = False  # --criteria-replace: criteria's rules replace the defaults
    screen_size: int | None = None  # 0 = --no-screen
    deflate_by: str | None = None
    sampler: str | None = None  # --sampler random | tpe
    param_space: ParamSpace | None = None  # --param-space, read and checked


@dataclass(frozen=True)
class RunSpec:
    kind: str  # the scenario's name
    index: int  # 1-based within its scenario
    seed: int  # universe seed and the develop loop's --seed
    universe: UniverseSpec
    options: LoopOptions
    out: Path
    workers: int  # backtest processes of this run
    keep_checkpoints: bool = False
    figures: bool = False  # each run's charts and tear sheet (--figures): no verdict reads them
    families: tuple[str, ...] = ()  # develop --families (the scenario's; empty: all)


def plan_runs(args: argparse.Namespace, out: Path) -> list[RunSpec]:
    """Every run of this invocation, interleaved by scenario; raises ValueError on bad
    options (checked before any folder is made)."""
    names = parse_kinds(args.kinds)
    if not 1 <= args.runs <= MAX_RUNS:
        raise ValueError(f"--runs: {args.runs} must be between 1 and {MAX_RUNS}")
    if not 0 <= args.seed < MAX_BASE_SEED:
        raise ValueError(f"--seed: {args.seed} must be between 0 and {MAX_BASE_SEED - 1}")
    if args.symbols < 1 or args.years < 2:
        raise ValueError("--symbols must be >= 1 and --years >= 2")
    workers = args.workers or 1
    if workers < 1:
        raise ValueError(f"--workers: {workers} must be at least 1")
    try:
        screen = screen_options(args)
    except UserInputError as exc:
        raise ValueError(str(exc)) from None
    swap = bool(getattr(args, "criteria_replace", False))
    if swap and not args.criteria:
        raise ValueError("--criteria-replace: no --criteria to replace the defaults with")
    options = LoopOptions(
        variants=args.variants,
        max_iterations=args.max_iterations,
        criteria=args.criteria or None,
        criteria_replace=swap,
        screen_size=screen["screen_size"],
        deflate_by=screen["deflate_by"],
        sampler=screen["sampler"],
        param_space=screen["param_space"],
    )
    per_run = max(1, (os.cpu_count() or 1) // workers)
    base = base_universe(args)
    specs = []
    for i in range(1, args.runs + 1):
        for name in names:  # interleaved, so partial results cover every scenario
            scenario = scenario_for(name, args.drift)
            seed = universe_seed(args.seed, name, i)
            universe = replace(
                base,
                kind=scenario.universe_kind,
                seed=seed,
                drift_annual=scenario.drift_annual,
                n_symbols=scenario.n_symbols or base.n_symbols,
                **dict(scenario.universe),
            )
            specs.append(
                RunSpec(
                    kind=name,
                    index=i,
                    seed=seed,
                    universe=universe,
                    options=options,
                    out=out,
                    workers=per_run,
                    keep_checkpoints=args.keep_checkpoints,
                    figures=bool(getattr(args, "figures", False)),
                    families=scenario.families,
                )
            )
    return specs


def base_universe(args: argparse.Namespace) -> UniverseSpec:
    """The options every scenario's universe shares (kind, seed and drift come per run)."""
    spec = UniverseSpec(
        n_symbols=args.symbols,
        years=args.years,
        start=date(2012, 1, 2),
        regime_sharpe=args.strength,
        regime_days=args.regime_days,
        reversion_share=args.reversion_share,
        reversion_half_life=args.reversion_half_life,
        pead_sharpe=args.earnings_strength,
    )
    if not 0.0 < spec.reversion_share < 1.0:
        raise ValueError(f"--reversion-share: {spec.reversion_share} must be between 0 and 1")
    if spec.reversion_half_life <= 0:
        raise ValueError(f"--reversion-half-life: {spec.reversion_half_life} must be > 0")
    return spec
