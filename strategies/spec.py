"""Strategy specifications: what a variant *is*, independent of its code.

A spec's ``trial_key`` identifies a trial for the gate's trial ledger: it hashes
the family, the blocks and the parameters, never the display name, so renaming a
strategy cannot reset the count of trials.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from strategies.route import Origin


class Family(StrEnum):
    MOMENTUM = "momentum"
    MEAN_REVERSION = "mean_reversion"
    BREAKOUT = "breakout"
    TREND = "trend"
    VOLATILITY = "volatility"


class PipelineFamily(StrEnum):
    """Families not assembled from blocks: their code embeds data the trusted side computed
    (``strategies.decision_family``). Kept apart from ``Family`` so that iterating the block
    families never meets one without templates."""

    DECISION_PIPELINE = "decision_pipeline"


class PortfolioFamily(StrEnum):
    """Portfolio-scope families: one strategy over the whole universe (``self.datas``),
    rendered by ``strategies.portfolio``; kept apart from ``Family`` for the same reason."""

    CROSS_SECTIONAL_MOMENTUM = "cross_sectional_momentum"
    ROTATION = "rotation"
    PAIRS = "pairs"
    # The low-volatility anomaly: hold the universe's calmest symbols.
    LOW_VOLATILITY = "low_volatility"


# A plugin family's name (``strategies.family_api``): a snake_case identifier. Any such name
# validates, so a run folder reads back in any process, whether or not its plugin is loaded;
# the registry says which plugin owns it (``FamilyRegistry.for_spec``) when it is used.
PLUGIN_FAMILY_NAME = re.compile(r"[a-z][a-z0-9_]{1,47}")


class PluginFamily(str):
    """A family name a plugin registered (``strategies.family_api``); ``.value`` like the enums'."""

    __slots__ = ()

    @property
    def value(self) -> str:
        """The name as a plain str."""
        return str.__str__(self)

    @classmethod
    def _check(cls, value: str) -> PluginFamily:
        if any(value in e._value2member_map_ for e in (Family, PipelineFamily, PortfolioFamily)):
            raise ValueError(f"family {value!r} is a built-in family")  # keeps its enum member
        if not PLUGIN_FAMILY_NAME.fullmatch(value):
            raise ValueError(f"family {value!r}: not a family name (snake_case, 2-48 characters)")
        return cls(value)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls._check,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


ParamValue = float | int | bool


class StrategySpec(BaseModel):
    family: Family | PipelineFamily | PortfolioFamily | PluginFamily
    name: str
    approach: str  # one sentence a researcher can read
    entry: str  # entry block id, e.g. "roc_momentum"
    filters: list[str] = Field(default_factory=list)  # e.g. ["trend_sma"]
    exits: list[str] = Field(default_factory=list)  # e.g. ["stop_loss", "max_hold"]
    sizing: str = "fixed_fraction"
    long_short: bool = False
    parameters: dict[str, ParamValue] = Field(default_factory=dict)
    # Set only for code written outside the block catalogue (an LLM's own Backtrader class):
    # the sha256 of that code, so each distinct custom code counts as its own trial.
    source_sha: str | None = None
    # "symbol": one strategy timing one symbol, run on each symbol alone (the block families);
    # "portfolio": one strategy over the whole universe, run once per fold.
    scope: Literal["symbol", "portfolio"] = "symbol"

    @property
    def is_custom(self) -> bool:
        """Whether the spec's code is an LLM's own (it carries the source's hash)."""
        return self.source_sha is not None

    def trial_key(self) -> str:
        """The spec's id in the trial ledger: a hash of what changes its results (not its name)."""
        payload = {
            "family": self.family.value,
            "entry": self.entry,
            "filters": sorted(self.filters),
            "exits": sorted(self.exits),
            "sizing": self.sizing,
            "long_short": self.long_short,
            "parameters": {k: self.parameters[k] for k in sorted(self.parameters)},
        }
        if self.source_sha is not None:  # absent otherwise, so existing keys never change
            payload["source_sha"] = self.source_sha
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class StrategyVariant(BaseModel):
    variant_id: str
    parent_id: str | None = None
    iteration: int
    route: Origin  # the loop step that produced it
    spec: StrategySpec
    code: str
    code_sha256: str

    @property
    def name(self) -> str:
        """The spec's name."""
        return self.spec.name

    @property
    def parameters(self) -> dict[str, ParamValue]:
        """The spec's parameters."""
        return self.spec.parameters
