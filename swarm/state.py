"""The develop graph's state: small, JSON-serialisable values with explicit reducers.

Heavy, non-serialisable things (bars, the executor, the run folder) live in the
run context, never here, so the state can be checkpointed cheaply: the SQLite
checkpointer (``swarm.run``) writes the whole state after every super-step. Bulky
values live in the run folder and the state holds a reference: a variant's source is
``strategies/<variant_id>.py`` (``all_variants`` keeps spec, lineage and sha256), and a
backtest's per-period return series are ``backtests/<variant_id>/<symbol>-f<fold>.json``
(``results`` keeps status and metrics).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

RESET: dict[str, bool] = {"__reset__": True}


def extend_or_reset(current: list | None, update: list | dict | None) -> list:
    """Fan-in reducer: parallel tasks append; a node returns RESET to start a new round."""
    if update == RESET:
        return []
    return list(current or []) + list(update or [])


class DevelopState(TypedDict, total=False):
    symbols: list[str]
    n_folds: int
    iteration: int  # the strategy iteration being built or evaluated (1-based)
    research_round: int  # 1 for the first research pass, +1 per RESEARCH route
    counters: dict[str, int]  # gate.contracts.LoopCounters
    route: str  # the route that produced the current variants: INITIAL, TUNE, FIX, REFINE, RESEARCH
    feedback: list[str]  # what the gate told research / strategy development

    data_brief: dict[str, Any]
    findings: Annotated[list[dict[str, Any]], extend_or_reset]
    failed_subagents: Annotated[list[str], extend_or_reset]
    fact_sheets: Annotated[list[dict[str, Any]], extend_or_reset]
    llm_events: Annotated[list[dict[str, Any]], extend_or_reset]  # subagents' LLM fallbacks
    synthesis: dict[str, Any]

    variants: list[dict[str, Any]]  # this iteration's runnable StrategyVariants (with code)
    # Every variant ever built, by id (lineage, export): StrategyVariant without its code,
    # plus "code_file" and "class_name".
    all_variants: dict[str, dict[str, Any]]
    # This iteration's BacktestResults without return series, plus "result_file" (see above).
    results: Annotated[list[dict[str, Any]], extend_or_reset]

    ledger: dict[str, Any]  # gate.ledger.TrialLedger
    evaluations: list[dict[str, Any]]  # this iteration's VariantEvaluations
    failure: dict[str, Any] | None
    trajectory: dict[str, Any] | None
    history: list[dict[str, Any]]  # IterationSummary per finished iteration
    decisions: Annotated[list[dict[str, Any]], operator.add]  # GateDecision per iteration
    best: dict[str, Any] | None  # best VariantEvaluation so far (any iteration)
    n_backtests: int
    lookahead: dict[str, Any]  # LookaheadReport per variant checked before it could pass
    pbo: float | None  # probability of backtest overfitting (CSCV) over every variant so far
    pbo_variants: int  # how many variants that PBO ranks (0 while it is not computed)
    spa: dict[str, Any] | None  # Hansen's SPA over every trial so far: pvalue, trials, benchmark

    holdout: dict[str, Any] | None
    verdict: dict[str, Any]
