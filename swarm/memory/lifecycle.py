"""A store's life: opened (at once or lazily), repaired, guarded, or disabled with a reason.

Memory is an aid, never a dependency: a store that cannot be opened (corrupt, locked,
unwritable) degrades to "no memory" with a logged reason and every call becomes a no-op.
Each operation runs under the store's cross-process lock (``swarm.memory.locking``) and
stamps the store's index (``swarm.memory.index``) afterwards. Opening costs most of a second
(chromadb's imports, then the store): a ``lazy`` memory opens at its first use. A store a
killed process may have left torn (Chroma segfaults on some) is checked in a subprocess
first and, if unsound, rebuilt from its SQLite records with the old folder kept aside
(``swarm.memory.safety``). The store's operations are ``swarm.memory.store``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from swarm.memory import index as store_index
from swarm.memory import locking, safety, sidecar
from swarm.memory.embedding import (
    HashingEmbedding,
    chroma_embedding_class,
    chroma_import_error,
)
from swarm.memory.locking import LOCK_WAIT_S

log = logging.getLogger("swarm.memory")

COLLECTION = "swarm_memory"  # Chroma needs >= 3 characters
REBUILD_BATCH = 1000  # records per upsert when rebuilding a store (Chroma caps a batch)


class StoreLifecycle:
    """Opening, repairing and guarding a store; ``swarm.memory.store.ResearchMemory`` adds
    what is stored and recalled. Never raises once constructed: a failure disables it.
    ``lazy``: open the store at its first use (``available`` counts as a use)."""

    def __init__(
        self,
        path: Path,
        *,
        collection: str = COLLECTION,
        lock_wait_s: float = LOCK_WAIT_S,
        lazy: bool = False,
    ) -> None:
        self.path = path
        self.embedding = HashingEmbedding()
        self.reason: str | None = None
        self.notice: str | None = None  # what opening had to repair, for the run's progress
        self.lock_wait_s = lock_wait_s
        self._written: set[str] = set()  # run ids the current operation wrote (sidecar.restamp)
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
    def disabled(cls, reason: str) -> Self:
        """A memory that remembers nothing (e.g. switched off by config)."""
        mem = cls.__new__(cls)
        mem.path, mem.embedding, mem.reason, mem.notice = None, HashingEmbedding(), None, None
        mem.lock_wait_s, mem._collection_name = 0.0, COLLECTION
        mem._col, mem._thread_lock = None, threading.Lock()
        mem._open_lock, mem._tried_open = threading.Lock(), True
        mem._disable(reason, warn=False)
        return mem

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

    def _exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Cross-process lock on the store, then a SQLite probe: fail fast, never hang."""
        assert self.path is not None
        return locking.exclusive(self.path, self.lock_wait_s)

    def _guarded(self, what: str, fn, default):
        if what != "open" and not self._ensure_open():
            return default
        with self._thread_lock:
            try:
                with self._exclusive():
                    current = store_index.is_current(self.path, store_index.read_index(self.path))
                    sidecars = sidecar.current(self.path)
                    self._written = set()
                    if what == "open":  # checks for a dead writer before marking its own use
                        out = fn()
                    else:
                        with safety.in_use(self.path):
                            out = fn()
                    self._sync_index(rebuild=not current)
                    sidecar.restamp(self.path, sidecars, self._written)
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
