"""When a model's memory ends, and whether a run must mask its prompts (issue 29).

A model knows what was written before its training cutoff. Data older than the cutoff may
be remembered, with what followed it: such a run is masked by default. ``--llm-cutoff DATE``
declares the cutoff; otherwise the family's documented one below applies, and for a model
the table does not know, the conservative answer: it may know everything, so every run masks.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict

MaskMode = Literal["auto", "on", "off"]
UNMASKED_BANNER = "the model may have seen this period"

# Documented training cutoffs by model-name prefix (longest prefix wins). Dates are the
# providers' published "knowledge cutoff"; when in doubt, the later one (masks more).
MODEL_CUTOFFS: dict[str, dt.date] = {
    "gpt-3.5": dt.date(2021, 9, 30),
    "gpt-4": dt.date(2023, 12, 31),
    "gpt-4o": dt.date(2023, 10, 31),
    "gpt-4.1": dt.date(2024, 6, 30),
    "gpt-4.5": dt.date(2023, 10, 31),
    "gpt-5": dt.date(2024, 9, 30),
    "o1": dt.date(2023, 10, 31),
    "o3": dt.date(2024, 6, 30),
    "o4": dt.date(2024, 6, 30),
    "gemma3": dt.date(2024, 8, 31),
    "gemma-3": dt.date(2024, 8, 31),
    "llama3": dt.date(2023, 12, 31),
    "llama-3": dt.date(2023, 12, 31),
    "qwen2.5": dt.date(2024, 9, 30),
    "mistral": dt.date(2024, 10, 31),
}


class MaskPolicy(BaseModel):
    """Whether a run masks, and why: reported in report.md, verdict.json and manifests."""

    model_config = ConfigDict(frozen=True)

    masked: bool
    cutoff: dt.date | None  # None: unknown model, assumed to know every date
    cutoff_source: str  # "--llm-cutoff", "documented for gpt-4o", "unknown model: conservative"
    earliest_data: dt.date | None
    mode: MaskMode = "auto"

    @property
    def banner(self) -> str | None:
        """Set for an unmasked run on data the model may remember."""
        return None if self.masked or not self.before_cutoff else UNMASKED_BANNER

    @property
    def before_cutoff(self) -> bool:
        """Whether the data starts on or before the model's cutoff (True when the cutoff is
        unknown)."""
        if self.earliest_data is None:
            return False
        return self.cutoff is None or self.earliest_data <= self.cutoff

    def describe(self) -> str:
        """The policy in one line: masked or not, the mode, the cutoff and where it came from."""
        cutoff = str(self.cutoff) if self.cutoff else "unknown (assumed after all data)"
        state = "masked" if self.masked else "NOT masked"
        return f"{state} (--mask {self.mode}); model cutoff {cutoff} ({self.cutoff_source})"

    def summary(self) -> dict[str, object]:
        """The policy as JSON for the manifest and the report."""
        return {
            "masked": self.masked,
            "mode": self.mode,
            "cutoff": str(self.cutoff) if self.cutoff else None,
            "cutoff_source": self.cutoff_source,
            "earliest_data": str(self.earliest_data) if self.earliest_data else None,
            "banner": self.banner,
        }


def declared_cutoff(model: str) -> tuple[dt.date | None, str]:
    """The documented cutoff of ``model``'s family, or (None, why) when unknown."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix in sorted(MODEL_CUTOFFS, key=len, reverse=True):
        if name.startswith(prefix):
            return MODEL_CUTOFFS[prefix], f"documented for {prefix}"
    return None, "unknown model: conservative"


def resolve_policy(
    *,
    mode: MaskMode,
    models: list[str],
    cutoff: dt.date | None,
    earliest_data: dt.date | str | None,
) -> MaskPolicy:
    """``auto`` masks when the earliest data the model sees is on or before its cutoff (the
    latest cutoff of the run's models: the one that remembers most)."""
    if isinstance(earliest_data, str):
        earliest_data = dt.date.fromisoformat(earliest_data[:10])
    if cutoff is not None:
        source = "--llm-cutoff"
    else:
        found = [declared_cutoff(m) for m in models if m]
        if not found or any(c is None for c, _ in found):
            cutoff, source = None, "unknown model: conservative"
        else:
            cutoff, source = max(found, key=lambda cs: cs[0])  # type: ignore[arg-type,return-value]
    policy = MaskPolicy(
        masked=False, cutoff=cutoff, cutoff_source=source, earliest_data=earliest_data, mode=mode
    )
    masked = {"on": True, "off": False, "auto": policy.before_cutoff}[mode]
    return policy.model_copy(update={"masked": masked})


def policy_for(settings, earliest_data: dt.date | str | None) -> MaskPolicy | None:
    """The policy of an ``LLMSettings`` for data from ``earliest_data``; None with --llm none
    (the rules brains see no prompt)."""
    if not settings.enabled:
        return None
    return resolve_policy(
        mode=settings.mask,
        cutoff=settings.cutoff,
        earliest_data=earliest_data,
        models=[settings.quick_model or "", settings.deep_model or ""],
    )
