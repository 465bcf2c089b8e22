"""Prepare a run (validate data, split time, create the run folder) and execute the graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from backtest.data import load_universe, periods_per_year
from backtest.errors import BacktestError
from backtest.executor import make_executor
from backtest.splits import holdout_fold, split_holdout, walk_forward_folds
from experiments.runfolder import RunFolder, build_manifest, new_run_id
from gate.contracts import Criteria
from swarm.config import RunConfig
from swarm.context import RunContext
from swarm.errors import UserInputError
from swarm.progress import Progress

RECURSION_LIMIT = 1_000  # ~8 super-steps per iteration; far above any configured limit


@dataclass
class Prepared:
    config: RunConfig
    criteria: Criteria
    run: RunFolder
    context_kwargs: dict[str, Any]
    progress: Progress


def _offline_fetch(symbol: str, **_: Any) -> pd.DataFrame:
    raise ConnectionError("--offline: network disabled")


def prepare(
    config: RunConfig, criteria: Criteria, *, argv: list[str], quiet: bool = False
) -> Prepared:
    """Everything that can fail because of the user's input fails here, before the run folder exists."""
    progress = Progress(quiet=quiet)
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
        )
        calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
        split = split_holdout(calendar, holdout_frac=config.holdout_frac)
        folds = walk_forward_folds(
            calendar, split, n_folds=config.n_folds, warmup_bars=config.warmup_bars
        )
        hold = holdout_fold(calendar, split, warmup_bars=config.warmup_bars)
    except BacktestError as exc:
        raise UserInputError(str(exc)) from None
    for symbol, loaded in data.items():
        issues = "; ".join(loaded.quality.issues) or "no quality issues"
        progress.stage("data", f"{symbol}: {len(loaded.bars)} bars from {loaded.source_used}, "
                               f"coverage {loaded.quality.coverage_pct:.1f}%, {issues}")  # fmt: skip

    run = RunFolder.create(config.out, new_run_id(config.directive))
    data_summary = {
        "split": split.model_dump(mode="json"),
        "folds": [f.model_dump(mode="json") for f in folds],
        "holdout_fold": hold.model_dump(mode="json"),
        "periods_per_year": periods_per_year(pd.DataFrame(index=calendar), config.timeframe),
        "symbols": {
            s: {
                "source": d.source_used,
                "path": d.path,
                "sha256": d.sha256,
                "n_bars": len(d.bars),
                "quality": d.quality.model_dump(mode="json"),
            }
            for s, d in data.items()
        },
    }
    criteria_text = config.criteria_text or ",".join(
        [f"{c.metric}{c.op}{c.threshold:g}" for c in criteria.rules]
        + [f"min_trades>={criteria.min_trades}"]
    )
    run.write_json(
        "manifest.json",
        build_manifest(
            run_id=run.root.name,
            config=config.model_dump(mode="json") | {"criteria": criteria.model_dump(mode="json")},
            data=data_summary,
            seed=config.seed,
            argv=argv,
        ),
    )
    news_items: list[Any] = []
    if config.news_file is not None:
        from swarm.research.news import load_news_csv

        news_items = load_news_csv(config.news_file)
    progress.stage("run", f"run folder {run.root}")
    return Prepared(
        config=config,
        criteria=criteria,
        run=run,
        progress=progress,
        context_kwargs={
            "data": data,
            "split": split,
            "folds": folds,
            "holdout_fold": hold,
            "news_items": news_items,
            "periods_per_year": periods_per_year(pd.DataFrame(index=calendar), config.timeframe),
            "cache": {"data_summary": data_summary, "criteria_text": criteria_text},
        },
    )


def execute(prepared: Prepared) -> dict[str, Any]:
    from swarm.graph import build_graph

    cfg = prepared.config
    with make_executor(cfg.executor, workers=cfg.workers) as executor:
        ctx = RunContext(
            config=cfg,
            run=prepared.run,
            criteria=prepared.criteria,
            executor=executor,
            progress=prepared.progress,
            **prepared.context_kwargs,
        )
        graph = build_graph()
        initial = {
            "symbols": ctx.symbols,
            "n_folds": len(ctx.folds),
            "iteration": 1,
            "research_round": 0,
            "route": "INITIAL",
            "counters": {"iteration": 1, "strategy_iterations": 1, "research_loops": 0},
            "all_variants": {},
            "history": [],
            "n_backtests": 0,
            "best": None,
            "feedback": [],
        }
        return graph.invoke(
            initial,
            config={"recursion_limit": RECURSION_LIMIT, "max_concurrency": 8},
            context=ctx,
        )
