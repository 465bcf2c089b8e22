"""Charts (matplotlib, Agg, PNG) for the run folder: trajectory, equity curves, trial Sharpes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg", force=True)  # headless: never try to open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

TRAJECTORY_METRICS = ("sharpe", "max_drawdown_pct", "win_rate_pct", "profit_factor")
ROUTE_COLOURS = {
    "SUCCESS": "tab:green", "TUNE": "tab:blue", "FIX": "tab:orange", "REFINE": "tab:purple",
    "RESEARCH": "tab:brown", "ABANDON": "tab:red",
}  # fmt: skip


def trajectory_panels(
    thresholds: dict[str, float],
    score_threshold: float,
    *,
    dsr_threshold: float | None = None,
    min_trades: int | None = None,
) -> list[tuple[str, float | None]]:
    """(metric, threshold) per panel: the fuzzy score, every gate metric, DSR, trades."""
    panels: list[tuple[str, float | None]] = [("score", score_threshold)]
    for name in [*thresholds, *(m for m in TRAJECTORY_METRICS if m not in thresholds)]:
        panels.append((name, thresholds.get(name)))
    panels.append(("dsr", dsr_threshold))
    panels.append(("n_trades", None if min_trades is None else float(min_trades)))
    return panels


def plot_trajectory(
    history: Sequence[dict[str, Any]],
    thresholds: dict[str, float],
    score_threshold: float,
    path: Path,
    *,
    dsr_threshold: float | None = None,
    min_trades: int | None = None,
) -> Path:
    """Best variant's fuzzy score and gate metrics per iteration against their thresholds;
    each point is coloured by the route the gate took after that iteration."""
    iters = [h["iteration"] for h in history]
    routes = [str(h["route"]) for h in history]
    panels = trajectory_panels(
        thresholds, score_threshold, dsr_threshold=dsr_threshold, min_trades=min_trades
    )
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.9 * len(panels)), sharex=True)
    for ax, (name, limit) in zip(np.atleast_1d(axes), panels, strict=True):
        if name == "score":
            ys = [float(h["best_score"]) for h in history]
        else:
            ys = [_nan((h.get("best_metrics") or {}).get(name)) for h in history]
        ax.plot(iters, ys, color="0.6", linewidth=1, zorder=1)
        ax.scatter(iters, ys, c=[ROUTE_COLOURS.get(r, "black") for r in routes], zorder=2, s=28)
        if limit is not None:
            ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label="threshold")
            ax.legend(loc="best", fontsize=7)
        ax.set_ylabel(name, fontsize=8)
        ax.grid(alpha=0.3)
    top = np.atleast_1d(axes)[0]
    for it, route, h in zip(iters, routes, history, strict=True):
        top.annotate(route, (it, h["best_score"]), textcoords="offset points",
                     xytext=(0, 6), ha="center", fontsize=7)  # fmt: skip
    bottom = np.atleast_1d(axes)[-1]
    bottom.set_xlabel("iteration (point colour: the route taken after it)")
    bottom.set_xticks(iters)
    fig.suptitle("Best variant per iteration (in-sample folds) against the gate's thresholds")
    fig.tight_layout()
    return _save(fig, path)


def plot_equity(
    curves: dict[str, pd.Series], title: str, path: Path, *, base: float = 100_000.0
) -> Path:
    """Equity curves from per-period returns (each a date-indexed Series)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, rets in curves.items():
        if rets is None or rets.empty:
            continue
        equity = base * (1.0 + rets.astype(float)).cumprod()
        style = "--" if "buy & hold" in label else "-"
        ax.plot(equity.index, equity.to_numpy(), style, label=label, linewidth=1.2)
    ax.set_title(title)
    ax.set_ylabel("portfolio value")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _save(fig, path)


def plot_trial_sharpes(
    sharpes: Sequence[float],
    *,
    threshold: float | None,
    path: Path,
    best: float | None = None,
    n_trials: int | None = None,
    unit: str = "annualised",
) -> Path:
    """Histogram of every trial's Sharpe with the deflation threshold: the Sharpe the best of
    that many pure-noise trials would be expected to reach (E[max] x the trials' Sharpe std)."""
    values = [float(s) for s in sharpes if s is not None and math.isfinite(s)]
    fig, ax = plt.subplots(figsize=(8, 4))
    if values:
        ax.hist(values, bins=min(30, max(5, len(values))), color="tab:blue", alpha=0.7,
                edgecolor="white", label=f"trials with a Sharpe ({len(values)})")  # fmt: skip
    if threshold is not None and math.isfinite(threshold):
        ax.axvline(threshold, color="tab:red", linestyle="--", linewidth=1.5,
                   label=f"expected max of {n_trials or len(values)} noise trials: {threshold:.2f}")  # fmt: skip
    if best is not None and math.isfinite(best):
        ax.axvline(best, color="tab:green", linewidth=1.5, label=f"best variant: {best:.2f}")
    ax.set_xlabel(f"Sharpe ratio ({unit})")
    ax.set_ylabel("trials")
    total = f" of {n_trials} counted" if n_trials is not None else ""
    ax.set_title(f"Trial Sharpe ratios ({len(values)}{total}) and the deflation threshold")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no trial produced a Sharpe ratio", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)  # atomic: a replayed finalize never leaves half a PNG
    return path


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(np.clip(x, -1e6, 1e6))
