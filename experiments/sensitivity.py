"""Parameter sensitivity of a screened batch: the screen's ranking figure (each set's
in-sample Sharpe) over the two parameters that move it most, with the chosen set marked.

A lone bright cell says the chosen set sits on a lucky point; a broad plateau says the
figure holds when the parameters move. Everything is read back from the run folder: the
``screen`` records of ``experiments.jsonl`` keep every screened set's parameters and Sharpe
(``backtest.screen.sweep`` ranks by that Sharpe; ``screens/*.npz`` keeps the return series).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.tracker import read_records
from strategies.family_api import whole_universe

Trial = tuple[dict[str, Any], float]  # (parameters, Sharpe)


@dataclass(frozen=True)
class Heatmap:
    """The median Sharpe of a batch's sets per (x, y) parameter pair; NaN where none fell."""

    x_name: str
    y_name: str
    x_values: list[float]
    y_values: list[float]
    grid: np.ndarray  # len(y_values) x len(x_values)
    chosen: tuple[float, float] | None  # the marked set's (x, y)
    chosen_label: str
    title: str


def usable_trials(record: dict[str, Any]) -> list[Trial]:
    """A screen record's sets that ran and have a Sharpe, with their numeric parameters."""
    out = []
    for t in record.get("trials") or []:
        sharpe = t.get("sharpe")
        if t.get("error") or sharpe is None or not math.isfinite(sharpe):
            continue
        params = {k: float(v) for k, v in (t.get("parameters") or {}).items()}
        out.append((params, float(sharpe)))
    return out


def parameter_spread(trials: Sequence[Trial]) -> dict[str, float]:
    """Per parameter that takes two values or more: the variance, across its values, of the
    median Sharpe of the sets holding each value. The median, not the mean, so one wild
    set does not make a parameter look decisive."""
    names = sorted({k for params, _ in trials for k in params})
    spread: dict[str, float] = {}
    for name in names:
        groups: dict[float, list[float]] = {}
        for params, figure in trials:
            if name in params:
                groups.setdefault(params[name], []).append(figure)
        if len(groups) >= 2:
            spread[name] = float(np.var([np.median(v) for v in groups.values()]))
    return spread


def sensitive_pair(trials: Sequence[Trial]) -> tuple[str, str] | None:
    """The two parameters with the largest spread (ties by name); None under two."""
    spread = parameter_spread(trials)
    if len(spread) < 2:
        return None
    first, second = sorted(spread, key=lambda n: (-spread[n], n))[:2]
    return first, second


def median_grid(
    trials: Sequence[Trial], x_name: str, y_name: str
) -> tuple[list[float], list[float], np.ndarray]:
    """(x values, y values, grid[y, x] of median Sharpe; NaN where no set has the pair)."""
    cells: dict[tuple[float, float], list[float]] = {}
    for params, figure in trials:
        if x_name in params and y_name in params:
            cells.setdefault((params[x_name], params[y_name]), []).append(figure)
    xs = sorted({x for x, _ in cells})
    ys = sorted({y for _, y in cells})
    grid = np.full((len(ys), len(xs)), np.nan)
    for (x, y), figures in cells.items():
        grid[ys.index(y), xs.index(x)] = float(np.median(figures))
    return xs, ys, grid


def pick_batch(
    records: Sequence[dict[str, Any]],
    best_key: str | None,
    *,
    best_family: str | None = None,
    families: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str | None] | None:
    """(the screen record to draw, the trial key to mark): the batch that screened the best
    variant and that variant; else the last batch around a parent of the best variant's
    family, else the last batch, each with its top set sent to Backtrader."""
    screens = [r for r in records if r.get("kind") == "screen"]
    if not screens:
        return None
    for r in reversed(screens):
        if best_key and any(t.get("trial_key") == best_key for t in r.get("trials") or []):
            return r, best_key
    families = families or {}
    family = [r for r in screens if best_family and families.get(r.get("parent_id")) == best_family]
    last = (family or screens)[-1]
    top = (last.get("confirmed") or [None])[0]
    return last, top


def heatmap_of(record: dict[str, Any], chosen_key: str | None, *, best: bool) -> Heatmap | None:
    """The batch's heatmap over its sensitive pair; None when fewer than two parameters
    moved (nothing to draw on two axes)."""
    trials = usable_trials(record)
    pair = sensitive_pair(trials)
    if pair is None:
        return None
    x_name, y_name = pair
    xs, ys, grid = median_grid(trials, x_name, y_name)
    chosen = None
    for t in record.get("trials") or []:
        params = t.get("parameters") or {}
        if t.get("trial_key") == chosen_key and x_name in params and y_name in params:
            chosen = (float(params[x_name]), float(params[y_name]))
    scope = " portfolio" if whole_universe(record.get("scope")) else ""
    title = (
        f"Screen i{int(record.get('iteration', 0)):02d}{scope}: {len(trials)} sets around "
        f"{record.get('parent_id')}\nmedian in-sample Sharpe over the two parameters that "
        "move it most"
    )
    label = "best variant" if best else "top screened set"
    return Heatmap(x_name, y_name, xs, ys, grid, chosen, label, title)


def sensitivity_heatmap(run_dir: Path, best_spec: dict[str, Any] | None) -> Heatmap | None:
    """The run folder's heatmap (``experiments.charts.draw_sensitivity`` draws it), or None
    when the run screened nothing with two moving parameters. ``best_spec``: the best
    variant's spec (``variants.json``), whose set is marked when the screen found it."""
    run_dir = Path(run_dir)
    journal = run_dir / "experiments.jsonl"
    if not journal.is_file():
        return None
    best_key = family = None
    if best_spec:
        from strategies.spec import StrategySpec

        spec = StrategySpec.model_validate(best_spec)
        best_key, family = spec.trial_key(), spec.family
    families = {
        vid: str((v.get("spec") or {}).get("family"))
        for vid, v in _read_json(run_dir / "variants.json", {}).items()
    }
    picked = pick_batch(
        list(read_records(journal)), best_key, best_family=family, families=families
    )
    if picked is None:
        return None
    record, chosen = picked
    return heatmap_of(record, chosen, best=chosen is not None and chosen == best_key)


def best_spec_of(run_dir: Path) -> dict[str, Any] | None:
    """The best variant's spec from ``verdict.json`` and ``variants.json`` (None if absent)."""
    run_dir = Path(run_dir)
    best = _read_json(run_dir / "verdict.json", {}).get("best_variant")
    variants = _read_json(run_dir / "variants.json", {})
    return (variants.get(best) or {}).get("spec") if best else None


def _read_json(path: Path, missing: Any) -> Any:
    """A run-folder file, or ``missing`` when the run stopped before writing it."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else missing
