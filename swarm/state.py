"""The develop graph's state: typed values with explicit reducers.

The gate's contracts live in the state as pydantic models (LangGraph's checkpoint
serializer stores and restores them), so nodes read attributes instead of re-validating
dicts. Heavy, non-serialisable things (bars, the executor, the run folder) live in the
run context, never here, so the state can be checkpointed cheaply: the SQLite
checkpointer (``swarm.run``) writes the whole state after every super-step. Bulky values
live in the run folder and the state holds a reference: a variant's source is
``strategies/<variant_id>.py`` (``all_variants`` keeps spec, lineage and sha256), and a
backtest's per-period return series are ``backtests/<variant_id>/<symbol>-f<fold>.json``
(``results`` keeps status and metrics).

Still dicts: the subagents' LLM events (``llm_events``), open records for the experiment log.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel

from backtest.contracts import BacktestResult, JobStatus
from backtest.lookahead import LookaheadReport
from experiments.records import HoldoutResult, Series, Verdict
from gate.contracts import (
    FailureAnalysis,
    FailureType,
    GateDecision,
    Hint,
    IterationSummary,
    LoopCounters,
    Route,
    TrajectoryAnalysis,
    TrajectoryStatus,
    VariantEvaluation,
    Veto,
)
from gate.cpcv import CpcvResult
from gate.ledger import TrialLedger
from strategies.route import Origin
from strategies.spec import (
    Family,
    PipelineFamily,
    PluginFamily,
    PortfolioFamily,
    StrategySpec,
    StrategyVariant,
)
from swarm.research.models import (
    DataBrief,
    Domain,
    FactSheet,
    Finding,
    Regime,
    ResearchPlan,
    ResearchSynthesis,
)
from swarm.research.rounds import StudyKind, StudyRecord

RESET: dict[str, bool] = {"__reset__": True}


def extend_or_reset(current: list | None, update: list | dict | None) -> list:
    """Fan-in reducer: parallel tasks append; a node returns RESET to start a new round."""
    if update == RESET:
        return []
    return list(current or []) + list(update or [])


class Evaluation(VariantEvaluation):
    """A VariantEvaluation as the state holds it."""


class BestSoFar(VariantEvaluation):
    """The best evaluation so far (any iteration) and its equal-weight portfolio returns,
    for the equity chart and the report."""

    portfolio: Series | None = None


class StoredResult(BacktestResult):
    """A BacktestResult without its return series (they are in ``result_file``)."""

    result_file: str | None = None


class StoredVariant(BaseModel):
    """A StrategyVariant without its source (it is in ``code_file``), and the class name
    static validation found in it: what ``all_variants`` keeps of every variant built."""

    variant_id: str
    parent_id: str | None = None
    iteration: int
    route: Origin
    spec: StrategySpec
    code_sha256: str
    code_file: str
    class_name: str | None = None


class BacktestTask(BaseModel):
    """The Send payload of one backtest: the code is read back from the run folder."""

    iteration: int
    variant_id: str
    code_sha256: str
    symbol: str
    fold: int


class SubagentTask(BaseModel):
    """The Send payload of one research specialist."""

    subagent_id: str
    research_round: int
    iteration: int = 0


class SpaResult(BaseModel):
    """Hansen's SPA over every trial so far, against the run's benchmark."""

    pvalue: float | None = None  # adjusted for the run's looks: what a pass compares
    trials: int = 0
    benchmark: str = ""
    raw_pvalue: float | None = None  # this look's test alone
    look: int = 1  # the gate's iteration: ``gate.alpha.spa_look_factor``


class DevelopState(TypedDict, total=False):
    symbols: list[str]
    n_folds: int
    iteration: int  # the strategy iteration being built or evaluated (1-based)
    research_round: int  # 1 for the first research pass, +1 per RESEARCH route
    counters: LoopCounters
    route: Route  # what built the current variants; after the router, its route
    feedback: list[str]  # what the gate told research / strategy development

    data_brief: DataBrief
    findings: Annotated[list[Finding], extend_or_reset]
    failed_subagents: Annotated[list[str], extend_or_reset]
    fact_sheets: Annotated[list[FactSheet], extend_or_reset]
    llm_events: Annotated[list[dict[str, Any]], extend_or_reset]  # subagents' LLM fallbacks
    synthesis: ResearchSynthesis
    research_studies: list[StudyRecord]  # one per research round: what it studied, or skipped
    research_plan: ResearchPlan  # what the last round handed the strategy half
    research_changed: bool  # the last round changed that plan (the first round always does)

    variants: list[StrategyVariant]  # this iteration's runnable variants (with code)
    all_variants: dict[str, StoredVariant]  # every variant ever built, by id (lineage, export)
    results: Annotated[list[StoredResult], extend_or_reset]  # this iteration's backtests

    ledger: TrialLedger
    evaluations: list[Evaluation]  # this iteration's
    failure: FailureAnalysis | None
    trajectory: TrajectoryAnalysis | None
    history: list[IterationSummary]  # one per finished iteration
    decisions: Annotated[list[GateDecision], operator.add]  # one per iteration
    best: BestSoFar | None  # best evaluation so far (any iteration)
    n_backtests: int
    lookahead: dict[str, LookaheadReport]  # per variant checked before it could pass
    pbo: float | None  # probability of backtest overfitting (CSCV) over every variant so far
    pbo_variants: int  # how many variants that PBO ranks (0 while it is not computed)
    cpcv: CpcvResult | None  # --validation cpcv: CPCV of the search's choice over every variant
    spa: SpaResult | None

    holdout: HoldoutResult | None
    verdict: Verdict


# The shape of the checkpointed state. A checkpoint holds the types of the code that wrote it,
# so a run checkpointed under another schema cannot continue under this code: bump this when
# a field changes type (1: manifests without it; 2: variants, all_variants, lookahead and the
# research fields typed; 3: one Route enum, the Origin enum gone).
STATE_SCHEMA = 3

# What the checkpoint may restore besides plain JSON: the state's own types, nothing else.
CHECKPOINT_TYPES: tuple[type, ...] = (
    Evaluation,
    BestSoFar,
    StoredResult,
    BacktestTask,
    SubagentTask,
    SpaResult,
    CpcvResult,
    LoopCounters,
    TrialLedger,
    FailureAnalysis,
    TrajectoryAnalysis,
    IterationSummary,
    GateDecision,
    HoldoutResult,
    Verdict,
    Series,
    Route,
    Hint,
    Veto,
    StudyRecord,
    StudyKind,
    DataBrief,
    Finding,
    FactSheet,
    ResearchSynthesis,
    ResearchPlan,
    Domain,
    Regime,
    StrategyVariant,
    StoredVariant,
    LookaheadReport,
    Family,
    PipelineFamily,
    PortfolioFamily,
    PluginFamily,
    JobStatus,
    FailureType,
    TrajectoryStatus,
)


def checkpoint_allowlist() -> list[tuple[str, str]]:
    """``(module, name)`` pairs for LangGraph's msgpack allowlist."""
    return [(t.__module__, t.__qualname__) for t in CHECKPOINT_TYPES if isinstance(t, type)]
