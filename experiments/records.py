"""What a run folder holds, as models: the JSONL records, ``verdict.json``, ``variants.json``
and ``manifest.json``.

Writers build these models and readers (the check, the export, the notebook) parse through
them, so a field cannot drift between the node that writes it and the reader that needs it.
Every JSONL line goes through ``append_record``; the tracker below it only knows lines.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from backtest.contracts import Fold, JobStatus, Metrics
from backtest.data import BarDefect, QualityReport
from backtest.splits import TimeSplit
from experiments.tracker import ExperimentTracker
from gate.alpha import AlphaStats
from gate.contracts import GateDecision, Route, Veto
from gate.cpcv import CpcvResult
from strategies.route import Decided, Origin
from strategies.spec import StrategySpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not a new field


class Series(_Strict):
    """A return series as it is stored: ISO dates and values, same length."""

    dates: list[str] = Field(default_factory=list)
    values: list[float | None] = Field(default_factory=list)


# --- experiments.jsonl ---------------------------------------------------------------------


class _Record(_Strict):
    """Fields every line has: which run, which iteration, what built it, when."""

    run_id: str
    iteration: int
    route: Origin  # the step that built the variants this line is about
    variant_id: str | None = None
    symbols: list[str] = Field(default_factory=list)
    metrics: Metrics | None = None
    gate_score: float | None = None
    recorded_at: str
    record_id: str | None = None  # set by the tracker (content id: replays never duplicate)


class FoldRecord(_Strict):
    fold: int
    status: JobStatus
    error: str | None = None
    metrics: Metrics | None = None


class BacktestRecord(_Record):
    """One variant on one symbol, its folds inside, with the gate's view of the variant."""

    kind: Literal["backtest"] = "backtest"
    parent_id: str | None = None
    name: str
    family: str
    trial_key: str
    parameters: dict[str, float | int | bool] = Field(default_factory=dict)
    code_sha256: str
    symbol: str
    data_sha256: str
    folds: list[FoldRecord] = Field(default_factory=list)
    fold_sharpes: list[float | None] = Field(default_factory=list)
    status: Literal["ok", "partial", "error"]
    gate_alpha: AlphaStats | None = None
    gate_passed: bool = False
    gate_vetoes: list[str] = Field(default_factory=list)  # for people
    gate_veto_kinds: list[Veto] = Field(default_factory=list)  # for code
    gate_decision: Route


class GateRecord(_Record):
    """One per iteration: the decision, its best variant and the run's reality check."""

    kind: Literal["gate"] = "gate"
    gate_decision: Route
    benchmark: str
    alpha: AlphaStats | None = None
    spa_pvalue: float | None = None
    decision: GateDecision


class HoldoutRecord(_Record):
    """The winner on one symbol of the sealed holdout (opened once, never fed back)."""

    kind: Literal["holdout"] = "holdout"
    route: Literal[Route.SUCCESS] = Route.SUCCESS
    symbol: str
    status: JobStatus
    error: str | None = None
    data_sha256: str
    code_sha256: str
    parent_id: str | None = None


class VariantRejectedRecord(_Record):
    """A proposal whose code failed static validation: built, never run."""

    kind: Literal["variant_rejected"] = "variant_rejected"
    parent_id: str | None = None
    code_sha256: str
    errors: list[str] = Field(default_factory=list)
    status: Literal["rejected"] = "rejected"


class ScreenedTrial(_Strict):
    """One parameter set of a screened batch: a trial the ledger counts."""

    trial_key: str
    parameters: dict[str, float | int | bool] = Field(default_factory=dict)
    sharpe: float | None = None  # in-sample, annualised: the equal-weight portfolio's
    n_trades: int = 0
    error: str | None = None


class ScreenRecord(_Record):
    """One TUNE sweep through the screen: every set it screened around the parent (each one a
    trial), the ones sent to Backtrader, and where its return series are kept."""

    kind: Literal["screen"] = "screen"
    parent_id: str
    # "portfolio": a portfolio-scope parent screened on the universe, one window per fold
    # (``backtest.screen.portfolio``); n_symbols is then the universe's size.
    scope: Literal["symbol", "portfolio"] = "symbol"
    # The portfolio label for a portfolio sweep: with ``iteration`` it makes the record's id
    # (``experiments.tracker.ID_FIELDS``), apart from a single-symbol sweep of the iteration.
    symbol: str | None = None
    n_sets: int
    n_symbols: int
    n_folds: int
    min_trades: int = 0  # sets under the trade floor rank after every set above it
    series_file: str  # run-folder path of the sets' in-sample return series (npz)
    confirmed: list[str] = Field(default_factory=list)  # trial keys sent to Backtrader
    trials: list[ScreenedTrial] = Field(default_factory=list)  # best first


