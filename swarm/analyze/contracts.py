"""Contracts of the decision pipeline: what each role hands the next, and ``decision.json``.

Plain pydantic, no LangChain. Machine signals are enums; the sentences beside them are
for the person reading the report.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class AnalystRole(StrEnum):
    MARKET = "market"
    SENTIMENT = "sentiment"
    NEWS = "news"
    FUNDAMENTALS = "fundamentals"


class TimeHorizon(StrEnum):
    DAYS = "days"  # a read of the last few bars
    WEEKS = "weeks"  # a swing: the trader's horizon
    MONTHS = "months"  # a position: trend and fundamentals


class Side(StrEnum):
    BULL = "bull"
    BEAR = "bear"
    NONE = "none"  # the manager found the cases balanced: no side won


class Direction(StrEnum):
    LONG = "long"
    SHORT = "short"
    FLAT = "flat"


class Action(StrEnum):
    BUY = "BUY"
    HOLD = "HOLD"
    SELL = "SELL"


class Status(StrEnum):
    OK = "OK"
    DEGRADED = "DEGRADED"  # too few analyst notes: no trade
    REJECTED = "REJECTED"  # the risk engine failed a check: no trade


class RiskStance(StrEnum):
    RISKY = "risky"
    SAFE = "safe"
    NEUTRAL = "neutral"


class CheckName(StrEnum):
    DEGENERATE_THESIS = "degenerate_thesis"
    SIZE_NONZERO = "size_nonzero"
    DAILY_LOSS_CAP = "daily_loss_cap"
    MARGIN_SUFFICIENT = "margin_sufficient"
    MAX_NOTIONAL_PCT = "max_notional_pct"
    MAX_POSITIONS = "max_positions"
    EXPOSURE_CAP = "exposure_cap"


class Outcome(StrEnum):
    WIN = "win"  # a trade: the target first
    LOSS = "loss"  # a trade: the stop first
    SCRATCH = "scratch"  # a trade: neither by the horizon
    STOOD_ASIDE = "stood_aside"  # a HOLD: no trade, so no win, loss or R


class OutcomeTag(StrEnum):
    """Seed 002's five signal-evolution states: how the thesis fared against the prices."""

    REALIZED = "Realized"  # it played out (target first; a hold the move stayed small for)
    STRENGTHENED = "Strengthened"  # on its way, slower than the horizon (or a hold vindicated)
    WEAKENED = "Weakened"  # drifting against it, neither level reached
    FALSIFIED = "Falsified"  # the prices said no (stop first; a hold that missed the move)
    UNKNOWN = "Unknown"  # nothing to measure it by (no ATR, no thesis)


# A trade outcome's usual state; the reviewer decides each one (a scratch on the thesis's side
# of the entry is Strengthened, a HOLD is judged as a stand-aside: ``review.classify``).
OUTCOME_TAG = {
    Outcome.WIN: OutcomeTag.REALIZED,
    Outcome.LOSS: OutcomeTag.FALSIFIED,
    Outcome.SCRATCH: OutcomeTag.WEAKENED,
}

RULES = "rules"
ABSTAIN_MODEL = "deterministic-abstain"
ABSTAIN_CONFIDENCE = 0.15  # seed 002: an abstention is sure only that it cannot tell


# --------------------------------------------------------------------------- configuration


class RiskLimits(BaseModel):
    """The risk engine's limits, checked against ``AnalysisConfig.portfolio``: the CLI's
    ``--book``, or the family replay's own book (``swarm.analyze.book``)."""

    model_config = ConfigDict(frozen=True)

    max_daily_loss_pct: float = Field(2.0, gt=0, description="loss at the stop, % of capital")
    max_notional_pct: float = Field(50.0, gt=0, description="one position's notional, % of capital")
    max_positions: int = Field(10, ge=1)
    max_exposure_pct: float = Field(100.0, gt=0, description="gross exposure after the trade, %")
    short_margin: float = Field(1.5, ge=1.0, description="cash needed per unit of short notional")


