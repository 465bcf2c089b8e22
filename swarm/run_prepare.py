"""Prepare a run: load and check the data, split time, load the benchmark, create the run
folder and its manifest. Everything that can fail because of the user's input fails here,
before the run folder exists; ``swarm.run.execute`` then runs the graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from backtest.benchmark import BUY_AND_HOLD, CASH, Benchmark
from backtest.data import LoadedBars, load_bars, load_universe, periods_per_year
from backtest.errors import BacktestError
from backtest.splits import holdout_fold, split_holdout, walk_forward_folds
from experiments.dataset_ledger import (
    OFF,
    LedgerFileError,
    earlier_trials,
    ledger_folder,
    run_data_key,
)
from experiments.runfolder import RunFolder, build_manifest, new_run_id
from gate.contracts import Criteria
from gate.ledger import EarlierTrials
from swarm.cli_args import alt_data_line
from swarm.config import RunConfig
from swarm.errors import UserInputError
from swarm.memo import RunMemo
from swarm.progress import Progress
from swarm.regime_data import load_index_series
from swarm.state import STATE_SCHEMA

MANIFEST_FILE = "manifest.json"
EARLIER_FILE = "earlier_trials.json"  # what earlier runs on the same data tried
MIN_BENCHMARK_OVERLAP = 60  # in-sample returns a benchmark must share with the universe


@dataclass
class Prepared:
    config: RunConfig
    criteria: Criteria
    run: RunFolder
    context_kwargs: dict[str, Any]
    progress: Progress
    resumed: bool = False


def _offline_fetch(symbol: str, **_: Any) -> pd.DataFrame:
    raise ConnectionError("--offline: network disabled")


def load_data(config: RunConfig) -> tuple[dict[str, LoadedBars], dict[str, Any], dict[str, Any]]:
    """Load the bars and split time: (data, context pieces, the manifest's data summary)."""
    try:
        data = load_universe(
            config.tickers,
            start=config.start,
            end=config.end,
            timeframe=config.timeframe,
            source=config.source,
            data_dir=config.data_dir,
            cache_dir=config.cache_dir,
            seed=config.seed,
            fetcher=_offline_fetch if config.offline else None,
            prices=config.prices,
            repair=config.repair_data,
        )
        calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
        split = split_holdout(calendar, holdout_frac=config.holdout_frac)
        folds = walk_forward_folds(
            calendar, split, n_folds=config.n_folds, warmup_bars=config.warmup_bars
        )
        hold = holdout_fold(calendar, split, warmup_bars=config.warmup_bars)
    except BacktestError as exc:
        raise UserInputError(str(exc)) from None
    benchmark, bench_summary = _load_benchmark(config, data, calendar, folds)
    # The index series a regime filter may read: loaded now so the manifest hashes them.
    indices = load_index_series(config, data)
    ppy = periods_per_year(pd.DataFrame(index=calendar), config.timeframe)
    data_summary = {
        "split": split.model_dump(mode="json"),
        "folds": [f.model_dump(mode="json") for f in folds],
        "holdout_fold": hold.model_dump(mode="json"),
        "periods_per_year": ppy,
        "symbols": {s: d.summary() for s, d in data.items()},
        "benchmark": bench_summary,
        "indices": {s: d.summary() for s, d in indices.items()},
    }
    pieces = {
        "split": split,
        "folds": folds,
        "holdout_fold": hold,
        "periods_per_year": ppy,
        "benchmark": benchmark,
        "memo": RunMemo(index_bars=indices),  # swarm.regime_data reads them from there
    }
    return data, pieces, data_summary


def _load_benchmark(
    config: RunConfig,
    data: dict[str, LoadedBars],
    calendar: pd.DatetimeIndex,
    folds: list,
) -> tuple[Benchmark, dict[str, Any]]:
    """The run's benchmark; a symbol is loaded like the universe and must share its dates."""
    name = config.benchmark
    if name == CASH:
        return Benchmark(name=CASH, calendar=calendar), {"name": CASH}
    if name == BUY_AND_HOLD:
        held = {s: d.bars for s, d in data.items()}
        return Benchmark(name=name, held=held, calendar=calendar), {
            "name": name,
            "symbols": sorted(held),
        }
    if name in data:
        loaded = data[name]
    else:
        try:
            loaded = load_bars(
                name,
                start=config.start,
                end=config.end,
                timeframe=config.timeframe,
                source=config.source,
                data_dir=config.data_dir,
                cache_dir=config.cache_dir,
                seed=config.seed,
                fetcher=_offline_fetch if config.offline else None,
                prices=config.prices,
                repair=config.repair_data,
            )
        except BacktestError as exc:
            raise UserInputError(
                "--benchmark: "
                + str(exc).removeprefix("--tickers: ")
                + "; or use --benchmark buy-and-hold / cash"
            ) from None
    benchmark = Benchmark(name=name, held={name: loaded.bars}, calendar=calendar)
    insample = benchmark.fold_returns(folds, costs=config.costs)
    if len(insample) < MIN_BENCHMARK_OVERLAP:
        raise UserInputError(
            f"--benchmark: {name} has {len(insample)} returns on the universe's in-sample "
            f"dates ({folds[0].start}..{folds[-1].end}); it needs at least "
            f"{MIN_BENCHMARK_OVERLAP}: pick a benchmark with data over the same period"
        )
    return benchmark, {"name": name, "data": loaded.summary()}


def _criteria_text(config: RunConfig, criteria: Criteria) -> str:
    return config.criteria_text or ",".join(
        [f"{c.metric}{c.op}{c.threshold:g}" for c in criteria.rules]
        + [
            f"min_trades>={criteria.min_trades}",
            f"dsr>={criteria.dsr_threshold:g}",
            f"deflated_alpha>={criteria.deflated_alpha_threshold:g}",
            f"spa_p<={criteria.spa_threshold:g}",
        ]
    )


def _news(config: RunConfig) -> list[Any]:
    if config.news_file is None:
        return []
    from swarm.research.news import load_news_csv

    return load_news_csv(config.news_file)


def context_kwargs(config, criteria, data, pieces, data_summary) -> dict[str, Any]:
    """The RunContext's keyword arguments: data, the prepared pieces and news; the memo records the
    data summary and criteria."""
    memo = pieces["memo"]
    memo.data_summary = data_summary
    memo.criteria_text = _criteria_text(config, criteria)
    # Old manifests (before benchmarks) show what the run now compares with.
    data_summary.setdefault("benchmark", {"name": config.benchmark})
    return {"data": data, **pieces, "news_items": _news(config)}


def report_data(progress: Progress, data: dict[str, LoadedBars], config: Any = None) -> None:
    """One line per symbol, then a warning per edge of the window the data does not reach and
    a line per change --repair made: shown whatever --quiet says, as the report keeps them.
    With ``config``: which alternative data the run reads, and whether it was found."""
    for symbol, loaded in data.items():
        q = loaded.quality
        issues = "; ".join(q.issues) or "no quality issues"
        cover = f"coverage {q.coverage_pct:.1f}% of its span"
        if q.window_coverage_pct is not None:
            cover += f", {q.window_coverage_pct:.1f}% of the requested window"
        progress.stage(
            "data",
            f"{symbol}: {len(loaded.bars)} bars from {loaded.source_used}, {cover}, {issues}",
        )
        for line in q.coverage_warnings:
            progress.warn(f"{symbol}: {line}")
        for line in loaded.repair_lines():
            progress.warn(f"repaired {line}")
    line = alt_data_line(
        getattr(config, "alt_data", None), bool(getattr(config, "alt_data_found", False))
    )
    if line is not None:
        progress.stage("data", line)


def prepare(
    config: RunConfig,
    criteria: Criteria,
    *,
    argv: list[str],
    quiet: bool = False,
) -> Prepared:
    """Everything that can fail because of the user's input fails here, before the run folder exists."""
    progress = Progress(quiet=quiet)
    data, pieces, data_summary = load_data(config)
    report_data(progress, data, config)
    kwargs = context_kwargs(config, criteria, data, pieces, data_summary)
    kwargs["earlier"] = earlier_runs(config, data)  # a bad ledger file fails before the folder
    kwargs["data_key"] = run_data_key(config, data)

    run = RunFolder.create(config.out, new_run_id(config.directive))
    run.write_json(
        MANIFEST_FILE,
        build_manifest(
            run_id=run.root.name,
            config=config.model_dump(mode="json") | {"criteria": criteria.model_dump(mode="json")},
            data=data_summary,
            seed=config.seed,
            argv=argv,
        )
        | {"state_schema": STATE_SCHEMA},
    )
    progress.stage("run", f"run folder {run.root}")
    _announce_ledger(config, kwargs["earlier"], run, progress)
    return Prepared(
        config=config, criteria=criteria, run=run, progress=progress, context_kwargs=kwargs
    )


def earlier_runs(config: RunConfig, data: dict[str, LoadedBars]) -> EarlierTrials | None:
    """What earlier runs on this data tried; None when they are not counted."""
    folder = ledger_folder(config.ledger_dir)
    if folder is None or config.fresh_ledger:
        return None
    try:
        return earlier_trials(folder, run_data_key(config, data))
    except LedgerFileError as exc:
        raise UserInputError(f"--ledger-dir: {exc}") from None


def _announce_ledger(
    config: RunConfig, earlier: EarlierTrials | None, run: RunFolder, progress: Progress
) -> None:
    """Say whether earlier runs on this data count, and keep what they tried in the run
    folder (``earlier_trials.json``: the run reproduces from its folder)."""
    if config.ledger_dir == OFF:
        progress.stage("ledger", "off (--ledger-dir off): earlier runs neither read nor recorded")
        return
    if earlier is None:
        progress.stage("ledger", "fresh (--fresh-ledger): earlier runs on this data not counted")
        return
    run.write_json(EARLIER_FILE, earlier.model_dump(mode="json"))
    progress.stage(
        "ledger",
        f"{len(earlier.runs)} earlier run(s) on this data, {len(earlier.trial_keys)} trials "
        f"({earlier.n_effective} effective): counted in the deflation",
    )
