"""Typed contracts of the quality gate: criteria in, evaluations and a decision out."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, Field

from backtest.contracts import Metrics
from gate.alpha import AlphaStats

# The loop's one Route enum lives a floor below (a variant records the route that built it).
from strategies.route import Decided
from strategies.route import Route as Route


class FailureType(StrEnum):
    PARAMETER_ISSUE = "PARAMETER_ISSUE"
    ALGORITHM_BUG = "ALGORITHM_BUG"
    DESIGN_FLAW = "DESIGN_FLAW"
    RESEARCH_GAP = "RESEARCH_GAP"
    FUNDAMENTAL_IMPOSSIBILITY = "FUNDAMENTAL_IMPOSSIBILITY"


class TrajectoryStatus(StrEnum):
    CONVERGING = "CONVERGING"
    DIVERGING = "DIVERGING"
    OSCILLATING = "OSCILLATING"
    STAGNANT = "STAGNANT"


class Veto(StrEnum):
    """Why a variant is out whatever its metrics say (the sentence in ``vetoes`` is for people)."""

    NO_RESULTS = "no_results"
    ALL_FAILED = "all_failed"
    ERROR_RATE = "error_rate"
    INTEGRITY = "integrity"  # a job's fill log failed the trusted books: nothing it says counts
    BANKRUPT = "bankrupt"  # a job's equity reached zero (backtest.margin): its run ended there
    LOOKAHEAD = "lookahead"  # measured: orders or indicators change when the future is cut
    LOOKAHEAD_UNCHECKED = "lookahead_unchecked"  # the check could not run: not evidence of bias
    NO_RETURNS = "no_returns"
    TOO_FEW_TRADES = "too_few_trades"
    SHARPE_UNDEFINED = "sharpe_undefined"


# Where the graded measure (gate.progress) puts vetoed variants; here, beside Veto, because a
# late veto (VariantEvaluation.veto) demotes the variant's progress itself.
CLEAN_FLOOR = 0.1  # an un-vetoed variant that attains nothing
VETO_CEILING = CLEAN_FLOOR / 2  # a vetoed variant that attains everything
# Vetoes the measure grades itself (the min-trades floor is one of its criteria; an undefined
# Sharpe attains 0): they do not demote. Every other veto (integrity, bankrupt, lookahead,
# failed jobs) means the figures cannot be trusted, so the variant ranks below every clean one.
GRADED_VETOES = frozenset({Veto.TOO_FEW_TRADES, Veto.SHARPE_UNDEFINED})


def demoted(kinds: Iterable[Veto]) -> bool:
    """Whether these vetoes put a variant below every clean one (see ``GRADED_VETOES``)."""
    return any(k not in GRADED_VETOES for k in kinds)


def demote(value: float) -> float:
    """A clean variant's progress once a veto found later (the lookahead check) puts it out;
    the same place ``gate.progress.progress(..., vetoed=True)`` would give. Idempotent below
    the floor."""
    if value < CLEAN_FLOOR:
        return value
    raw = (value - CLEAN_FLOOR) / (1.0 - CLEAN_FLOOR)
    return VETO_CEILING * raw


class Hint(StrEnum):
    """A failure signal for code (mutation moves, research revisions, routing); the
    sentence saying why stays in ``FailureAnalysis.evidence``."""

    ZERO_TRADES = "zero_trades"
    LOOKAHEAD = "lookahead"
    EXCEPTIONS = "exceptions"
    TOO_FEW_TRADES = "too_few_trades"
    DEEP_DRAWDOWN = "deep_drawdown"
    FOLD_COLLAPSE = "fold_collapse"
    COST_DRAG = "cost_drag"
    REGIME_MISMATCH = "regime_mismatch"
    NO_EDGE = "no_edge"
    MARKET_EXPOSURE = "market_exposure"
    NEAR_THRESHOLD = "near_threshold"
    LOW_DSR = "low_dsr"
    LOW_ALPHA = "low_alpha"
    REALITY_CHECK = "reality_check"
    LOW_RESEARCH_CONFIDENCE = "low_research_confidence"
    FAR_FROM_THRESHOLDS = "far_from_thresholds"
    # Repair categories of a failing criterion (``gate.failure.criterion_category``): a
    # drawdown over the limit however deep, and a win rate or profit factor that wants exits.
    DRAWDOWN = "drawdown"
    WEAK_EXITS = "weak_exits"


class Criterion(BaseModel):
    metric: str  # a Metrics field name, e.g. "sharpe", "max_drawdown_pct"
    op: str  # ">=" or "<="
    threshold: float


class Criteria(BaseModel):
    rules: list[Criterion]
    min_trades: int = 30
    score_threshold: float = 0.6  # fuzzy quality needed to pass
    dsr_threshold: float = 0.95  # deflated Sharpe needed to pass
    deflated_alpha_threshold: float = 0.95  # deflated alpha over the benchmark needed to pass
    spa_threshold: float = 0.05  # Hansen's SPA p-value over every trial must be at most this


class VariantEvaluation(BaseModel):
    """A variant's aggregate (all symbols, all folds) in-sample verdict."""

    variant_id: str
    family: str
    trial_key: str
    metrics: Metrics | None
    fold_sharpes: list[float | None] = Field(default_factory=list)
    n_jobs: int = 0
    n_errors: int = 0
    errors: list[str] = Field(default_factory=list)
    vetoes: list[str] = Field(default_factory=list)  # sentences, in the order found
    veto_kinds: list[Veto] = Field(default_factory=list)  # what code reads

    def veto(self, kind: Veto, why: str) -> None:
        """Put the variant out: the kind for code, the sentence for the report."""
        self.veto_kinds.append(kind)
        self.vetoes.append(why)
        self.passed = False
        self.score = 0.0
        if demoted([kind]):
            self.progress = demote(self.progress)

    criteria_met: dict[str, bool] = Field(default_factory=dict)
    score: float = 0.0  # the fuzzy score: it decides passes
    # The graded measure (gate.progress): it ranks variants and measures the search's progress.
    progress: float = 0.0
    dsr: float | None = None
    alpha: AlphaStats | None = None  # against the run's benchmark, in-sample
    spa_pvalue: float | None = None  # the run's reality check when this was evaluated
    passed: bool = False


