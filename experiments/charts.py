"""Charts (matplotlib, Agg, PNG) for the run folder: trajectory, equity curves, trial Sharpes,
the screen's parameter sensitivity, the CPCV paths' Sharpes."""

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

from experiments.sensitivity import Heatmap, best_spec_of, sensitivity_heatmap  # noqa: E402

TRAJECTORY_METRICS = ("sharpe", "max_drawdown_pct", "win_rate_pct", "profit_factor")
# Above this many cells a heatmap does not write each cell's figure: it would be unreadable.
MAX_LABELLED_CELLS = 100
SENSITIVITY_CHART = "charts/sensitivity.png"
ROUTE_COLOURS = {
    "SUCCESS": "tab:green",
    "TUNE": "tab:blue",
    "FIX": "tab:orange",
    "REFINE": "tab:purple",
    "RESEARCH": "tab:brown",
    "ABANDON": "tab:red",
}


def trajectory_panels(
    thresholds: dict[str, float],
    score_threshold: float,
    *,
    dsr_threshold: float | None = None,
    min_trades: int | None = None,
    deflated_alpha_threshold: float | None = None,
    spa_threshold: float | None = None,
) -> list[tuple[str, float | None]]:
    """(metric, threshold) per panel: the fuzzy score, every gate metric (the alpha rules
    among them), DSR, the deflated alpha and SPA p-value when the run has a benchmark
    (their thresholds given), trades."""
    panels: list[tuple[str, float | None]] = [("score", score_threshold)]
    for name in [*thresholds, *(m for m in TRAJECTORY_METRICS if m not in thresholds)]:
        panels.append((name, thresholds.get(name)))
    panels.append(("dsr", dsr_threshold))
    if deflated_alpha_threshold is not None:
        panels.append(("deflated_alpha", deflated_alpha_threshold))
    if spa_threshold is not None:
        panels.append(("spa_p", spa_threshold))
    panels.append(("n_trades", None if min_trades is None else float(min_trades)))
    return panels


def _figure(summary: dict[str, Any], name: str) -> Any:
    """One iteration's figure for a panel: over the benchmark if it is one, else a metric."""
    alpha = summary.get("best_alpha") or {}
    return alpha[name] if name in alpha else (summary.get("best_metrics") or {}).get(name)


