"""The run's checkpointer: LangGraph's SQLite saver in the run folder, restoring only the
state's own types (``swarm.state.CHECKPOINT_TYPES``), counting its writes and timing the
database (the cost of checkpointing, reported per run)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from experiments.runfolder import RunFolder
from swarm.state import checkpoint_allowlist

CHECKPOINT_FILE = "checkpoints.sqlite"


class _TimedLock:
    """The saver's lock, adding up how long the database was held: the time checkpointing
    really cost (the calls' own durations also count threads waiting for one another)."""

    def __init__(self, stats: dict[str, float]) -> None:
        self._lock = threading.Lock()
        self._stats = stats
        self._t0 = 0.0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._stats["db_s"] += time.perf_counter() - self._t0
        self._lock.release()


class TimedSqliteSaver(SqliteSaver):
    """``SqliteSaver`` that counts its writes and times the database: the cost of
    checkpointing, measured per run."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        # Restores the state's own models (swarm.state) and nothing else from msgpack.
        super().__init__(
            conn, serde=JsonPlusSerializer(allowed_msgpack_modules=checkpoint_allowlist())
        )
        self.stats = {"checkpoints": 0, "writes": 0, "db_s": 0.0}
        self.lock = _TimedLock(self.stats)  # SqliteSaver takes self.lock around every access

    def put(self, config, checkpoint, metadata, new_versions):
        """Save a checkpoint, counted."""
        self.stats["checkpoints"] += 1
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        """Save a task's pending writes, counted."""
        self.stats["writes"] += 1
        return super().put_writes(config, writes, task_id, task_path)


@contextmanager
def checkpointer(run: RunFolder) -> Iterator[TimedSqliteSaver]:
    """The run's checkpointer, in the run folder. SqliteSaver serialises access with a lock."""
    conn = sqlite3.connect(str(run.path(CHECKPOINT_FILE)), check_same_thread=False)
    try:
        # WAL: a committed checkpoint survives a killed process, with fewer fsyncs.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        yield TimedSqliteSaver(conn)
    finally:
        conn.close()


def db_bytes(path: Path) -> int:
    """Size of the checkpoint database and its side files (WAL, shared memory)."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
