"""The persistent store: a ChromaDB collection on disk that never takes a run down.

By default under the user cache dir (``platformdirs.user_cache_dir("swarm-lab")/memory``).
Memory is an aid, never a dependency: a store that cannot be opened (corrupt, locked,
unwritable) degrades to "no memory" with a logged reason and every call becomes a no-op.
Chroma's Rust core holds the GIL while it waits on a locked SQLite file, so a lock held by
another process would hang the run: each operation first takes a cross-process file lock
(bounded wait) and probes SQLite with a short timeout, and gives up cleanly instead.
Opening costs most of a second (chromadb's imports, then the store): a ``lazy`` memory opens
at its first use, and a recall that the store's index (``swarm.memory.index``) says would find
nothing is answered without opening it. A store a killed process may have left torn (Chroma
segfaults on some) is checked in a subprocess first and, if unsound, rebuilt from its SQLite
records with the old folder kept aside (``swarm.memory.safety``).
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

from swarm.memory import index as store_index
from swarm.memory import recall as policy
from swarm.memory import records, safety
from swarm.memory.embedding import (
    EMBEDDING_NAME,
    HashingEmbedding,
    chroma_embedding_class,
    chroma_import_error,
)
from swarm.memory.records import FamilyRecord, Recollection, Record

log = logging.getLogger("swarm.memory")

COLLECTION = "swarm_memory"  # Chroma needs >= 3 characters
LOCK_WAIT_S = 5.0  # how long an operation waits for another process's use of the store
SQLITE_PROBE_TIMEOUT_S = 1.0
REBUILD_BATCH = 1000  # records per upsert when rebuilding a store (Chroma caps a batch)


def default_memory_dir() -> Path:
    """``<user cache dir>/swarm-lab/memory``; no environment variable is consulted."""
    return Path(platformdirs.user_cache_dir("swarm-lab")) / "memory"


class ResearchMemory:
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
        self.path = Path(path).expanduser() if path is not None else default_memory_dir()
        self.embedding = HashingEmbedding()
        self.reason: str | None = None
        self.notice: str | None = None  # what opening had to repair, for the run's progress
        self.lock_wait_s = lock_wait_s
        self._collection_name = collection
        self._col: Any = None
        self._thread_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._tried_open = False
        if len(collection) < 3:
            self._disable(f"collection name {collection!r} is shorter than 3 characters")
            return
        if not lazy:
            self._ensure_open()

    @classmethod
    def disabled(cls, reason: str) -> ResearchMemory:
        """A memory that remembers nothing (e.g. switched off by config)."""
        mem = cls.__new__(cls)
        mem.path, mem.embedding, mem.reason, mem.notice = None, HashingEmbedding(), None, None
        mem.lock_wait_s, mem._collection_name = 0.0, COLLECTION
        mem._col, mem._thread_lock = None, threading.Lock()
        mem._open_lock, mem._tried_open = threading.Lock(), True
        mem._disable(reason, warn=False)
        return mem

    # ---- plumbing

    @property
    def available(self) -> bool:
        """Whether the store works; a lazy memory opens it here."""
        return self._ensure_open()

    @property
    def opened(self) -> bool:
        """Whether opening was tried (always, unless ``lazy`` and nothing needed it yet)."""
        return self._tried_open

    def _ensure_open(self) -> bool:
        with self._open_lock:
            if not self._tried_open:
                self._tried_open = True
                error = None if self.reason else chroma_import_error()
                if error:
                    self._disable(error)
                elif self.reason is None:
                    self._guarded("open", self._open, None)
        return self._col is not None and self.reason is None

    def _ruled_out(self, symbols: Sequence[str], sector: str | None = None) -> bool:
        """A lazy memory not opened yet whose index says no record is about ``symbols`` or
        ``sector``: the answer is empty without opening the store."""
        return not self._tried_open and not store_index.may_hold(self.path, symbols, sector)

    def status(self) -> dict[str, Any]:
        if not self._tried_open and self.reason is None:
            return {"path": str(self.path), "available": None, "opened": False,
                    "reason": "not opened: nothing this run needed it", "notice": None,
                    "embedding": EMBEDDING_NAME, "records": None}  # fmt: skip
        return {
            "path": str(self.path) if self.path else None,
            "available": self.available,
            "reason": self.reason,
            "notice": self.notice,
            "embedding": EMBEDDING_NAME,
            "records": self.count() if self.available else 0,
        }

    def _disable(self, reason: str, *, warn: bool = True) -> None:
        self._col = None
        self.reason = reason
        if warn:
            log.warning("research memory disabled: %s", reason)

    def _open(self) -> None:
        """Under the store's lock. A store a process died inside of, or not yet verified by
        this version, is probed in a subprocess first (``swarm.memory.safety``)."""
        self.path.mkdir(parents=True, exist_ok=True)
        fresh = not (self.path / store_index.DB_FILE).exists()
        if safety.needs_probe(self.path):
            found = safety.probe(self.path, self._collection_name)
            if found.verdict.corrupt:
                self._recover(found)
                return
            if found.verdict is safety.Verdict.SOUND:
                safety.mark_verified(self.path)
            else:  # could not check: open as before; Chroma's own error degrades memory
                log.warning("research memory not checked before opening: %s", found.detail)
        with safety.in_use(self.path):
            col = self._collection()
            col.count()  # touches the store: a corrupt database fails here, not later
        self._col = col
        if fresh:
            safety.mark_verified(self.path)

    def _client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        return chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )

    def _forget_client(self) -> None:
        """Chroma keeps one client per folder path for the life of the process: one opened
        here before the folder was moved aside would still serve the old files. Private
        API, hence the guard: without it, only a process that opened the store earlier
        would see the old records until it exits."""
        with contextlib.suppress(Exception):
            from chromadb.api.shared_system_client import SharedSystemClient

            SharedSystemClient._identifier_to_system.pop(str(self.path), None)

    def _collection(self, client: Any = None) -> Any:
        self.embedding = chroma_embedding_class()(self.embedding.dim)
        return (client or self._client()).get_or_create_collection(
            self._collection_name,
            embedding_function=self.embedding,
            configuration={"hnsw": {"space": "cosine"}},
        )

    def _recover(self, found: safety.ProbeResult) -> None:
        """The store cannot be opened here: rebuild it from the records SQLite still holds,
        keep the old folder beside it, and say so in one line. Never raises past the guard;
        an empty store is the floor, no memory the last resort."""
        try:
            rescued = safety.salvage(self.path, self._collection_name)
            lost = None
        except Exception as exc:  # an unreadable database: start empty, keep the folder
            rescued = safety.Salvaged([], [], [])
            lost = f"{type(exc).__name__}: {str(exc)[:120]}"
        aside = safety.quarantine_name(self.path)
        self.path.rename(aside)
        self.path.mkdir(parents=True)
        self._forget_client()
        try:
            client = self._client()
        except Exception as exc:
            raise RuntimeError(
                f"could not start a new store ({type(exc).__name__}: {exc}); "
                f"the old one is kept at {aside}"
            ) from exc
        try:
            with safety.in_use(self.path):
                col = self._collection(client)
                for i in range(0, len(rescued.ids), REBUILD_BATCH):
                    col.upsert(
                        ids=rescued.ids[i : i + REBUILD_BATCH],
                        documents=rescued.documents[i : i + REBUILD_BATCH],
                        metadatas=rescued.metadatas[i : i + REBUILD_BATCH],
                    )
                kept = int(col.count())
        except Exception as exc:  # the rebuild failed: an empty store, the records stay aside
            lost = f"{type(exc).__name__}: {str(exc)[:120]}"
            try:
                with safety.in_use(self.path):
                    with contextlib.suppress(Exception):
                        client.delete_collection(self._collection_name)
                    col = self._collection(client)
                    kept = int(col.count())
            except Exception as again:
                raise RuntimeError(
                    f"could not rebuild it ({lost}) nor start it empty "
                    f"({type(again).__name__}: {again}); the old one is kept at {aside}"
                ) from again
        self._col = col
        safety.mark_verified(self.path)
        if lost is None:
            what = f"rebuilt it with {kept} of {len(rescued.ids)} records"
        else:
            what = f"started an empty store (rebuild failed: {lost})"
        self.notice = (
            f"research memory at {self.path} was unsound ({found.detail}): {what}; "
            f"the old folder is kept at {aside}"
        )
        log.warning("%s", self.notice)

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
        if what != "open" and not self._ensure_open():
            return default
        with self._thread_lock:
            try:
                with self._exclusive():
                    current = store_index.is_current(self.path, store_index.read_index(self.path))
                    if what == "open":  # checks for a dead writer before marking its own use
                        out = fn()
                    else:
                        with safety.in_use(self.path):
                            out = fn()
                    self._sync_index(rebuild=not current)
                    return out
            except Exception as exc:  # memory must never kill a run
                self._disable(
                    f"{what} failed at {self.path}: {type(exc).__name__}: {str(exc)[:200]}"
                )
                return default

    def _sync_index(self, *, rebuild: bool) -> None:
        """After an operation, under the lock: stamp the index with the database as it is now,
        first rebuilding it from the store when it was not current before the operation (a
        first open, or a writer that does not keep it)."""
        idx = None if rebuild else store_index.read_index(self.path)
        if idx is None:
            idx = store_index.StoreIndex()
            idx.add(self._col.get(include=["metadatas"])["metadatas"] or [])
        stamp = store_index.db_stamp(self.path)
        if rebuild or idx.stamp != stamp:
            idx.stamp = stamp
            store_index.write_index(self.path, idx)

    def _note_keys(self, recs: list[Record]) -> None:
        """Before a write, under the lock: its symbols and sectors go into the index first,
        so the index never misses a stored record (see ``swarm.memory.index``)."""
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