class LlmEventRecord(_Record):
    """An LLM answer that was rejected or fell back to the rules brain."""

    model_config = ConfigDict(extra="allow")  # the event's own details (role-specific)
    kind: Literal["llm_fallback", "llm_rejected"]
    role: str | None = None
    reasons: list[Any] = Field(default_factory=list)
    research_round: int | None = None  # set for the research half's events


class LlmUsageRecord(_Record):
    kind: Literal["llm_usage"] = "llm_usage"
    llm: dict[str, Any]
    llm_replay: dict[str, Any] = Field(default_factory=dict)


ExperimentRecord = Annotated[
    BacktestRecord
    | GateRecord
    | HoldoutRecord
    | VariantRejectedRecord
    | ScreenRecord
    | LlmEventRecord
    | LlmUsageRecord,
    Field(discriminator="kind"),
]
RECORD = TypeAdapter(ExperimentRecord)


def append_record(tracker: ExperimentTracker, record: BaseModel | dict[str, Any]) -> bool:
    """The one writer of ``experiments.jsonl`` lines: validated against the union, so a
    line that ``python -m experiments.check`` would refuse is never written. Returns False
    when the record was already there (a replayed step)."""
    line = RECORD.validate_python(record)
    return tracker.append(line.model_dump(mode="json"))


# --- verdict.json -------------------------------------------------------------------------


class HoldoutResult(_Strict):
    """The winner on the sealed holdout, as the holdout node leaves it for the verdict."""

    variant_id: str
    start: date
    end: date
    metrics: Metrics | None = None
    buy_and_hold: Metrics | None = None  # the run's benchmark on the same window
    alpha: AlphaStats
    per_symbol: dict[str, Metrics | str | None] = Field(default_factory=dict)  # error text
    returns: Series = Field(default_factory=Series)
    buy_and_hold_returns: Series = Field(default_factory=Series)


class Figures(_Strict):
    """One window's figures of a variant beside the benchmark's."""

    metrics: Metrics | None = None
    buy_and_hold: Metrics | None = None
    alpha: AlphaStats | None = None
    reproduce: dict[str, Any] | None = None  # holdout only: enough to re-run it elsewhere


class BenchmarkInfo(_Strict):
    name: str
    description: str
    in_sample: Metrics | None = None
    holdout: Metrics | None = None


class AlphaSummary(_Strict):
    benchmark: str
    alpha_annual_pct: float | None = None
    beta: float | None = None
    t_stat: float | None = None
    appraisal_ratio: float | None = None
    information_ratio: float | None = None
    excess_sharpe: float | None = None
    deflated_alpha: float | None = None
    n_obs: int = 0
    hac_lags: int = 0


class TrialSharpes(_Strict):
    threshold: float | None = None
    best: float | None = None
    n_trials: int = 0
    n_with_sharpe: int = 0
    unit: str = "annualised"