def plot_trajectory(
    history: Sequence[dict[str, Any]],
    thresholds: dict[str, float],
    score_threshold: float,
    path: Path,
    *,
    dsr_threshold: float | None = None,
    min_trades: int | None = None,
    deflated_alpha_threshold: float | None = None,
    spa_threshold: float | None = None,
) -> Path:
    """Best variant's fuzzy score (its graded progress beside it, ``gate.progress``) and gate
    metrics per iteration against their thresholds;
    each point is coloured by the route the gate took after that iteration. The figures over
    the benchmark (``alpha_t``, ``beta``, ``deflated_alpha``, ``spa_p``...) come from each
    iteration's ``best_alpha``, the rest from its ``best_metrics``."""
    iters = [h["iteration"] for h in history]
    routes = [str(h["route"]) for h in history]
    panels = trajectory_panels(
        thresholds,
        score_threshold,
        dsr_threshold=dsr_threshold,
        min_trades=min_trades,
        deflated_alpha_threshold=deflated_alpha_threshold,
        spa_threshold=spa_threshold,
    )
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.9 * len(panels)), sharex=True)
    for ax, (name, limit) in zip(np.atleast_1d(axes), panels, strict=True):
        if name == "score":
            ys = [float(h["best_score"]) for h in history]
        else:
            ys = [_nan(_figure(h, name)) for h in history]
        ax.plot(iters, ys, color="0.6", linewidth=1, zorder=1)
        ax.scatter(iters, ys, c=[ROUTE_COLOURS.get(r, "black") for r in routes], zorder=2, s=28)
        graded = name == "score" and any(h.get("best_progress") for h in history)
        if graded:  # the graded measure that ranks and reads progress, beside the pass score
            ax.plot(
                iters,
                [float(h.get("best_progress") or 0.0) for h in history],
                "s--",
                color="tab:cyan",
                markersize=4,
                linewidth=1,
                zorder=1,
                label="progress (graded)",
            )
        if limit is not None:
            ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label="threshold")
        if limit is not None or graded:
            ax.legend(loc="best", fontsize=7)
        ax.set_ylabel("fuzzy score" if graded else name, fontsize=8)
        ax.grid(alpha=0.3)
    top = np.atleast_1d(axes)[0]
    for it, route, h in zip(iters, routes, history, strict=True):
        top.annotate(
            route,
            (it, h["best_score"]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    bottom = np.atleast_1d(axes)[-1]
    bottom.set_xlabel("iteration (point colour: the route taken after it)")
    bottom.set_xticks(iters)
    fig.suptitle("Best variant per iteration (in-sample folds) against the gate's thresholds")
    fig.tight_layout()
    return _save(fig, path)


def plot_equity(
    windows: dict[str, tuple[pd.Series, pd.Series]],
    *,
    benchmark: str,
    path: Path,
    title: str = "",
) -> Path:
    """Strategy against its benchmark, per window (in-sample, holdout), in three panels:
    growth of 1 on a log scale, the drawdowns, and the cumulative active return (the
    strategy's wealth relative to the benchmark's, in %: rising = beating it).

    ``windows``: label -> (strategy returns, benchmark returns), each date-indexed; each
    window starts from 1, as each was run from cash.
    """
    fig, (ax_eq, ax_dd, ax_act) = plt.subplots(
        3, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.2, 1.5]}
    )
    colours = {"in-sample": "tab:blue", "holdout": "tab:green"}
    for label, (strategy, bench) in windows.items():
        _plot_window(
            (ax_eq, ax_dd, ax_act),
            strategy,
            bench,
            benchmark=benchmark,
            label=label,
            colour=colours.get(label, "tab:purple"),
        )
    if "holdout" in windows and not windows["holdout"][0].empty:
        opened = windows["holdout"][0].sort_index().index[0]
        for ax in (ax_eq, ax_dd, ax_act):
            ax.axvline(opened, color="tab:red", linestyle=":", linewidth=1)
        ax_eq.annotate(
            "holdout opened",
            (opened, 1.0),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
            color="tab:red",
        )
    _label_axes(ax_eq, ax_dd, ax_act, benchmark=benchmark, title=title)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _save(fig, path)


def _plot_window(
    axes: tuple[Any, Any, Any],
    strategy: pd.Series,
    bench: pd.Series,
    *,
    benchmark: str,
    label: str,
    colour: str,
) -> None:
    """One window's growth, drawdown and active return, the benchmark's dashed beside them."""
    ax_eq, ax_dd, ax_act = axes
    s = strategy.astype(float).sort_index()
    b = bench.astype(float).sort_index()
    if s.empty:
        return
    growth = (1.0 + s).cumprod()
    ax_eq.plot(
        growth.index,
        growth.to_numpy(),
        "-",
        color=colour,
        linewidth=1.3,
        label=f"strategy ({label})",
    )
    ax_dd.fill_between(
        growth.index,
        100.0 * (growth / growth.cummax() - 1.0),
        0.0,
        color=colour,
        alpha=0.35,
        linewidth=0,
    )
    if b.empty:
        return
    b_growth = (1.0 + b).cumprod()
    ax_eq.plot(
        b_growth.index,
        b_growth.to_numpy(),
        "--",
        color="0.35",
        linewidth=1.1,
        label=f"{benchmark} ({label})",
    )
    ax_dd.plot(
        b_growth.index,
        100.0 * (b_growth / b_growth.cummax() - 1.0),
        "--",
        color="0.35",
        linewidth=0.8,
    )
    both = pd.concat([growth.rename("s"), b_growth.rename("b")], axis=1).ffill().dropna()
    active = 100.0 * (both["s"] / both["b"] - 1.0)
    ax_act.plot(active.index, active.to_numpy(), color=colour, linewidth=1.2)
    ax_act.fill_between(active.index, active.to_numpy(), 0.0, color=colour, alpha=0.15)


