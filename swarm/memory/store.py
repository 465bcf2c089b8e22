"""The persistent store: a ChromaDB collection on disk that never takes a run down.

By default under the user cache dir (``platformdirs.user_cache_dir("swarm-lab")/memory``).
Memory is an aid, never a dependency: a store that cannot be opened (corrupt, locked,
unwritable) degrades to "no memory" with a logged reason and every call becomes a no-op.
Chroma's Rust core holds the GIL while it waits on a locked SQLite file, so a lock held by
another process would hang the run: each operation first takes a cross-process file lock
(bounded wait) and probes SQLite with a short timeout, and gives up cleanly instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from swarm.memory import recall as policy
from swarm.memory import records
from swarm.memory.embedding import CHROMA_IMPORT_ERROR, EMBEDDING_NAME, HashingEmbedding
from swarm.memory.records import FamilyRecord, Recollection, Record

log = logging.getLogger("swarm.memory")

COLLECTION = "swarm_memory"  # Chroma needs >= 3 characters
LOCK_WAIT_S = 5.0  # how long an operation waits for another process's use of the store
SQLITE_PROBE_TIMEOUT_S = 1.0


def default_memory_dir() -> Path:
    """``<user cache dir>/swarm-lab/memory``; no environment variable is consulted."""
    return Path(platformdirs.user_cache_dir("swarm-lab")) / "memory"


class ResearchMemory:
    """The persistent store. Construct it with a folder; it never raises afterwards.

    ``available`` says whether it works; ``reason`` says why not. Write methods return
    the number of records stored (0 when unavailable), read methods an empty result.
    ``scope`` on a write (``timeframe``, ``sector``) is what a later recall filters on.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        collection: str = COLLECTION,
        lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_memory_dir()
        self.embedding = HashingEmbedding()
        self.reason: str | None = None
        self.lock_wait_s = lock_wait_s
        self._collection_name = collection
        self._col: Any = None
        self._thread_lock = threading.Lock()
        if CHROMA_IMPORT_ERROR:
            self._disable(CHROMA_IMPORT_ERROR)
            return
        if len(collection) < 3:
            self._disable(f"collection name {collection!r} is shorter than 3 characters")
            return
        self._guarded("open", self._open, None)

    @classmethod
    def disabled(cls, reason: str) -> ResearchMemory:
        """A memory that remembers nothing (e.g. switched off by config)."""
        mem = cls.__new__(cls)
        mem.path, mem.embedding, mem.reason = None, HashingEmbedding(), None
        mem.lock_wait_s, mem._collection_name = 0.0, COLLECTION
        mem._col, mem._thread_lock = None, threading.Lock()
        mem._disable(reason, warn=False)
        return mem

    # ---- plumbing

    @property
    def available(self) -> bool:
        return self._col is not None and self.reason is None

    def status(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "available": self.available,
            "reason": self.reason,
            "embedding": EMBEDDING_NAME,
            "records": self.count() if self.available else 0,
        }

    def _disable(self, reason: str, *, warn: bool = True) -> None:
        self._col = None
        self.reason = reason
        if warn:
            log.warning("research memory disabled: %s", reason)

    def _open(self) -> None:
        import chromadb
        from chromadb.config import Settings

        self.path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )
        col = client.get_or_create_collection(
            self._collection_name,
            embedding_function=self.embedding,
            configuration={"hnsw": {"space": "cosine"}},
        )
        col.count()  # touches the store: a corrupt database fails here, not later
        self._col = col

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Cross-process lock on the store, then a SQLite probe: fail fast, never hang."""
        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / "swarm-memory.lock", "a+") as fh:
            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"store busy: another process held its lock for {self.lock_wait_s:g}s"
                        ) from None
                    time.sleep(0.05)
            try:
                db = self.path / "chroma.sqlite3"
                if db.exists():
                    con = sqlite3.connect(db, timeout=SQLITE_PROBE_TIMEOUT_S)
                    try:
                        con.execute("BEGIN IMMEDIATE")
                        con.rollback()
                    finally:
                        con.close()
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _guarded(self, what: str, fn, default):
        if what != "open" and not self.available:
            return default
        with self._thread_lock:
            try:
                with self._exclusive():
                    return fn()
            except Exception as exc:  # memory must never kill a run
                self._disable(
                    f"{what} failed at {self.path}: {type(exc).__name__}: {str(exc)[:200]}"
                )
                return default

    def _upsert(self, recs: list[Record]) -> int:
        if not recs:
            return 0
        recs = list({r[0]: r for r in recs}.values())  # last one wins, as an upsert would

        def go() -> int:
            self._col.upsert(
                ids=[r[0] for r in recs],
                documents=[r[1] for r in recs],
                metadatas=[r[2] for r in recs],
            )
            return len(recs)

        return self._guarded("write", go, 0)

    def count(self) -> int:
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
        return self._upsert(records.finding_records(
            run_id, findings, iteration=iteration, regime=regime, scope=scope or {}
        ))  # fmt: skip

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
        return self._upsert(records.fact_sheet_records(
            run_id, sheets, symbols=symbols, iteration=iteration, regime=regime,
            scope=scope or {},
        ))  # fmt: skip

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
        return self._upsert([records.research_record(
            run_id, synthesis, symbols=symbols, iteration=iteration, window=window,
            scope=scope or {},
        )])  # fmt: skip

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
        return self._upsert([records.strategy_record(
            run_id, variant, evaluation, symbols=symbols, regime=regime, iteration=iteration,
            scope=scope or {},
        )])  # fmt: skip

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
        return self._upsert([records.lesson_record(
            run_id, iteration, text, metadata, symbols=symbols, family=family, regime=regime,
            outcome=outcome, scope=scope or {},
        )])  # fmt: skip

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
                run_id, by_id.get(e.get("variant_id")) or {"variant_id": e.get("variant_id")},
                e, symbols=symbols, regime=regime, iteration=iteration, scope=scope,
            )  # fmt: skip
        best = next((e for e in evals if e.get("variant_id") == d.get("best_variant_id")), None)
        failure = d.get("failure") or {}
        passed = any(e.get("passed") for e in evals)
        n += self.remember_lesson(
            run_id, iteration, records.gate_lesson_text(d, evals, symbols=symbols, regime=regime),
            {"source": "gate", "route": d.get("decision"),
             "failure_type": failure.get("failure_type")},
            symbols=symbols, family=(best or {}).get("family"), regime=regime,
            outcome="passed" if passed else "failed", scope=scope,
        )  # fmt: skip
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
        styles = [style] if isinstance(style, str) else list(style or [])
        styles = [s for s in styles if s]
        where = policy.scope_where(syms, kinds=kinds, timeframe=timeframe, sector=sector)
        query = policy.recall_query(syms, styles, regime)

        def go() -> list[Recollection]:
            total = self._col.count()
            if total == 0 or k <= 0 or where is None:
                return []
            res = self._col.query(
                query_texts=[query], n_results=min(total, max(4 * k, 20)), where=where,
                include=["documents", "metadatas", "distances"],
            )  # fmt: skip
            found = zip(
                res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0],
                strict=True,
            )  # fmt: skip
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
                )  # fmt: skip
                for rid, doc, meta, dist in found
            ]
            return policy.top_k(candidates, k, min_relevance)

        return self._guarded("recall", go, [])

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
        if not syms or where is None:
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
