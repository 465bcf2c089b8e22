"""What the LLM is asked to return. Field descriptions are the instructions; lengths are
bounded because small local models follow ``max_length`` in tool schemas reliably."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

FamilyName = Literal["momentum", "mean_reversion", "breakout", "trend", "volatility"]
FailureName = Literal[
    "PARAMETER_ISSUE", "ALGORITHM_BUG", "DESIGN_FLAW", "RESEARCH_GAP", "FUNDAMENTAL_IMPOSSIBILITY"
]


class Citation(BaseModel):
    key: str = Field(description="evidence key exactly as given, e.g. RSI_14", max_length=48)
    value: float = Field(description="the value exactly as given for that key")


class LLMFinding(BaseModel):
    """One analyst's reading of one symbol, citing only numbers from the evidence given."""

    symbol: str = Field(description="the ticker you were asked about", max_length=16)
    signal: float = Field(description="-1 bearish .. +1 bullish", ge=-1, le=1)
    confidence: float = Field(description="0 .. 1", ge=0, le=1)
    interpretation: str = Field(
        description="one or two sentences; any number must be one of the evidence values",
        max_length=400,
    )
    cited: list[Citation] = Field(
        description="the evidence values the reading rests on", max_length=8
    )


class LLMParam(BaseModel):
    name: str = Field(max_length=32)
    value: float


class LLMSpec(BaseModel):
    """A strategy built from the block catalogue, or (optionally) full Backtrader code."""

    family: FamilyName
    entry: str = Field(description="entry block id from the catalogue", max_length=32)
    filters: list[str] = Field(default_factory=list, max_length=3)
    exits: list[str] = Field(default_factory=list, max_length=4)
    sizing: str = Field("fixed_fraction", max_length=32)
    parameters: list[LLMParam] = Field(default_factory=list, max_length=12)
    rationale: str = Field("", max_length=300)
    code: str | None = Field(
        None,
        description="optional: a complete module with one bt.Strategy subclass; only backtrader and math imports",
        max_length=8000,
    )


class LLMStrategyProposals(BaseModel):
    proposals: list[LLMSpec] = Field(max_length=10)


class LLMFailure(BaseModel):
    failure_type: FailureName
    root_cause: str = Field(
        description="one sentence; numbers only from the evidence", max_length=300
    )
    confidence: float = Field(ge=0, le=1)
    actions: list[str] = Field(default_factory=list, max_length=5)


class LLMSummary(BaseModel):
    summary: str = Field(
        description="a short paragraph for a quant; numbers only from the facts given",
        max_length=900,
    )