def _label_axes(ax_eq: Any, ax_dd: Any, ax_act: Any, *, benchmark: str, title: str) -> None:
    """Log scale, reference lines, labels, title, legend and grid of the three panels."""
    ax_eq.set_yscale("log")
    ax_eq.axhline(1.0, color="0.7", linewidth=0.8)
    ax_eq.set_ylabel("growth of 1 (log)")
    ax_eq.set_title(title or f"strategy vs {benchmark}", fontsize=10)
    ax_eq.legend(loc="best", fontsize=8)
    ax_dd.set_ylabel("drawdown %")
    ax_act.axhline(0.0, color="0.5", linewidth=0.8)
    ax_act.set_ylabel(f"active vs\n{benchmark} %")
    for ax in (ax_eq, ax_dd, ax_act):
        ax.grid(alpha=0.3)


def trial_chart_counts(verdict: dict[str, Any]) -> dict[str, Any]:
    """What ``plot_trial_sharpes`` draws besides the values, read from ``verdict.json``: the
    same ``trial_sharpes`` record the report's deflation line reads, so the chart's "noise
    trials" is the N the deflation used (the effective count when it deflates by that), and
    its "counted" is the run's raw trial count."""
    ts = verdict.get("trial_sharpes") or {}
    return {
        "threshold": ts.get("threshold"),
        "best": ts.get("best"),
        "n_trials": verdict.get("n_trials"),
        "n_deflation": ts.get("n_trials"),
        "unit": ts.get("unit", "annualised"),
    }


def trial_sharpes_labels(
    n_values: int,
    *,
    threshold: float | None,
    n_trials: int | None,
    n_deflation: int | None,
) -> dict[str, str]:
    """The trial chart's words: its title and the threshold line's legend."""
    total = f" of {n_trials} counted" if n_trials is not None else ""
    noise = n_deflation if n_deflation is not None else (n_trials or n_values)
    return {
        "title": f"Trial Sharpe ratios ({n_values}{total}) and the deflation threshold",
        "threshold": ""
        if threshold is None
        else f"expected max of {noise} noise trials: {threshold:.2f}",
    }


def plot_trial_sharpes(
    sharpes: Sequence[float],
    *,
    threshold: float | None,
    path: Path,
    best: float | None = None,
    n_trials: int | None = None,
    n_deflation: int | None = None,
    unit: str = "annualised",
) -> Path:
    """Histogram of every trial's Sharpe with the deflation threshold: the Sharpe the best of
    ``n_deflation`` pure-noise trials would be expected to reach (E[max] x the trials' Sharpe
    std). ``n_trials``: the run's raw count, in the title."""
    values = [float(s) for s in sharpes if s is not None and math.isfinite(s)]
    labels = trial_sharpes_labels(
        len(values), threshold=threshold, n_trials=n_trials, n_deflation=n_deflation
    )
    fig, ax = plt.subplots(figsize=(8, 4))
    if values:
        ax.hist(
            values,
            bins=min(30, max(5, len(values))),
            color="tab:blue",
            alpha=0.7,
            edgecolor="white",
            label=f"trials with a Sharpe ({len(values)})",
        )
    if threshold is not None and math.isfinite(threshold):
        ax.axvline(
            threshold, color="tab:red", linestyle="--", linewidth=1.5, label=labels["threshold"]
        )
    if best is not None and math.isfinite(best):
        ax.axvline(best, color="tab:green", linewidth=1.5, label=f"best variant: {best:.2f}")
    ax.set_xlabel(f"Sharpe ratio ({unit})")
    ax.set_ylabel("trials")
    ax.set_title(labels["title"])
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no trial produced a Sharpe ratio", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return _save(fig, path)