class Verdict(_Strict):
    verdict: Literal["SUCCESS", "ABANDON"]
    reason: str
    iterations: int
    best_variant: str | None = None
    outside_directive: bool = False  # the winner's family is not one the directive named
    n_backtests: int = 0
    n_trials: int = 0
    # Clusters of correlated trials (gate.effective); None in runs from before it was measured.
    n_trials_effective: int | None = None
    deflated_by: Literal["effective", "raw"] = "raw"  # which count the DSR used
    best_dsr: float | None = None
    best_score: float | None = None
    best_dsr_all_trials: float | None = None
    best_deflated_alpha_all_trials: float | None = None
    pbo: float | None = None
    pbo_variants: int = 0
    score_threshold: float
    dsr_threshold: float
    route_history: list[Decided] = Field(default_factory=list)
    figures: dict[str, Figures] = Field(default_factory=dict)
    buy_and_hold_in_sample: Metrics | None = None  # the run's benchmark (kept for old readers)
    benchmark: BenchmarkInfo | None = None  # None in runs from before the benchmark gate
    best_alpha: AlphaSummary | None = None
    holdout_alpha: AlphaStats | None = None
    spa_pvalue: float | None = None  # adjusted for the looks (``gate.alpha.spa_over_looks``)
    spa_trials: int = 0
    spa_raw_pvalue: float | None = None  # the last look's test alone
    spa_looks: int = 1  # how many times the run looked (one per gate)
    deflated_alpha_threshold: float = 0.95  # the defaults of runs that did not record them
    spa_threshold: float = 0.05
    trial_sharpes: TrialSharpes = Field(default_factory=TrialSharpes)
    # The trial ledger across runs on the same data (experiments.dataset_ledger): "counted"
    # (the earlier runs' trials count in the deflation), "fresh" (--fresh-ledger: not
    # counted), "off" (--ledger-dir off); None in runs from before it.
    ledger: Literal["counted", "fresh", "off"] | None = None
    earlier_runs: int = 0
    n_trials_cumulative: int | None = None  # this run's and the earlier runs' trials (raw)
    n_trials_effective_cumulative: int | None = None
    # LLM runs (issue 29): masked or not, the cutoff used, the leak audit's counts, the
    # banner of an unmasked run on data the model may remember. None with the rules brains.
    llm_masking: dict[str, Any] | None = None
    # --validation cpcv: the paths' Sharpe distribution of the search's choice (gate.cpcv);
    # None, and absent from the file, when the run validated by walk-forward alone.
    cpcv: CpcvResult | None = None

    @model_serializer(mode="wrap")
    def _without_unasked(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A walk-forward run's verdict.json stays as it was: no ``cpcv`` key."""
        data = handler(self)
        if data.get("cpcv") is None:
            data.pop("cpcv", None)
        return data


# --- variants.json ------------------------------------------------------------------------


class InSample(_Strict):
    """A variant's own in-sample figures, so any variant exports with its numbers."""

    iteration: int
    metrics: Metrics | None = None
    fold_sharpes: list[float | None] = Field(default_factory=list)
    score: float | None = None
    dsr: float | None = None
    alpha: AlphaStats | None = None
    passed: bool | None = None
    vetoes: list[str] = Field(default_factory=list)


class VariantEntry(_Strict):
    variant_id: str
    parent_id: str | None = None
    iteration: int
    route: Origin
    spec: StrategySpec
    code: str | None = None  # variants.json carries it; the graph state keeps only the file
    code_sha256: str
    code_file: str | None = None
    class_name: str | None = None
    in_sample: InSample | None = None


VARIANTS = TypeAdapter(dict[str, VariantEntry])


# --- manifest.json ------------------------------------------------------------------------


class GitState(_Strict):
    sha: str | None = None
    dirty: bool | None = None


class SourceDigest(_Strict):
    """The lab's Python sources that made the run (``experiments.runfolder.source_digest``)."""

    sha256: str
    files: int


class Manifest(BaseModel):
    """Config, versions, data hashes: what reproduces the run (later keys are allowed)."""

    run_id: str
    created_at: str
    argv: list[str]
    seed: int
    config: dict[str, Any]
    data: dict[str, Any]
    git: GitState
    source: SourceDigest | None = None  # None: a run from before it was recorded
    python: str
    platform: str
    packages: dict[str, str]


class SymbolData(BaseModel):
    """One symbol's data as the manifest records it (``LoadedBars.summary``)."""

    source: str
    sha256: str
    path: str | None = None
    n_bars: int = 0
    quality: QualityReport | None = None
    repairs: list[BarDefect] = Field(default_factory=list)  # what --repair changed


class DataSummary(BaseModel):
    """The manifest's ``data``: the split, the folds and each symbol's source and sha256, as
    ``swarm.run_prepare.load_data`` summarises them (the report's set-up and caveats)."""

    split: TimeSplit
    folds: list[Fold] = Field(default_factory=list)
    holdout_fold: Fold | None = None
    periods_per_year: int | None = None
    symbols: dict[str, SymbolData] = Field(default_factory=dict)
    benchmark: dict[str, Any] = Field(default_factory=dict)  # the benchmark's own summary
    indices: dict[str, SymbolData] = Field(default_factory=dict)  # a regime filter's series
