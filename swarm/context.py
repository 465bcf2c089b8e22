"""Everything a node needs that is not state: config, data, executor, run folder.

Built once per run by the CLI and handed to the graph as LangGraph's runtime
context (``graph.invoke(..., context=ctx)``), so there is no global config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from backtest.benchmark import CASH, Benchmark
from backtest.contracts import Fold
from backtest.data import LoadedBars
from backtest.executors import Executor
from backtest.splits import TimeSplit
from experiments.runfolder import RunFolder
from gate.contracts import Criteria
from gate.ledger import EarlierTrials
from swarm.config import RunConfig
from swarm.memo import RunMemo
from swarm.progress import Progress


@dataclass
class RunContext:
    config: RunConfig
    run: RunFolder
    data: dict[str, LoadedBars]
    split: TimeSplit
    folds: list[Fold]
    holdout_fold: Fold
    criteria: Criteria
    executor: Executor
    progress: Progress
    periods_per_year: int = 252  # measured from the data: 252 exchange days, 365 for 24/7 markets
    benchmark: Benchmark = field(default_factory=lambda: Benchmark(name=CASH))
    news_items: list[Any] = field(default_factory=list)
    llm: Any = None  # swarm.llm.client.LLMClient when --llm is set; None means rules brains only
    memo: RunMemo = field(default_factory=RunMemo)  # what the run computes once
    # Earlier runs on the same data (experiments.dataset_ledger), frozen when the run started;
    # None when they are not counted (--fresh-ledger, --ledger-dir off, or a resumed run,
    # whose checkpointed ledger already holds them).
    earlier: EarlierTrials | None = None
    data_key: str = ""  # the run's dataset in that ledger ("" on a resume: computed again)

    @property
    def symbols(self) -> list[str]:
        """The run's symbols, in data order."""
        return list(self.data)

    def benchmark_insample(self) -> dict[str, float]:
        """The benchmark's returns over the in-sample folds (ISO date -> return), memoised."""
        if self.memo.benchmark_insample is None:
            rets = self.benchmark.fold_returns(self.folds, costs=self.config.costs)
            self.memo.benchmark_insample = {str(k): float(v) for k, v in rets.items()}
        return self.memo.benchmark_insample

    def insample_bars(self, symbol: str) -> pd.DataFrame:
        """The only window research may look at: the holdout stays sealed."""
        bars = self.data[symbol].bars
        return self.split.insample_bars(bars)
