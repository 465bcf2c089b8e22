"""The reviewer over a backtest's decisions: the outcome of each in-sample decision, once.

Each variant the develop loop builds of the ``decision_pipeline`` family carries a decision
per ticker and rebalance date. Those whose horizon ends inside the in-sample bars are
classified from the prices alone (``review.review_decision``: a trade's win / loss / scratch,
a HOLD's stand-aside -> one of the five signal-evolution states) and stored as tagged lessons, so a later ``swarm.analyze`` of
the same symbol recalls them. Never the holdout: the caller hands in bars cut at the
in-sample end, and the holdout's decisions are made after the search, for the winner only.

Cheap on purpose. A (ticker, date) is reviewed once per run, for the first variant that
reaches it (variants share most dates, and a tune of the horizon would otherwise review the
same call again); one that memory already holds, from an earlier run, is counted and not
written again: at most one record per decision, across variants and reruns. The rules
write the critique; with an LLM, the model rewrites at most ``llm_max`` of the new
critiques per run, never once the token budget is spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from pydantic import BaseModel

from swarm.analyze.contracts import Decision, OutcomeTag, Review, Status
from swarm.analyze.review import (
    HorizonNotPassedError,
    critique_with_llm,
    review_decision,
    reviewed_dates,
    store_reviews,
)

LLM_REVIEWS_PER_RUN = 8
TAG_FIELD = {tag: tag.value.lower() for tag in OutcomeTag}  # every state has its counter


class ReviewStats(BaseModel):
    """The run's reviews (``decision_pipeline.json`` -> ``reviews``)."""

    reviewed: int = 0  # distinct (ticker, date) decisions classified this run
    realized: int = 0
    strengthened: int = 0
    weakened: int = 0
    falsified: int = 0
    unknown: int = 0
    stored: int = 0  # new memory records
    already_in_memory: int = 0  # an earlier run holds this review: nothing new written
    horizon_not_over: int = 0  # the horizon runs past the in-sample end: not reviewable yet
    degraded: int = 0  # no quorum, no thesis: nothing to review
    llm_critiques: int = 0
    memory: str = "off"

    def counts(self) -> str:
        """The count of each outcome tag, in one line."""
        return ", ".join(f"{getattr(self, TAG_FIELD[t])} {t.value}" for t in OutcomeTag)


class DecisionReviewer:
    """Reviews decisions as variants are built; one instance per run."""

    def __init__(
        self, *, memory: Any = None, llm: Any = None, llm_max: int = LLM_REVIEWS_PER_RUN
    ) -> None:
        self.memory = memory if memory is not None and memory.available else None
        self.llm, self.llm_max = llm, llm_max
        reason = getattr(memory, "reason", None) if memory is not None else None
        self.stats = ReviewStats(memory="on" if self.memory else f"off ({reason or 'not asked'})")
        self._done: set[tuple[str, str]] = set()
        self._known: dict[str, set[str]] = {}  # ticker -> dates memory already holds

    def review(
        self,
        decisions: Mapping[str, Mapping[pd.Timestamp, Decision]],
        bars: Mapping[str, pd.DataFrame],
    ) -> ReviewStats:
        """Review what is new in ``decisions`` against ``bars`` (nothing past them is read);
        returns this call's counts, the run's are in ``stats``."""
        before = self.stats.model_copy()
        records = self.memory.count() if self.memory is not None else 0
        writes: list[Review] = []
        for ticker in sorted(decisions):
            for day in sorted(decisions[ticker]):
                self._one(decisions[ticker][day], bars[ticker], writes)
        if writes:
            # Recall is approximate (HNSW) and may miss a stored review: the record's id is
            # its text's hash, so a rewrite of the same review upserts in place; the count
            # says what was new.
            if self.memory.available:
                store_reviews(self.memory, writes)
            new = self.memory.count() - records
            self.stats.stored += new
            self.stats.already_in_memory += len(writes) - new
        return ReviewStats(
            memory=self.stats.memory,
            **{
                k: getattr(self.stats, k) - getattr(before, k)
                for k in ReviewStats.model_fields
                if k != "memory"
            },
        )

    def _one(self, decision: Decision, bars: pd.DataFrame, writes: list[Review]) -> None:
        key = (decision.ticker, decision.date)
        if key in self._done:
            return
        if decision.status == Status.DEGRADED:
            self._done.add(key)
            self.stats.degraded += 1
            return
        try:
            rv = review_decision(decision, bars)
        except HorizonNotPassedError:  # another variant's shorter horizon may still end
            self.stats.horizon_not_over += 1
            return
        self._done.add(key)
        self.stats.reviewed += 1
        tag = TAG_FIELD[rv.tag]
        setattr(self.stats, tag, getattr(self.stats, tag) + 1)
        if self.memory is None:
            return
        known = self._known.get(decision.ticker)
        if known is None:
            known = self._known[decision.ticker] = reviewed_dates(self.memory, decision.ticker)
        if decision.date in known:
            self.stats.already_in_memory += 1
            return
        if self._llm_may_write():
            rv = critique_with_llm(self.llm, decision, rv, log=lambda event: None)
            self.stats.llm_critiques += 1
        known.add(decision.date)
        writes.append(rv.model_copy(update={"stored_in_memory": True}))

    def _llm_may_write(self) -> bool:
        llm = self.llm
        return llm is not None and not llm.exhausted and self.stats.llm_critiques < self.llm_max
