"""The leak audit: does an answer to a masked prompt name what the prompt did not show?

A masked prompt carries aliases, offsets and rebased prices. An answer that names a real
ticker, a company, a year or a dated event that is not in that prompt brought it from the
model's memory: the answer is rejected (the rules brain takes over, as for any bad answer)
and counted. A run whose leak rate exceeds :data:`CONTAMINATED_LEAK_RATE` is contaminated:
its model shows it recognises the period, so its decisions cannot be trusted as a backtest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from swarm.llm.mask import COMMON_WORDS, YEAR, KnownEntities, names_pattern

# More than 1 answer in 20 naming something it was not shown: the model is recalling the
# period, not reading the evidence. Rejected answers already fall back to the rules; above
# this rate even the accepted ones are suspect, so the run is marked contaminated.
CONTAMINATED_LEAK_RATE = 0.05

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
# A dated event: an ISO date, "June 3" / "3 June", a quarter with a year ("Q2 2019" is caught
# by the year too). A bare month ("in May") is not a date.
_DATED = re.compile(
    r"(?<!\d)(?:19|20)\d{2}-\d{2}-\d{2}(?!\d)"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b"
)


class LeakKind(StrEnum):
    TICKER = "ticker"
    COMPANY = "company"
    YEAR = "year"
    DATE = "date"


class Leak(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: LeakKind
    text: str = Field(description="what the answer named")


class LeakReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    leaks: tuple[Leak, ...] = ()

    @property
    def clean(self) -> bool:
        """Whether the answer leaked nothing."""
        return not self.leaks

    def reason(self) -> str:
        """For the retry message and the log. Names the kinds, never the values: a real name
        written back into a prompt would undo the mask."""
        kinds = sorted({leak.kind.value for leak in self.leaks})
        return (
            f"leak: the answer names a {' / '.join(kinds)} that is not in the context; "
            "use only the aliases, offsets and figures given"
        )


def _absent(token: str, prompt: str, *, ignore_case: bool = False) -> bool:
    flags = re.IGNORECASE if ignore_case else 0
    pattern = r"(?<![A-Za-z0-9])" + re.escape(token) + r"(?![A-Za-z0-9])"
    return re.search(pattern, prompt, flags) is None


def audit_texts(
    texts: Sequence[str],
    *,
    prompt: str,
    known: KnownEntities,
    real_tickers: Sequence[str] = (),
) -> LeakReport:
    """Leaks in ``texts`` (an answer's strings) given the masked ``prompt`` it answered.

    ``real_tickers``: the scope's own tickers, caught in any case and at any length (the
    answer's ``ticker`` field naming ``NVDA`` instead of its alias is the plainest leak)."""
    leaks: list[Leak] = []
    text = "\n".join(texts)
    own = {t.upper() for t in real_tickers}
    for ticker in sorted(own):
        if not _absent(ticker, text, ignore_case=True) and _absent(ticker, prompt):
            leaks.append(Leak(kind=LeakKind.TICKER, text=ticker))
    for ticker in sorted(known.tickers - own):
        if len(ticker) >= 3 and not _absent(ticker, text) and _absent(ticker, prompt):
            leaks.append(Leak(kind=LeakKind.TICKER, text=ticker))
    names = tuple(n for n in known.names if n.lower() not in COMMON_WORDS and n.upper() not in own)
    pattern = names_pattern(names)
    if pattern is not None:
        for m in dict.fromkeys(m[0] for m in pattern.finditer(text)):
            if _absent(m, prompt, ignore_case=True):
                leaks.append(Leak(kind=LeakKind.COMPANY, text=m))
    for year in dict.fromkeys(YEAR.findall(text)):
        if _absent(year, prompt):
            leaks.append(Leak(kind=LeakKind.YEAR, text=year))
    for date in dict.fromkeys(m[0] for m in _DATED.finditer(text)):
        if _absent(date, prompt, ignore_case=True):
            leaks.append(Leak(kind=LeakKind.DATE, text=date))
    return LeakReport(leaks=tuple(leaks))


class LeakCounts(BaseModel):
    """What a run's audit found: answers audited, answers rejected as leaks, by kind."""

    audited: int = 0
    leaked: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)

    def add(self, kinds: Sequence[str]) -> None:
        """One audited answer; a leak when ``kinds`` (the leak kinds found) is not empty."""
        self.audited += 1
        if kinds:
            self.leaked += 1
            for kind in set(kinds):
                self.by_kind[kind] = self.by_kind.get(kind, 0) + 1

    @property
    def rate(self) -> float:
        """Share of the audited answers that leaked (0 before any)."""
        return self.leaked / self.audited if self.audited else 0.0

    @property
    def contaminated(self) -> bool:
        """Whether the leak rate is above CONTAMINATED_LEAK_RATE: the gate cannot pass the run."""
        return self.rate > CONTAMINATED_LEAK_RATE

    def summary(self) -> dict[str, object]:
        """The counts as JSON for the manifest and the report."""
        return {
            "audited": self.audited,
            "leaked": self.leaked,
            "by_kind": dict(sorted(self.by_kind.items())),
            "leak_rate": round(self.rate, 4),
            "contaminated_above": CONTAMINATED_LEAK_RATE,
            "contaminated": self.contaminated,
        }
