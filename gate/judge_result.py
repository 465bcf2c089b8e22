"""The judge's typed verdict (``gate.judge``): one ``FileVerdict`` per file judged, the run's
figures around them, and the exit code a caller would use."""

from __future__ import annotations

from datetime import date
from enum import StrEnum

from pydantic import BaseModel, Field

from backtest.contracts import Fold, Metrics
from backtest.lookahead import LookaheadReport
from backtest.splits import TimeSplit
from gate.alpha import AlphaStats
from gate.contracts import Veto

TRIALS_CAVEAT = (
    "the deflated Sharpe and deflated alpha are only as honest as the declared trial count: "
    "--trials {n} says {n} variant(s) were tried on this data in all; if you tried more "
    "(earlier versions, other parameters, discarded ideas), declare them"
)
# Vetoes that mean the figures cannot be believed or the code did not run: a failed status.
FAILING = frozenset(
    {
        Veto.LOOKAHEAD,
        Veto.LOOKAHEAD_UNCHECKED,
        Veto.INTEGRITY,
        Veto.ALL_FAILED,
        Veto.ERROR_RATE,
        Veto.NO_RESULTS,
    }
)


class JudgeStatus(StrEnum):
    OK = "ok"  # judged on believable figures (passed or not)
    FAILED = "failed"  # biased, integrity error, or the code did not run


EXIT = {JudgeStatus.OK: 0, JudgeStatus.FAILED: 1}
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class CriterionResult(BaseModel):
    """One bar of the gate (``experiments.scorecard.CriterionRow``)."""

    name: str
    value: float | None
    op: str
    threshold: float
    passed: bool
    margin: float | None  # signed toward passing
    attainment: float  # 1 = at the threshold (gate.criteria.attainment)


class FileVerdict(BaseModel):
    file: str
    variant_id: str
    class_name: str
    scope: str
    exported: bool
    status: JudgeStatus
    passed: bool  # every bar of the gate met, no veto
    vetoes: list[str] = Field(default_factory=list)
    veto_kinds: list[Veto] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    metrics: Metrics | None = None
    fold_sharpes: list[float | None] = Field(default_factory=list)
    score: float = 0.0
    dsr: float | None = None
    alpha: AlphaStats | None = None
    criteria: list[CriterionResult] = Field(default_factory=list)
    lookahead: LookaheadReport | None = None


class HoldoutOutcome(BaseModel):
    """The sealed holdout, opened once for ``variant_id``; reported, never fed back."""

    variant_id: str
    start: date
    end: date
    metrics: Metrics | None = None
    benchmark: Metrics | None = None
    alpha: AlphaStats | None = None
    errors: list[str] = Field(default_factory=list)


class JudgeResult(BaseModel):
    status: JudgeStatus
    exit_code: int
    run_dir: str
    tickers: list[str]
    start: date
    end: date
    split: TimeSplit
    folds: list[Fold]
    benchmark: str
    benchmark_description: str
    benchmark_in_sample: Metrics | None = None
    trials_declared: int
    trials_counted: int  # the N the deflation used: at least the number of files
    caveat: str
    spa_pvalue: float | None = None  # over the files, when several were given
    spa_trials: int = 0
    best: str | None = None
    files: list[FileVerdict]
    holdout: HoldoutOutcome | None = None
    alt_data: str | None = None
