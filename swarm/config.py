"""One run's configuration: an immutable object passed down, never a global."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backtest.contracts import CostModel
from gate.contracts import Limits
from gate.cpcv import N_GROUPS as CPCV_GROUPS
from gate.cpcv import N_TEST_GROUPS as CPCV_TEST_GROUPS
from strategies.param_space import ParamSpace
from swarm.cli_args import SCREEN_SIZE
from swarm.llm.settings import LLMSettings


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    directive: str
    tickers: list[str]
    universe_source: str
    preferred_families: list[str]
    # The taxonomy nodes the directive named (strategies.taxonomy): what "outside the
    # directive" is judged on; empty for a run recorded before the tree (its families then).
    styles: list[str] = Field(default_factory=list)
    # The resolved plan as --dry-run prints it (swarm.plan.plan_summary); heads report.md.
    plan: dict[str, Any] | None = None
    start: date
    end: date
    timeframe: str = "1d"
    data_dir: Path | None = None
    source: str = "auto"
    cache_dir: Path | None = None
    news_file: Path | None = None
    alt_data: Path | None = None  # point-in-time alternative data (altdata.corpus layout)
    alt_data_found: bool = False  # found above --data-dir rather than given (cli_args)
    # Where the fundamental subagents read statements: corpus | edgar | yfinance (cli_args).
    fundamentals: Literal["corpus", "edgar", "yfinance"] = "corpus"
    variants: int = Field(5, ge=1, le=50)
    limits: Limits = Field(default_factory=Limits)
    seed: int = 0
    out: Path = Path("runs")
    llm: str = "none"
    costs: CostModel = Field(default_factory=CostModel)
    # --sizing: every catalogue spec's sizing block (and position_fraction), e.g.
    # "fixed_fraction:0.5"; None: the search's own (swarm.sizing).
    sizing: str | None = None
    criteria_text: str | None = None  # --criteria as typed (None: the defaults)
    # --criteria-replace: criteria_text's rules replace the defaults (False: laid over them).
    criteria_replace: bool = False
    # The asset class's defaults (swarm.asset_defaults): its criteria laid over the lab's,
    # and why each default applied (for the report).
    asset_class: str = "equity"
    asset_criteria: str = ""
    asset_notes: list[str] = Field(default_factory=list)
    holdout_frac: float = Field(0.2, gt=0, lt=0.5)
    n_folds: int = Field(3, ge=1, le=10)
    warmup_bars: int = Field(200, ge=0)
    workers: int | None = None
    executor: str = "process"  # process | serial | ray
    ray_address: str | None = None  # an existing Ray cluster; None starts a local one
    llm_settings: LLMSettings = Field(default_factory=LLMSettings)
    offline: bool = False
    # What a pass must beat: "buy-and-hold" (the universe, equal weight), a symbol, or "cash".
    benchmark: str = "buy-and-hold"
    # Families the run tries (--families, or a directive naming the decision pipeline); empty:
    # every block family, the directive's first. decision_pipeline runs only when named here.
    families: list[str] = Field(default_factory=list)
    # The decision pipeline's on-disk cache; None: the user cache dir (swarm.analyze.replay).
    decision_cache_dir: Path | None = None
    # The research memory's folder, "off", or None for the user cache dir (swarm.memory).
    memory_dir: str | None = None
    # "raw": split-adjusted closes without dividends; "adjusted": total return from adj_close.
    prices: Literal["raw", "adjusted"] = "raw"
    # --repair: broken bars (non-positive, repeated, OHLC-violating) are mended and listed in
    # the manifest and report instead of refused (backtest.data.integrity).
    repair_data: bool = False
    # A RESEARCH round may add related symbols from --data-dir (swarm.research.rounds).
    allow_universe_expansion: bool = False
    # TUNE through the screen (backtest.screen.sweep): parameter sets screened per TUNE iteration
    # around the best catalogue spec, the best confirmed in Backtrader; 0 is --no-screen.
    screen_size: int = Field(SCREEN_SIZE, ge=0, le=20_000)
    # The DSR's trial count: "effective" (clusters of correlated trials, gate.effective) or
    # "raw" (every trial, as before the screen).
    deflate_by: Literal["effective", "raw"] = "effective"
    # The trial ledger across runs on the same data (experiments.dataset_ledger): its folder,
    # "off" (neither read nor recorded), or None for the user data dir. fresh_ledger: the
    # earlier runs are not counted (this run is still recorded).
    ledger_dir: str | None = None
    fresh_ledger: bool = False
    # --no-figures: no charts and no tear sheet (drawn after the verdict; ~30 s of a run). For
    # batch runs nobody reads one by one: the calibration's.
    figures: bool = True
    # --validation: "walk-forward" (the folds alone, as always) or "cpcv", which adds the
    # combinatorial purged CV of the search's choice (gate.cpcv) over N groups, k tested.
    validation: Literal["walk-forward", "cpcv"] = "walk-forward"
    cpcv_groups: int = Field(CPCV_GROUPS, ge=2)
    cpcv_test_groups: int = Field(CPCV_TEST_GROUPS, ge=1)
    # --sampler: how the screen draws its sets around a parent: "random" (a Latin hypercube,
    # strategies.mutate.neighbourhood) or "tpe" (Optuna's TPE on the in-sample Sharpe,
    # backtest.screen.tpe). Tuning without the screen moves on the grid either way.
    sampler: Literal["random", "tpe"] = "random"
    # --param-space FILE: the user's narrower grid per family and parameter, recorded in the
    # manifest so --resume uses it (strategies.param_space); empty: the code's grid.
    param_space: ParamSpace = Field(default_factory=ParamSpace)
