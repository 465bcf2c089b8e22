"""What a run computes once and reuses across nodes, iterations and research rounds.

A typed memo in place of a bag of string keys: each field says what it holds and who fills
it. Nothing here is graph state or written to disk: a resumed run recomputes what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from backtest.contracts import BacktestResult
    from backtest.data import LoadedBars
    from gate.fuzzy import FuzzyScorer
    from strategies.pairs import PairChoice
    from swarm.analyze.replay import DecisionReplayer
    from swarm.analyze.review_batch import DecisionReviewer
    from swarm.memory.store import ResearchMemory
    from swarm.research.alt_studies import AltStudy
    from swarm.research.context import ResearchContext
    from swarm.research.features import FeatureBundle

# A screened batch's clusters: (member trial keys, the representative's date -> return).
ScreenGroup = tuple[list[str], dict[str, float]]


@dataclass
class RunMemo:
    """The run's memo (``RunContext.memo``; the standalone research command has one too)."""

    # Set when the run is prepared (develop runs): the report's data section, which research
    # extends when it adds symbols, and the criteria as the report states them.
    data_summary: dict[str, Any] | None = None
    criteria_text: str | None = None
    # The regime filters' index series loaded before the run, and their in-sample frames.
    index_bars: dict[str, LoadedBars] = field(default_factory=dict)
    index_insample: dict[str, pd.DataFrame] = field(default_factory=dict)
    # The benchmark's in-sample returns (ISO date -> return); reset when research widens it.
    benchmark_insample: dict[str, float] | None = None
    # Research: one feature bundle per symbol, one research context and memory for the run.
    features: dict[str, FeatureBundle] = field(default_factory=dict)
    research_context: ResearchContext | None = None
    memory: ResearchMemory | None = None
    # The alt-data family studies (research -> strategy), per universe: in-sample only.
    alt_studies: dict[tuple[str, ...], list[AltStudy]] = field(default_factory=dict)
    # Backtests: each symbol's (loaded bars, in-sample frame), shared by all its jobs, and the
    # iteration's results read back from the run folder (keyed by their files).
    insample_frames: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = field(default_factory=dict)
    loaded_results: tuple[tuple[str | None, ...], list[BacktestResult]] | None = None
    # Strategy development: the most cointegrated pair (None is an answer: ``pair_chosen``),
    # and the screen's windows per (scope, universe).
    pair: PairChoice | None = None
    pair_chosen: bool = False
    screen_windows: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict)
    # The gate: its scorer, every variant's portfolio series, screened batches' clusters
    # (by whether the benchmark is cash, then by batch file).
    scorer: FuzzyScorer | None = None
    variant_series: dict[str, dict[str, float]] = field(default_factory=dict)
    screen_groups: dict[bool, dict[str, list[ScreenGroup]]] = field(default_factory=dict)
    # The decision-pipeline family's replayer and reviewer (one set of counts per run).
    decision_replayer: DecisionReplayer | None = None
    decision_reviewer: DecisionReviewer | None = None
