"""A variant's portfolio weights over time, for review (``notebooks/review.ipynb``).

The run folder keeps each job's return series and trade P&Ls, not its positions. So the
weights are recomputed: the variant's recorded code is replayed on the run's own files (the
manifest's data paths, a regime filter's index files from the run's data folder) over one of
the run's windows, through the same engine and books as the run (next-open fills, the run's
costs), and the books' accepted fills are turned into weights with ``weights_from_fills``.
On the holdout window of a winner, the replay ends on the holdout's recorded final value.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.data import find_csv, read_bars_csv
from backtest.engine import execute
from experiments.records import VARIANTS, Manifest, Verdict
from strategies.portfolio import LABEL, SCOPE
from strategies.regime import feed_name, index_symbols

CASH = "cash"


class WeightsError(Exception):
    """The run folder cannot give this variant's weights; the message says why."""


def weights_from_fills(
    fills: Iterable[Any], closes: pd.DataFrame, values: pd.Series
) -> pd.DataFrame:
    """Each symbol's weight at each bar's close: its position (the fills up to and including
    that bar, by ``executed`` date) times the close, over the portfolio's value; ``cash`` is
    the rest (negative when short sales financed more than the book).

    ``fills``: objects with ``executed`` (date), ``symbol`` and signed ``size`` (the books'
    ``Fill``); ``closes``: date x symbol; ``values``: the portfolio's value at each date.
    """
    days = pd.DatetimeIndex(closes.index).normalize()
    sizes = pd.DataFrame(0.0, index=closes.index, columns=closes.columns)
    for f in fills:
        if f.symbol not in sizes.columns:
            raise WeightsError(f"a fill on {f.symbol!r}, which is not among {list(closes)}")
        at = int(days.searchsorted(pd.Timestamp(f.executed), "left"))
        if at >= len(days) or days[at] != pd.Timestamp(f.executed):
            raise WeightsError(f"a fill on {f.executed}, a date without bars")
        sizes.iloc[at:, sizes.columns.get_loc(f.symbol)] += float(f.size)
    value = pd.Series(values.to_numpy(dtype=float), index=closes.index)
    weights = sizes * closes.astype(float)
    weights = weights.div(value, axis=0)
    weights[CASH] = 1.0 - weights.sum(axis=1)
    return weights


def _window(manifest: Manifest, window: Literal["holdout", "in-sample"]) -> Fold:
    data = manifest.data
    if window == "holdout":
        return Fold.model_validate(data["holdout_fold"])
    folds = [Fold.model_validate(f) for f in data["folds"]]
    return Fold(
        index=0, warmup_start=folds[0].warmup_start, start=folds[0].start, end=folds[-1].end
    )


def replay_weights(
    run_dir: Path | str,
    variant_id: str | None = None,
    *,
    window: Literal["holdout", "in-sample"] = "holdout",
) -> tuple[pd.DataFrame, float]:
    """(weights over the window's trading bars, the replay's final value) of a portfolio-scope
    variant of the run (default: its winner)."""
    run_dir = Path(run_dir)
    try:
        variants = VARIANTS.validate_json((run_dir / "variants.json").read_text())
        verdict = Verdict.model_validate_json((run_dir / "verdict.json").read_text())
        manifest = Manifest.model_validate_json((run_dir / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise WeightsError(f"{run_dir}: not a finished run folder ({exc})") from None
    variant_id = variant_id or verdict.best_variant
    if variant_id is None or variant_id not in variants:
        raise WeightsError(f"{run_dir.name}: no variant {variant_id!r} (the run has no winner?)")
    variant = VARIANTS.dump_python({variant_id: variants[variant_id]}, mode="json")[variant_id]
    if variant["spec"].get("scope") != SCOPE:
        raise WeightsError(f"{variant_id} is a symbol-scope variant: it holds one symbol at a time")
    code = (run_dir / "strategies" / f"{variant_id}.py").read_text(encoding="utf-8")
    config = manifest.config
    timeframe, prices = config.get("timeframe", "1d"), config.get("prices", "raw")
    bars: dict[str, pd.DataFrame] = {}
    for symbol, summary in manifest.data["symbols"].items():
        if not summary.get("path"):
            raise WeightsError(f"{symbol} was not read from a file ({summary.get('source')})")
        bars[symbol] = read_bars_csv(Path(summary["path"]), timeframe, prices=prices)
    for symbol in index_symbols(code):  # a regime filter's index, from the run's data folder
        folder = config.get("data_dir")
        if not folder:
            raise WeightsError(f"the variant reads {symbol}, and the run had no --data-dir")
        bars[feed_name(symbol)] = read_bars_csv(
            find_csv(symbol, Path(folder), timeframe), timeframe, prices=prices
        )
    fold = _window(manifest, window)
    run = execute(
        BacktestJob(
            job_id=f"weights-{variant_id}",
            variant_id=variant_id,
            code=code,
            symbol=LABEL,
            bars=bars,
            fold=fold,
            costs=CostModel.model_validate(config.get("costs") or {}),
            periods_per_year=int(manifest.data.get("periods_per_year", 252)),
        )
    )
    if run.result.status != JobStatus.OK:
        raise WeightsError(f"the replay of {variant_id} failed: {run.result.error}")
    traded = [s for s in bars if s in manifest.data["symbols"]]
    dates = pd.DatetimeIndex(pd.to_datetime([d.isoformat() for d in run.dates]))
    closes = pd.DataFrame(
        {s: bars[s]["close"].reindex(dates).to_numpy() for s in traded}, index=dates
    )
    weights = weights_from_fills(run.fills, closes, pd.Series(run.values, index=dates))
    start = pd.Timestamp(_as_date(fold.start))
    return weights.loc[weights.index >= start], float(run.result.metrics.final_value)


def _as_date(value: date | str) -> date:
    return value if isinstance(value, date) else date.fromisoformat(value)
