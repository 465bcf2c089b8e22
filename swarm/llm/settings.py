"""LLM settings parsed from the CLI: which endpoint, which models per tier, budget, cache.

``--llm none`` (the default) means rules brains only; nothing here is imported then.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PROVIDERS = ("none", "openai", "openai-compatible")
STRUCTURED_METHODS = ("auto", "json_schema", "function_calling")
CONCURRENCY_HELP = (
    "LLM calls in flight at once (default: 1 for openai-compatible, whose local server answers "
    "one at a time; 8 for openai)"
)
# Roles by tier: the 15 subagents are many and simple (quick); synthesis, strategy
# development and failure analysis carry the run's decisions (deep).
QUICK_ROLES = frozenset(
    {
        "research_subagent",
        # The decision pipeline (swarm.analyze): analysts, debaters, risk analysts and the trader
        # at ordinary conviction are quick; the manager, the judge, the reviewer and a trader at
        # high conviction ("decision_trader_deep") are deep.
        "decision_analyst",
        "decision_debater",
        "decision_risk",
        "decision_trader",
    }
)


class LLMSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    provider: str = "none"
    quick_model: str | None = None
    deep_model: str | None = None
    base_url: str | None = None
    structured: str = "auto"
    max_tokens: int | None = Field(None, ge=1)  # whole-run budget; None = unlimited
    max_output_tokens: int = Field(512, ge=16)  # per call
    cache_dir: Path | None = None  # shared replay cache; default: inside the run folder
    timeout_s: float = 120.0
    # Calls in flight at once (--llm-concurrency; None: the provider's default). A local
    # server (llama.cpp) answers one request at a time: sending it the research swarm's 30
    # calls at once made most of them wait past the timeout (23 of 48 timed out).
    concurrency: int | None = Field(None, ge=1)
    # Issue 29: mask prompts (auto: when the data is older than the model's cutoff), and the
    # cutoff declared with --llm-cutoff (None: the model family's documented one).
    mask: Literal["auto", "on", "off"] = "auto"
    cutoff: dt.date | None = None

    @property
    def enabled(self) -> bool:
        """Whether an LLM is configured (``--llm`` is not none)."""
        return self.provider != "none"

    @property
    def max_concurrency(self) -> int:
        """Calls the client sends at once: ``concurrency``, else 1 for an OpenAI-compatible
        server (often one local model, one slot) and 8 for OpenAI."""
        if self.concurrency is not None:
            return self.concurrency
        return 1 if self.provider == "openai-compatible" else 8

    def model_for(self, role: str) -> str:
        """The model for ``role``: the quick one for the research subagents and the pipeline's
        ordinary roles, else the deep one (each falls back to the other)."""
        model = self.quick_model if role in QUICK_ROLES else self.deep_model
        return model or self.deep_model or self.quick_model or ""


def parse_llm_arg(
    value: str,
    *,
    base_url: str | None = None,
    quick_model: str | None = None,
    deep_model: str | None = None,
    structured: str = "auto",
    max_tokens: int | None = None,
    cache_dir: Path | None = None,
    max_output_tokens: int = 512,
    mask: str = "auto",
    cutoff: str | None = None,
    concurrency: int | None = None,
) -> LLMSettings:
    """``none`` | ``openai:MODEL`` | ``openai-compatible:MODEL``. Raises ValueError with the fix."""
    value = (value or "none").strip()
    if value == "none":
        return LLMSettings()
    provider, sep, model = value.partition(":")
    if provider not in PROVIDERS[1:] or not sep or not model.strip():
        raise ValueError(
            f"--llm: {value!r} is not understood; use none, openai:MODEL or openai-compatible:MODEL"
        )
    if provider == "openai-compatible" and not base_url:
        raise ValueError(
            "--llm-base-url: openai-compatible needs the server URL, e.g. http://127.0.0.1:8080/v1"
        )
    if max_output_tokens < 16:
        raise ValueError(
            f"--llm-max-output-tokens: {max_output_tokens} is too small; use 16 or more"
        )
    if structured not in STRUCTURED_METHODS:
        raise ValueError(
            f"--llm-structured: {structured!r}; use one of {', '.join(STRUCTURED_METHODS)}"
        )
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"--llm-concurrency: {concurrency} must be at least 1")
    model = model.strip()
    return LLMSettings(
        concurrency=concurrency,
        mask=mask,  # type: ignore[arg-type]  # a Literal: pydantic rejects anything else
        cutoff=parse_cutoff(cutoff),
        provider=provider,
        quick_model=quick_model or model,
        deep_model=deep_model or model,
        base_url=base_url,
        structured=structured,
        max_tokens=max_tokens,
        max_output_tokens=max_output_tokens,
        cache_dir=cache_dir,
    )


def parse_cutoff(value: str | None) -> dt.date | None:
    """``--llm-cutoff YYYY-MM-DD``; raises ValueError with the fix."""
    if value is None or not str(value).strip():
        return None
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(
            f"--llm-cutoff: {value!r} is not a date; give the model's knowledge cutoff as "
            "YYYY-MM-DD, e.g. 2023-10-31"
        ) from None


def mask_mode(mask: bool | None) -> str:
    """``--mask`` (True), ``--no-mask`` (False) or neither (None: auto, by the cutoff)."""
    return {True: "on", False: "off", None: "auto"}[mask]
