"""Cross-process use of a store that fails fast instead of hanging.

Chroma's Rust core holds the GIL while it waits on a locked SQLite file, so a lock held by
another process would hang the run: each operation first takes a file lock beside the store
(bounded wait) and probes SQLite with a short timeout, and gives up cleanly instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_WAIT_S = 5.0  # how long an operation waits for another process's use of the store
SQLITE_PROBE_TIMEOUT_S = 1.0


@contextlib.contextmanager
def exclusive(path: Path, lock_wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Cross-process lock on the store, then a SQLite probe: fail fast, never hang."""
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "swarm-memory.lock", "a+") as fh:
        deadline = time.monotonic() + lock_wait_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"store busy: another process held its lock for {lock_wait_s:g}s"
                    ) from None
                time.sleep(0.05)
        try:
            db = path / "chroma.sqlite3"
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