def plot_cpcv_sharpes(
    sharpes: Sequence[float],
    *,
    path: Path,
    median: float | None = None,
    p5: float | None = None,
    in_sample_best: float | None = None,
    unit: str = "annualised",
) -> Path:
    """One bar per CPCV path (``gate.cpcv``): the out-of-sample Sharpe of the search's choice
    on that path, below zero in red, with the median, the 5th percentile and the chosen
    variant's in-sample Sharpe for scale (what the selection looked like)."""
    values = [float(s) for s in sharpes]
    fig, ax = plt.subplots(figsize=(8, 4))
    colours = ["tab:red" if v < 0 else "tab:blue" for v in values]
    ax.bar(range(1, len(values) + 1), values, color=colours, alpha=0.8)
    ax.axhline(0.0, color="black", linewidth=0.8)
    lines = [
        (median, "tab:green", "-", "median"),
        (p5, "tab:orange", "--", "5th percentile"),
        (in_sample_best, "tab:purple", ":", "best variant in sample"),
    ]
    for value, colour, style, label in lines:
        if value is not None and math.isfinite(value):
            ax.axhline(value, color=colour, linestyle=style, label=f"{label}: {value:.2f}")
    below = sum(v < 0 for v in values)
    ax.set_xlabel("path")
    ax.set_ylabel(f"Sharpe ratio ({unit})")
    ax.set_title(f"CPCV: the search's choice out of sample, {below} of {len(values)} paths below 0")
    ax.set_xticks(range(1, len(values) + 1))
    ax.grid(alpha=0.3, axis="y")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_sensitivity(hm: Heatmap, path: Path) -> Path:
    """The heatmap drawn cell by cell on an even grid (the screen's values are grid steps,
    not a continuum), the chosen set starred."""
    fig, ax = plt.subplots(figsize=(8, 6))
    masked = np.ma.masked_invalid(hm.grid)
    image = ax.imshow(masked, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label="median in-sample Sharpe (annualised)")
    ax.set_xticks(range(len(hm.x_values)), [f"{v:g}" for v in hm.x_values], fontsize=7)
    ax.set_yticks(range(len(hm.y_values)), [f"{v:g}" for v in hm.y_values], fontsize=7)
    ax.set_xlabel(hm.x_name)
    ax.set_ylabel(hm.y_name)
    if hm.grid.size <= MAX_LABELLED_CELLS:
        for (j, i), v in np.ndenumerate(hm.grid):
            if math.isfinite(v):
                ax.text(i, j, f"{v:.2f}", ha="center", va="center", fontsize=6, color="white")
    if hm.chosen is not None:
        x, y = hm.x_values.index(hm.chosen[0]), hm.y_values.index(hm.chosen[1])
        ax.scatter(
            [x],
            [y],
            marker="*",
            s=260,
            color="tab:red",
            edgecolors="white",
            linewidths=1.2,
            zorder=3,
            label=f"{hm.chosen_label} ({hm.x_name}={hm.chosen[0]:g}, {hm.y_name}={hm.chosen[1]:g})",
        )
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.1), fontsize=8, frameon=False)
    ax.set_title(hm.title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def draw_sensitivity(run_dir: Path, best_spec: dict[str, Any] | None) -> str | None:
    """Draw ``charts/sensitivity.png`` from the run folder's screen records; its run-folder
    path, or None when the run screened nothing with two moving parameters."""
    hm = sensitivity_heatmap(run_dir, best_spec)
    if hm is None:
        return None
    plot_sensitivity(hm, Path(run_dir) / SENSITIVITY_CHART)
    return SENSITIVITY_CHART


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


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.charts RUN_DIR``: redraw what the run folder alone holds the
    data for (the screen's parameter sensitivity); the other charts need the run's state."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m experiments.charts", description=main.__doc__)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder (runs/<id>)")
    args = p.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"error: {args.run_dir} is not a folder; pass a run folder", file=sys.stderr)
        return 2
    drawn = draw_sensitivity(args.run_dir, best_spec_of(args.run_dir))
    if drawn is None:
        print("no screened batch with two moving parameters: no sensitivity chart", file=sys.stderr)
        return 0
    print(args.run_dir / drawn)
    return 0


if __name__ == "__main__":
    from experiments.cli_output import run_cli

    raise SystemExit(run_cli(main))