class Portfolio(BaseModel):
    """What the account holds when the decision is made: empty unless a book is given."""

    model_config = ConfigDict(frozen=True)

    open_positions: int = Field(0, ge=0)
    gross_exposure: float = Field(0.0, ge=0, description="notional already held, in currency")
    cash: float | None = Field(None, description="cash available; None = the capital")
    loss_today: float = Field(0.0, ge=0, description="realised loss so far today, in currency")


class AnalysisConfig(BaseModel):
    """Everything a decision depends on besides the bars and the brain: part of its cache key."""

    model_config = ConfigDict(frozen=True)

    debate_rounds: int = Field(2, ge=1, le=5, description="1 is an opening only; 2+ rebut")
    risk_rounds: int = Field(1, ge=1, le=5)
    capital: float = Field(100_000.0, gt=0)
    risk_pct: float = Field(1.0, gt=0, le=10)
    atr_period: int = 14
    stop_atr: float = Field(2.0, gt=0, description="stop distance in ATRs")
    reward_risk: float = Field(2.0, gt=0, description="target distance in multiples of the risk")
    max_stop_atr: float = Field(4.0, gt=0, description="the validator's bound on the stop")
    horizon_days: int = Field(10, ge=1, description="bars the thesis has to play out")
    conviction_floor: float = Field(0.2, ge=0, le=1, description="below it the judge holds")
    deep_conviction: float = Field(0.75, ge=0, le=1, description="from it the trader goes deep")
    news_window_days: int = 30
    sentiment_window_days: int = 90
    limits: RiskLimits = RiskLimits()
    portfolio: Portfolio = Portfolio()


# --------------------------------------------------------------------------- the roles


class Point(BaseModel):
    """One piece of an analyst's evidence with its lean: what the debaters argue from."""

    name: str
    stance: float = Field(ge=-1, le=1)
    confidence: float = Field(ge=0, le=1)
    text: str
    cited: dict[str, float] = Field(default_factory=dict)


class AnalystNote(BaseModel):
    role: AnalystRole
    ticker: str
    as_of: str
    stance: float = Field(0.0, ge=-1, le=1, description="-1 bearish .. +1 bullish")
    confidence: float = Field(0.0, ge=0, le=1)
    summary: str
    key_points: list[str] = Field(default_factory=list)
    subscores: dict[str, float] = Field(default_factory=dict)
    evidence: dict[str, float] = Field(default_factory=dict, description="every number cited")
    points: list[Point] = Field(default_factory=list)
    time_horizon: TimeHorizon = TimeHorizon.WEEKS
    expectation_gap: float | None = Field(
        None,
        description="what came in vs what was expected, as a signed fraction of the expectation "
        "(the last EPS surprise vs consensus; the close vs the drift band's mid forecast for "
        "today); None when no expectation exists",
    )
    abstained: bool = False
    reason: str | None = None
    model_used: str = RULES


class Quorum(BaseModel):
    required: int
    expected: int
    notes: int  # analysts that answered (an abstention answers)
    abstained: int
    sided: int = Field(0, description="analysts that took a side (stance beyond the dead band)")
    failed: list[AnalystRole] = Field(default_factory=list)
    met: bool


class DebateTurn(BaseModel):
    side: Side
    round: int
    argument: str
    cited: dict[str, float] = Field(default_factory=dict)
    answered: str | None = Field(
        None, description="the other side's point (analyst/point) this rebuttal answers"
    )
    rebutted: bool = Field(
        False, description="the answer was at least as strong: the manager discounts the point"
    )
    model_used: str = RULES


class DebateRound(BaseModel):
    round: int
    bull: DebateTurn
    bear: DebateTurn


class DebateVerdict(BaseModel):
    """The research manager's judgement, and the conviction after code calibrated it."""

    winner: Side
    rationale: str
    key_disagreements: list[str] = Field(default_factory=list)
    falsifiers: list[str] = Field(default_factory=list)
    conviction_proposed: float = Field(ge=0, le=1)
    conviction: float = Field(ge=0, le=1, description="after the opposition haircut")
    opposition: float = Field(
        0.0, ge=0, le=1, description="share of the analysts that took a side who oppose the winner"
    )
    model_used: str = RULES