class FailingCriterion(BaseModel):
    """A criterion the analysed best fails, how far off it is, and what repairs it."""

    label: str  # ``gate.criteria.rule_label``, e.g. "max_drawdown_pct<=20"
    metric: str
    op: str
    threshold: float
    value: float | None  # the best's figure (None: undefined)
    attainment: float  # ``gate.criteria.attainment``: 1 = at the threshold, 0 = nowhere
    category: Hint | None = None  # the repair category (None: no targeted repair)


class FailureAnalysis(BaseModel):
    failure_type: FailureType
    root_cause: str
    confidence: float = Field(ge=0, le=1)
    evidence: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)  # for people
    hints: list[Hint] = Field(default_factory=list)  # for code, in the order found
    # The analysed best (the iteration's) and the criteria it fails, worst first; empty in
    # records written before they were kept.
    best_variant_id: str | None = None
    failing: list[FailingCriterion] = Field(default_factory=list)


class TrajectoryAnalysis(BaseModel):
    status: TrajectoryStatus
    n_iterations: int = 0  # iterations of the current line analysed (0: not recorded)
    improvement_rate: dict[str, float] = Field(default_factory=dict)  # per metric, per iteration
    variance: dict[str, float] = Field(default_factory=dict)
    direction: dict[str, str] = Field(default_factory=dict)  # improving / worsening / flat
    iterations_to_convergence: float | None = None
    parameter_impact: dict[str, float] = Field(default_factory=dict)
    reasoning: str = ""


class LoopCounters(BaseModel):
    """Where the loop stands; routing limits are checked against these."""

    iteration: int = 1  # the iteration just evaluated (1-based)
    strategy_iterations: int = 1  # strategy iterations since the last research pass
    research_loops: int = 0  # times the loop went back to research


class Limits(BaseModel):
    max_iterations: int = Field(10, ge=1)
    max_strategy_iterations: int = Field(3, ge=1)  # TUNE/FIX/REFINE before research
    max_research_loops: int = Field(2, ge=0)


class GateDecision(BaseModel):
    iteration: int
    decision: Decided
    best_variant_id: str | None
    evaluations: list[VariantEvaluation]
    failure: FailureAnalysis | None = None
    trajectory: TrajectoryAnalysis | None = None
    reasoning: str
    actions: list[str] = Field(default_factory=list)
    n_trials: int = 0
    spa_pvalue: float | None = None  # Hansen's SPA over every trial so far vs the benchmark
    spa_trials: int = 0


class IterationSummary(BaseModel):
    """One iteration as trajectory analysis and the charts see it."""

    iteration: int
    route: Decided  # the route this iteration's gate decided
    best_variant_id: str | None
    family: str | None = None
    best_score: float
    best_progress: float = 0.0  # 0 in records from before the graded measure
    best_metrics: dict[str, float | None] = Field(default_factory=dict)
    # The best's figures over the benchmark, keyed as the criteria name them (alpha_t, beta,
    # deflated_alpha, spa_p...): for charts and people; the trajectory reads best_metrics.
    best_alpha: dict[str, float | None] = Field(default_factory=dict)
    best_parameters: dict[str, float | int | bool] = Field(default_factory=dict)
    n_passed: int = 0
