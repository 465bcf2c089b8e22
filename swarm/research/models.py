"""Contracts of the research swarm. Plain pydantic: no LangChain imports here."""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from swarm.research.rounds import StudyRecord


class Domain(StrEnum):
    TECHNICAL = "technical"
    FUNDAMENTAL = "fundamental"
    SENTIMENT = "sentiment"


class Regime(StrEnum):
    TRENDING_UP = "trending-up"
    TRENDING_DOWN = "trending-down"
    RANGE_BOUND = "range-bound"
    HIGH_VOL_CHOP = "high-vol-chop"


class Finding(BaseModel):
    """One subagent's conclusion about one symbol.

    ``evidence`` holds the exact numbers the finding rests on, keyed the TA-Lib
    way (``RSI_14``, ``SMA_50``); each must equal the feature bundle's value at
    ``as_of``. An abstaining finding has signal 0, low confidence and a reason.
    """

    symbol: str
    type: Domain
    specialization: str  # e.g. "trend", "momentum", "news"
    indicator: str  # indicator/metric/source the finding is about
    value: float | None = None
    interpretation: str
    signal: float = Field(0.0, ge=-1, le=1)  # -1 bearish .. +1 bullish
    confidence: float = Field(0.0, ge=0, le=1)
    evidence: dict[str, float] = Field(default_factory=dict)
    as_of: str | None = None  # ISO date of the last bar used
    abstained: bool = False
    reason: str | None = None

    @field_validator("value")
    @classmethod
    def _missing_when_not_finite(cls, v: float | None) -> float | None:
        """NaN / inf is no reading: None (as the JSON the findings are written in says)."""
        return v if v is None or math.isfinite(v) else None


class FactSheet(BaseModel):
    domain: Domain
    key_insights: list[str]
    supporting_evidence: list[str] = Field(default_factory=list)
    conflicting_evidence: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    signal: float = Field(ge=-1, le=1)
    recommended_approach: str
    risks: list[str] = Field(default_factory=list)
    opportunities: list[str] = Field(default_factory=list)
    n_findings: int = 0
    n_abstained: int = 0
    # Share of findings with data (not abstained): what the domain could see, kept apart from
    # ``confidence``, which is about what it saw.
    coverage: float = Field(0.0, ge=0, le=1)
    # Subagents (specializations) of this domain that returned findings vs raised.
    subagents_ok: list[str] = Field(default_factory=list)
    subagents_failed: list[str] = Field(default_factory=list)
    # Strategy families this domain's view favours (momentum, mean_reversion, breakout,
    # trend, volatility), strongest first; empty when the domain has no view on it.
    recommended_families: list[str] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)  # what the domain could not see, and why


class SymbolBrief(BaseModel):
    """The data extractor's summary of one symbol's in-sample window."""

    symbol: str
    start: str
    end: str
    n_bars: int
    price_high: float
    price_low: float
    price_median: float
    price_p5: float
    price_p95: float
    total_return_pct: float
    annual_volatility_pct: float
    max_drawdown_pct: float
    regime: Regime
    regime_confidence: float = Field(ge=0, le=1)
    coverage_pct: float
    quality_issues: list[str] = Field(default_factory=list)
    sha256: str
    # Added by the data extractor: the numbers behind the regime label.
    yearly_return_pct: float | None = None  # total return if <= 1 year, else CAGR
    range_width_pct: float | None = None  # (p95 - p5) / median of closes, in %
    recent_bars: int | None = None  # last-252-bar sub-window (None if window too short)
    recent_return_pct: float | None = None
    recent_volatility_pct: float | None = None
    recent_max_drawdown_pct: float | None = None
    regime_reasoning: str = ""


class SuggestedParameters(BaseModel):
    """Starting parameters for the strategy developer. A study may add entry parameters
    by name (``bb_period``, ``roc_period``…) as extra fields: ``seed_parameters``
    (strategies.families) applies every key a spec has, so they reach only the entries
    that use them, unlike ``lookback``, which reaches every entry's lookback."""

    model_config = ConfigDict(extra="allow")

    family: str
    lookback: int
    bollinger_width: float
    stop_loss_pct: float
    take_profit_pct: float
    max_hold_bars: int
    reasoning: str


