"""The persistent store: a ChromaDB collection on disk that never takes a run down.

By default under the user cache dir (``platformdirs.user_cache_dir("swarm-lab")/memory``).
Memory is an aid, never a dependency: a store that cannot be opened (corrupt, locked,
unwritable) degrades to "no memory" with a logged reason and every call becomes a no-op.
This module holds what is stored and recalled; opening (at once or ``lazy``), repairing a
torn store and guarding each operation is ``swarm.memory.lifecycle``, the cross-process
lock ``swarm.memory.locking``, the torn-store probe and rebuild ``swarm.memory.safety``. A
recall that the store's index (``swarm.memory.index``) says would find nothing is answered
without opening a lazy store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from swarm.memory import hybrid, records
from swarm.memory import index as store_index
from swarm.memory import recall as policy
from swarm.memory.embedding import EMBEDDING_NAME
from swarm.memory.lifecycle import COLLECTION, REBUILD_BATCH, StoreLifecycle
from swarm.memory.locking import LOCK_WAIT_S, SQLITE_PROBE_TIMEOUT_S
from swarm.memory.records import FamilyRecord, Recollection, Record

# Moved to lifecycle / locking; still importable from here.
__all__ = [
    "COLLECTION",
    "LOCK_WAIT_S",
    "REBUILD_BATCH",
    "SQLITE_PROBE_TIMEOUT_S",
    "ResearchMemory",
    "default_memory_dir",
]


def default_memory_dir() -> Path:
    """``<user cache dir>/swarm-lab/memory``; no environment variable is consulted."""
    return Path(platformdirs.user_cache_dir("swarm-lab")) / "memory"


class ResearchMemory(StoreLifecycle):
    """The persistent store. Construct it with a folder; it never raises afterwards.

    ``available`` says whether it works; ``reason`` says why not. Write methods return
    the number of records stored (0 when unavailable), read methods an empty result.
    ``scope`` on a write (``timeframe``, ``sector``) is what a later recall filters on.
    ``lazy``: open the store at its first use (``available`` counts as a use) rather than
    here, and answer a recall its index rules out without opening it at all.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        collection: str = COLLECTION,
        lock_wait_s: float = LOCK_WAIT_S,
        lazy: bool = False,
    ) -> None:
        super().__init__(
            Path(path).expanduser() if path is not None else default_memory_dir(),
            collection=collection,
            lock_wait_s=lock_wait_s,
            lazy=lazy,
        )

    def status(self) -> dict[str, Any]:
        """The memory's state for the manifest: where it is, whether it opened, why not, how many
        records."""
        if not self._tried_open and self.reason is None:
            return {
                "path": str(self.path),
                "available": None,
                "opened": False,
                "reason": "not opened: nothing this run needed it",
                "notice": None,
                "embedding": EMBEDDING_NAME,
                "records": None,
            }
        return {
            "path": str(self.path) if self.path else None,
            "available": self.available,
            "reason": self.reason,
            "notice": self.notice,
            "embedding": EMBEDDING_NAME,
            "records": self.count() if self.available else 0,
        }

    def _note_keys(self, recs: list[Record]) -> None:
        """Before a write, under the lock: its symbols and sectors go into the index first,
        so the index never misses a stored record (see ``swarm.memory.index``)."""
        self._written.update(str((r[2] or {}).get("run_id") or "") for r in recs)
        idx = store_index.read_index(self.path) or store_index.StoreIndex()
        if idx.add(r[2] for r in recs):
            store_index.write_index(self.path, idx)

    def _upsert(self, recs: list[Record]) -> int:
        if not recs:
            return 0
        recs = list({r[0]: r for r in recs}.values())  # last one wins, as an upsert would

        def go() -> int:
            self._note_keys(recs)
            self._col.upsert(
                ids=[r[0] for r in recs],
                documents=[r[1] for r in recs],
                metadatas=[r[2] for r in recs],
            )
            return len(recs)

        return self._guarded("write", go, 0)

    def count(self) -> int:
        """The number of records stored (0 when the store is unavailable)."""
        return self._guarded("count", lambda: int(self._col.count()), 0)

    # ---- writes

    def remember_findings(
        self,
        run_id: str,
        findings: Sequence[Any],
        *,
        iteration: int | None = None,
        regime: str | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """One record per finding (abstentions too: a gap is worth remembering)."""
        return self._upsert(
            records.finding_records(
                run_id, findings, iteration=iteration, regime=regime, scope=scope or {}
            )
        )

    def remember_fact_sheets(
        self,
        run_id: str,
        sheets: Sequence[Any],
        *,
        symbols: Sequence[str],
        iteration: int | None = None,
        regime: str | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """Store the round's fact sheets; returns how many records were written."""
        return self._upsert(
            records.fact_sheet_records(
                run_id,
                sheets,
                symbols=symbols,
                iteration=iteration,
                regime=regime,
                scope=scope or {},
            )
        )

    def remember_research(
        self,
        run_id: str,
        synthesis: Any,
        *,
        symbols: Sequence[str],
        iteration: int | None = None,
        window: str | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """The leader's conclusion as a lesson-like note a later run can recall."""
        return self._upsert(
            [
                records.research_record(
                    run_id,
                    synthesis,
                    symbols=symbols,
                    iteration=iteration,
                    window=window,
                    scope=scope or {},
                )
            ]
        )

    def remember_strategy(
        self,
        run_id: str,
        variant: Any,
        evaluation: Any,
        *,
        symbols: Sequence[str],
        regime: str | None = None,
        iteration: int | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """A variant tried (``StrategyVariant`` dump) and its gate evaluation summary."""
        return self._upsert(
            [
                records.strategy_record(
                    run_id,
                    variant,
                    evaluation,
                    symbols=symbols,
                    regime=regime,
                    iteration=iteration,
                    scope=scope or {},
                )
            ]
        )

    def remember_lesson(
        self,
        run_id: str,
        iteration: int | None,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        symbols: Sequence[str] = (),
        family: str | None = None,
        regime: str | None = None,
        outcome: str | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """A free-text lesson. With ``family`` and ``outcome`` it counts for or against
        that family in :meth:`family_outcomes` (unless ``metadata['source'] == 'gate'``)."""
        return self._upsert(
            [
                records.lesson_record(
                    run_id,
                    iteration,
                    text,
                    metadata,
                    symbols=symbols,
                    family=family,
                    regime=regime,
                    outcome=outcome,
                    scope=scope or {},
                )
            ]
        )

    def remember_gate_decision(
        self,
        run_id: str,
        decision: Any,
        variants: Sequence[Any],
        *,
        symbols: Sequence[str],
        regime: str | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> int:
        """Store one iteration's outcome: every evaluated variant as a strategy tried, and
        one gate lesson (route, reasoning, failure analysis, best variant). This is what
        the router calls after each decision."""
        d = records.dump(decision)
        by_id = {records.dump(v).get("variant_id"): v for v in variants}
        evals = [records.dump(e) for e in d.get("evaluations", [])]
        iteration = d.get("iteration")
        n = 0
        for e in evals:
            n += self.remember_strategy(
                run_id,
                by_id.get(e.get("variant_id")) or {"variant_id": e.get("variant_id")},
                e,
                symbols=symbols,
                regime=regime,
                iteration=iteration,
                scope=scope,
            )
        best = next((e for e in evals if e.get("variant_id") == d.get("best_variant_id")), None)
        failure = d.get("failure") or {}
        passed = any(e.get("passed") for e in evals)
        n += self.remember_lesson(
            run_id,
            iteration,
            records.gate_lesson_text(d, evals, symbols=symbols, regime=regime),
            {
                "source": "gate",
                "route": d.get("decision"),
                "failure_type": failure.get("failure_type"),
            },
            symbols=symbols,
            family=(best or {}).get("family"),
            regime=regime,
            outcome="passed" if passed else "failed",
            scope=scope,
        )
        return n

    # ---- reads

    def recall(
        self,
        symbols: Sequence[str],
        style: str | Sequence[str] | None = None,
        regime: str | None = None,
        k: int = 5,
        *,
        kinds: Sequence[str] = policy.RECALL_KINDS,
        timeframe: str | None = None,
        sector: str | None = None,
        min_relevance: float = policy.MIN_RELEVANCE,
    ) -> list[Recollection]:
        """The ``k`` most relevant past lessons / strategies / research notes about any of
        ``symbols`` (or ``sector``), on ``timeframe`` when given; see ``swarm.memory.recall``
        for the scope and the ranking."""
        syms = sorted({s.upper() for s in symbols})
        if self._ruled_out(syms, sector):
            return []
        styles = [style] if isinstance(style, str) else list(style or [])
        styles = [s for s in styles if s]
        where = policy.scope_where(syms, kinds=kinds, timeframe=timeframe, sector=sector)
        query = policy.recall_query(syms, styles, regime)

        def go() -> list[Recollection]:
            total = self._col.count()
            if total == 0 or k <= 0 or where is None:
                return []
            res = self._col.query(
                query_texts=[query],
                n_results=min(total, max(4 * k, 20)),
                where=where,
                include=["documents", "metadatas", "distances"],
            )
            found = zip(
                res["ids"][0],
                res["documents"][0],
                res["metadatas"][0],
                res["distances"][0],
                strict=True,
            )
            candidates = [
                policy.recollection(
                    rid,
                    doc,
                    meta or {},
                    dist,
                    symbols=syms,
                    styles=styles,
                    regime=regime,
                    sector=sector,
                )
                for rid, doc, meta, dist in found
            ]
            return policy.top_k(candidates, k, min_relevance)

        return self._guarded("recall", go, [])

    def search(
        self,
        query: str,
        symbols: Sequence[str],
        k: int = 5,
        *,
        kinds: Sequence[str] = policy.RECALL_KINDS,
        timeframe: str | None = None,
        sector: str | None = None,
        limit: int = 2000,
        fuse: bool = True,
    ) -> list[Recollection]:
        """Hybrid recall of free text within :meth:`recall`'s scope: Chroma's dense (cosine)
        ranking of the scoped records fused with BM25 by RRF, records sharing no content word
        with ``query`` dropped (``swarm.memory.hybrid``). Best first; ``relevance`` is the fused
        score. ``fuse=False``: Chroma's dense ranking alone, no floor (relevance = cosine)."""
        syms = sorted({s.upper() for s in symbols})
        if self._ruled_out(syms, sector):
            return []
        where = policy.scope_where(syms, kinds=kinds, timeframe=timeframe, sector=sector)

        def go() -> list[Recollection]:
            if where is None or k <= 0 or self._col.count() == 0:
                return []
            got = self._col.get(where=where, include=["documents", "metadatas"], limit=limit)
            ids = list(got["ids"])
            if not ids:
                return []
            res = self._col.query(
                query_texts=[query], n_results=len(ids), where=where, include=["distances"]
            )
            dist = dict(zip(res["ids"][0], res["distances"][0], strict=True))
            docs = dict(zip(ids, got["documents"] or [], strict=False))
            metas = dict(zip(ids, got["metadatas"] or [], strict=False))
            if not fuse:
                fused = [(i, 1.0 - float(dist[i])) for i in res["ids"][0][:k]]
            else:
                fused = hybrid.hybrid_scored(
                    query, ids, [docs.get(i) or "" for i in ids], dense=res["ids"][0]
                )[:k]
            return [
                policy.recollection(
                    rid,
                    docs.get(rid) or "",
                    metas.get(rid) or {},
                    dist.get(rid, 1.0),
                    symbols=syms,
                    styles=[],
                    regime=None,
                    sector=sector,
                ).model_copy(update={"relevance": round(score, 6)})
                for rid, score in fused
            ]

        return self._guarded("search", go, [])

    def family_outcomes(
        self,
        symbols: Sequence[str],
        *,
        limit: int = 5000,
        exclude_run: str | None = None,
        timeframe: str | None = None,
    ) -> dict[str, FamilyRecord]:
        """Per family: strategies that passed / failed the gate on any of ``symbols`` (on
        ``timeframe`` when given), plus explicit family lessons.

        ``exclude_run``: leave out that run's own records (a run's RESEARCH round reads its
        own verdicts from the run state, see ``swarm.research.feedback``; counting them here
        too would weigh them twice)."""
        syms = sorted({s.upper() for s in symbols})
        where = policy.scope_where(syms, kinds=("strategy", "lesson"), timeframe=timeframe)
        if not syms or where is None or self._ruled_out(syms):
            return {}

        def go() -> dict[str, FamilyRecord]:
            got = self._col.get(where=where, include=["metadatas", "documents"], limit=limit)
            rows = [
                {**m, "_text": doc}
                for m, doc in zip(got["metadatas"] or [], got["documents"] or [], strict=False)
                if m
            ]
            return policy.family_outcomes_of(rows, syms, exclude_run=exclude_run)

        return self._guarded("family_outcomes", go, {})