class Debate(DebateVerdict):
    rounds: list[DebateRound] = Field(default_factory=list)


class ValidatorCheck(BaseModel):
    name: str
    ok: bool
    detail: str


class TraderThesis(BaseModel):
    """Where to get in, where the idea is wrong, where it has paid. Never a size."""

    direction: Direction
    entry: float
    stop: float
    target: float
    atr: float
    atr_period: int
    horizon_days: int
    rationale: str
    valid: bool = False
    validator: list[ValidatorCheck] = Field(default_factory=list)
    model_used: str = RULES

    @property
    def risk_per_share(self) -> float:
        """Distance from entry to stop, per share: what one R risks."""
        return abs(self.entry - self.stop)


class RiskTurn(BaseModel):
    stance: RiskStance
    round: int
    argument: str
    favours: Action
    model_used: str = RULES


class RiskRound(BaseModel):
    round: int
    turns: list[RiskTurn]


class RiskJudgement(BaseModel):
    action: Action
    rationale: str
    model_used: str = RULES


class RiskCheck(BaseModel):
    name: CheckName
    passed: bool
    detail: str


class RiskEngineResult(BaseModel):
    checks: list[RiskCheck] = Field(default_factory=list)
    size: int = 0
    notional: float = 0.0
    risk_amount: float = 0.0
    approved: bool = False

    @property
    def failed(self) -> list[CheckName]:
        """The risk checks that failed, in order."""
        return [c.name for c in self.checks if not c.passed]


class Recalled(BaseModel):
    """A past decision's review recalled from memory and cited by this analysis."""

    id: str
    date: str
    tag: OutcomeTag | None = None
    text: str


class Risk(BaseModel):
    rounds: list[RiskRound] = Field(default_factory=list)
    judge: RiskJudgement | None = None
    checks: dict[str, bool] = Field(default_factory=dict)
    check_details: list[RiskCheck] = Field(default_factory=list)
    size: int = 0
    notional: float = 0.0
    risk_amount: float = 0.0
    capital: float
    risk_pct: float
    approved: bool = False
    rejected_by: list[CheckName] = Field(default_factory=list)


class Decision(BaseModel):
    """``decision.json``: the whole path from the evidence to the order (or to no order)."""

    schema_version: int = SCHEMA_VERSION
    ticker: str
    date: str
    action: Action
    status: Status
    reason: str
    brain: str
    analysts: list[AnalystNote]
    quorum: Quorum
    debate: Debate | None = None
    trader: TraderThesis | None = None
    risk: Risk
    recalled: list[Recalled] = Field(default_factory=list)
    data: dict[str, str | int] = Field(default_factory=dict)
    config: AnalysisConfig
    llm_events: list[dict] = Field(default_factory=list)
    # LLM brains only (issue 29): masked or not, the cutoff, the leak audit's counts, the
    # banner of an unmasked run on a period the model may remember. None for the rules brain.
    masking: dict | None = None


class Review(BaseModel):
    """``review.json``: what happened after the decision, from the prices alone. A HOLD is
    never graded as a trade: direction flat, no R, no P&L."""

    ticker: str
    date: str
    action: Action
    direction: Direction  # of the position taken: flat for a HOLD
    horizon_days: int
    horizon_end: str
    outcome: Outcome
    tag: OutcomeTag
    exit_price: float  # the exit of a trade; the close at the horizon for a HOLD
    exit_reason: str
    r_multiple: float | None = None  # trades only
    size: int = 0  # shares traded (0 for a HOLD)
    pnl: float = Field(0.0, description="profit or loss in the account currency, before costs")
    thesis: str = ""  # what the decision expected
    result: str = ""  # what the prices did, against that expectation
    move_atr: float
    critique: str
    lessons: list[str]
    model_used: str = RULES
    stored_in_memory: bool = False
