"""Charts (matplotlib, Agg, PNG) for the run folder: trajectory and equity curves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg", force=True)  # headless: never try to open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

TRAJECTORY_METRICS = ("sharpe", "max_drawdown_pct", "win_rate_pct", "profit_factor")


def plot_trajectory(
    history: Sequence[dict[str, Any]],
    thresholds: dict[str, float],
    score_threshold: float,
    path: Path,
) -> Path:
    """Best score and gate metrics per iteration against their thresholds, routes marked."""
    iters = [h["iteration"] for h in history]
    panels = ["score", *TRAJECTORY_METRICS]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.1 * len(panels)), sharex=True)
    for ax, name in zip(axes, panels, strict=True):
        if name == "score":
            ys = [h["best_score"] for h in history]
            limit = score_threshold
        else:
            ys = [_nan(h["best_metrics"].get(name)) for h in history]
            limit = thresholds.get(name)
        ax.plot(iters, ys, marker="o", color="tab:blue")
        if limit is not None:
            ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label="threshold")
            ax.legend(loc="best", fontsize=7)
        ax.set_ylabel(name, fontsize=8)
        ax.grid(alpha=0.3)
    for h, y in zip(history, [h["best_score"] for h in history], strict=True):
        axes[0].annotate(h["route"], (h["iteration"], y), textcoords="offset points",
                         xytext=(0, 6), ha="center", fontsize=7)  # fmt: skip
    axes[-1].set_xlabel("iteration")
    axes[-1].set_xticks(iters)
    fig.suptitle("Best variant per iteration (in-sample folds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_equity(
    curves: dict[str, pd.Series], title: str, path: Path, *, base: float = 100_000.0
) -> Path:
    """Equity curves from per-period returns (each a date-indexed Series)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, rets in curves.items():
        if rets is None or rets.empty:
            continue
        equity = base * (1.0 + rets.astype(float)).cumprod()
        ax.plot(equity.index, equity.to_numpy(), label=label, linewidth=1.2)
    ax.set_title(title)
    ax.set_ylabel("portfolio value")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(np.clip(x, -1e6, 1e6))
