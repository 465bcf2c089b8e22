"""TUNE through the screen with a model-based sampler: Optuna's TPE (``--sampler tpe``).

The random sampler (``strategies.mutate.neighbourhood``) draws all of a sweep's sets at once;
TPE draws them in small batches, each batch screened (the in-sample windows the sweep ranks on,
never the holdout) and told back, so later draws lean toward the better region. It searches the
box the random sampler does (``strategies.mutate.search_box``: each tunable parameter within
``radius`` grid steps of the parent, inside the user's space), as grid indices, so every draw
is on the grid. The study is seeded from the run's seed, the iteration and the round: the same
run draws the same sets.

Every drawn set is screened and becomes one row of the sweep, so the node records each as a
trial, as it does the random sampler's. A draw that repeats a set is not a new trial and not a
row: one drawn earlier in this sweep is told its known value; one tried before the sweep
(``seen``: earlier iterations, the parent) is screened for TPE alone and told its value, so the
model learns where the earlier search found its best instead of being told that region failed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from backtest.screen.sweep import ScreenedSet, Sweep, combine
from strategies.mutate import moved, search_box
from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.spec import StrategySpec

BATCH = 10  # sets drawn before each tell: TPE's first 10 are its random start-up draws
# The objective's floors keep the sweep's order (``sweep._rank_key``): a failed set below
# every set under the trade floor, which is below every set above it.
UNDER_FLOOR = 1_000.0
FAILED = -2_000.0
SHARPE_CAP = 100.0  # a degenerate window's huge Sharpe must not swamp the model


def objective(s: ScreenedSet, min_trades: int) -> float:
    """The value TPE maximises: the in-sample Sharpe the sweep ranks on (capped), pushed
    below every eligible set under the trade floor, and to the bottom when it failed."""
    if s.error is not None or s.sharpe is None:
        return FAILED
    sharpe = min(max(s.sharpe, -SHARPE_CAP), SHARPE_CAP)
    return sharpe - UNDER_FLOOR if s.n_trades < min_trades else sharpe


def int_seed(seed: int | tuple[int, ...]) -> int:
    """A 32-bit seed for Optuna from the sweep's seed (a numpy ``SeedSequence`` entropy)."""
    return int(np.random.SeedSequence(seed).generate_state(1)[0])


def tpe_sweep(
    parent: StrategySpec,
    n: int,
    *,
    seed: int | tuple[int, ...],
    seen: Collection[str],
    evaluate: Callable[[list[StrategySpec]], Sweep],
    min_trades: int,
    space: ParamSpace = DEFAULT_SPACE,
    radius: int = 6,
) -> Sweep:
    """Up to ``n`` distinct sets around ``parent`` drawn by TPE, each screened by ``evaluate``
    (``screen_sets`` on the run's windows), as one sweep ranked best first."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # a tell is not news
    base, box = search_box(parent, radius=radius, space=space)
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=int_seed(seed))
    )
    taken = set(seen) | {base.trial_key()}
    known: dict[str, float] = {}
    sweeps: list[Sweep] = []
    done, asks, budget = 0, 0, 4 * n + 20
    while box and done < n and asks < budget:
        trials: list[Any] = []
        specs: list[StrategySpec] = []
        again: list[tuple[Any, StrategySpec]] = []  # drawn, but tried before: not a trial
        while len(specs) < min(BATCH, n - done) and asks < budget:
            trial, asks = study.ask(), asks + 1
            params = dict(base.parameters)
            for name, r in box.items():
                k = trial.suggest_int(name, 0, round((r.high - r.low) / r.step))
                params[name] = r.snap(r.low + k * r.step)
            cand = moved(base, params, "screen tpe") or base
            key = cand.trial_key()
            if key in known or not space.contains(cand):
                study.tell(trial, known.get(key, FAILED))
            elif key in taken:
                again.append((trial, cand))
            else:
                taken.add(key)
                trials.append(trial)
                specs.append(cand)
        if again:  # screened for TPE's sake only: the model learns what it re-drew
            once = list({c.trial_key(): c for _, c in again}.values())  # re-drawn twice: once
            tell(study, again, evaluate(once), known, min_trades)
        if not specs:
            break
        sweep = evaluate(specs)
        tell(study, list(zip(trials, specs, strict=True)), sweep, known, min_trades)
        sweeps.append(sweep)
        done += len(specs)
    return combine(sweeps, min_trades) if sweeps else evaluate([])


def tell(
    study: Any,
    drawn: list[tuple[Any, StrategySpec]],
    sweep: Sweep,
    known: dict[str, float],
    min_trades: int,
) -> None:
    """Tell each drawn trial its set's objective (remembered in ``known`` by trial key;
    ``sweep`` screened each drawn set, once)."""
    for s in sweep.sets:
        known[s.trial_key] = objective(s, min_trades)
    for trial, spec in drawn:
        study.tell(trial, known[spec.trial_key()])
