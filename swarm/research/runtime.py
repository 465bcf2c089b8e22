"""What the research nodes need from a run: a Protocol, so that ``swarm.context.RunContext``
(the develop loop) and ``swarm.research.__main__.ResearchRunContext`` (research alone) are
both checked against one description instead of a duck-typed guess."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from swarm.memo import RunMemo


class ResearchSettings(Protocol):
    """The config fields research reads (``swarm.config.RunConfig`` has them all)."""

    timeframe: str
    offline: bool
    preferred_families: list[str]
    # The memory's folder, "off" / False, or None for the user cache dir (swarm.memory).
    memory_dir: str | Path | bool | None


class ResearchRuntime(Protocol):
    """The run-level context the research nodes read; nothing here is graph state."""

    config: Any  # ResearchSettings; optional extras read with getattr: cache_dir, universe_source
    run: Any  # experiments.runfolder.RunFolder
    data: dict[str, Any]  # symbol -> backtest.data.LoadedBars
    split: Any  # backtest.splits.TimeSplit
    progress: Any  # swarm.progress.Progress
    news_items: list[Any]
    memo: RunMemo  # what the run computes once: feature bundles, the research context, memory
    llm: Any  # swarm.llm.client.LLMClient or None (rules brains)

    @property
    def symbols(self) -> list[str]:
        """The run's symbols."""

    def insample_bars(self, symbol: str) -> pd.DataFrame:
        """A symbol's in-sample bars (the holdout stays sealed)."""