class DataBrief(BaseModel):
    symbols: list[SymbolBrief]
    regime: Regime  # the universe's dominant regime
    regime_confidence: float
    suggested: SuggestedParameters
    # This round's study (swarm.research.rounds) and every earlier round's, so the brief
    # says what was added and why.
    study: StudyRecord | None = None
    studies: list[StudyRecord] = Field(default_factory=list)
    universe_added: list[str] = Field(default_factory=list)  # symbols added by expansion


class SymbolRank(BaseModel):
    """A symbol's place by its fundamental and sentiment findings (confidence-weighted)."""

    symbol: str
    score: float = Field(ge=-1, le=1)
    n_views: int = 0  # non-abstained fundamental + sentiment findings behind the score
    basis: str = ""


class ResearchSynthesis(BaseModel):
    fact_sheets: list[FactSheet]
    # Confidence in the premise over the domains that have data; an abstaining domain lowers
    # ``coverage``, never this.
    confidence: float = Field(ge=0, le=1)
    # Share of domains with data (at least one finding not abstained), and of findings with
    # data over every domain's findings.
    coverage: float = Field(0.0, ge=0, le=1)
    finding_coverage: float = Field(0.0, ge=0, le=1)
    quality: str  # high / medium / low
    signal: float = Field(ge=-1, le=1)
    gaps: list[str] = Field(default_factory=list)
    regime: Regime
    recommended_families: list[str] = Field(default_factory=list)
    summary: str = ""
    degraded: bool = False
    # From memory (swarm.memory): what past runs taught about these symbols / this style.
    recalled: list[str] = Field(default_factory=list)  # ids of the records recalled
    memory_notes: list[str] = Field(default_factory=list)  # how memory changed the advice
    demoted_families: list[str] = Field(default_factory=list)  # failed before, none passed
    # From this run's gate (swarm.research.feedback), on RESEARCH rounds: how it reordered.
    run_feedback: list[str] = Field(default_factory=list)
    # What each research round studied (swarm.research.rounds), and how this round's
    # study changed the advice.
    studies: list[str] = Field(default_factory=list)
    study_effect: list[str] = Field(default_factory=list)
    portfolio_families: list[str] = Field(default_factory=list)  # favoured by the studies
    # Alt-data families a study supports (swarm.research.alt_studies), and every such
    # study's line: the strategy node gives each a slot when the run named no family.
    proposed_families: list[str] = Field(default_factory=list)
    alt_studies: list[str] = Field(default_factory=list)
    universe_added: list[str] = Field(default_factory=list)
    # How the fundamental and sentiment findings steered the families and the universe.
    steering: list[str] = Field(default_factory=list)
    universe_ranking: list[SymbolRank] = Field(default_factory=list)


class ResearchPlan(BaseModel):
    """What the strategy half reads from a research round: the families in order, the
    regime, the side of the signal and the starting parameters. Two rounds with equal plans
    changed nothing the strategy half can act on."""

    families: list[str]
    regime: Regime
    side: int  # -1, 0, +1
    suggested: dict[str, float | int | str | bool | None] = Field(default_factory=dict)
    proposed: list[str] = Field(default_factory=list)  # alt-data families a study supports


def plan_of(synthesis: ResearchSynthesis, brief: DataBrief | None) -> ResearchPlan:
    """The plan a synthesis and its data brief hand to strategy development."""
    suggested = brief.suggested.model_dump(mode="json") if brief is not None else {}
    suggested.pop("reasoning", None)
    side = (synthesis.signal > 0) - (synthesis.signal < 0)
    return ResearchPlan(
        families=list(synthesis.recommended_families),
        regime=synthesis.regime,
        side=side,
        suggested={k: v for k, v in suggested.items() if isinstance(v, float | int | str | bool)},
        proposed=list(synthesis.proposed_families),
    )
