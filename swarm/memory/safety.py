"""Opening a store that a killed process may have left half-written, without crashing.

Why: chromadb's Rust core does not raise on a vector (HNSW) segment left torn by a process
killed mid-flush: it segfaults the whole interpreter on the first operation that replays its
log into it or searches it (chroma-core/chroma #7238, #6949, #6979). The lab supports killing a run and resuming it,
so a dead writer must cost at most one recovery, never every later run.

How, cheaply (the common path: one file read at open, one tiny fsync'd file per operation,
~0.6 ms; no subprocess):

- every operation on the store runs inside :func:`in_use`: a ``writing`` marker is created
  (fsync'd) before and removed after it returns, so a marker found at open means a process
  died inside an operation (reads count too: Chroma flushes its vector segment when it
  replays its log on a read);
- a ``verified`` marker names the version of this check that last found the store sound; a
  store without it (written before this check existed) is checked once;
- only a store with a ``writing`` marker or no current ``verified`` one is checked by
  :func:`probe` in a subprocess (open, count, one get, one query: a torn segment with no log
  to replay crashes only on a query); a probe killed by a signal, hung past its timeout, or
  raising inside Chroma means the store cannot be opened here;
- such a store is rebuilt from what SQLite still holds (:func:`salvage`: documents and
  metadata live in ``chroma.sqlite3``; the embeddings are ours and recomputed), and the old
  folder is kept beside it under :func:`quarantine_name`. Nothing is deleted.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

WRITING_MARKER = "swarm-memory.writing"
VERIFIED_MARKER = "swarm-memory.verified"
SAFETY_VERSION = "swarm-memory-safety-v1"
PROBE_TIMEOUT_S = 60.0  # a sound 26 MB store probes in ~2 s; a loaded 2-core box is slower
DOCUMENT_KEY = "chroma:document"  # where Chroma keeps a record's document among its metadata
_QUEUE_OPS = {0: "add", 1: "update", 2: "upsert", 3: "delete"}  # chromadb's embeddings_queue


class Verdict(enum.Enum):
    SOUND = "sound"
    CRASHED = "crashed"  # killed by a signal (the segfault)
    HUNG = "hung"  # past the timeout
    FAILED = "failed"  # Chroma raised opening it
    UNCHECKED = "unchecked"  # the probe itself could not run (no chromadb, no interpreter)

    @property
    def corrupt(self) -> bool:
        """Whether the probe found the store broken: it crashed, hung or failed to open."""
        return self in (Verdict.CRASHED, Verdict.HUNG, Verdict.FAILED)


@dataclass(frozen=True)
class ProbeResult:
    verdict: Verdict
    detail: str  # the signal, the timeout or the error, for the one warning line


# ---- markers


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def needs_probe(store: Path) -> bool:
    """An existing database that a process died inside of, or that this version has not
    verified yet. A folder without a database needs nothing (it is created fresh)."""
    store = Path(store)
    if not (store / "chroma.sqlite3").exists():
        return False
    if (store / WRITING_MARKER).exists():
        return True
    try:
        return (store / VERIFIED_MARKER).read_text(encoding="utf-8").strip() != SAFETY_VERSION
    except OSError:
        return True


def mark_verified(store: Path) -> None:
    """The store was found sound (or created) by this version: no probe at the next open."""
    store = Path(store)
    (store / VERIFIED_MARKER).write_text(SAFETY_VERSION + "\n", encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        (store / WRITING_MARKER).unlink()


@contextlib.contextmanager
def in_use(store: Path) -> Iterator[None]:
    """The ``writing`` marker around one operation: durable before it starts, removed only
    when it returns (an operation that raised leaves it, so the next open checks)."""
    store = Path(store)
    marker = store / WRITING_MARKER
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(store)
    yield
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()  # the folder may have been quarantined meanwhile: nothing to remove


# ---- probe

_PROBE = """
import json, signal, sys
signal.alarm(int(sys.argv[3]))  # dies on its own even if its parent was killed meanwhile
import chromadb
from chromadb.config import Settings
import swarm.memory.embedding as emb
path, name = sys.argv[1], sys.argv[2]
try:
    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    names = [c.name for c in client.list_collections()]
    if name in names:
        col = client.get_collection(name, embedding_function=emb.chroma_embedding_class()())
        if col.count():
            got = col.get(limit=1, include=["embeddings"])
            col.query(query_embeddings=[list(got["embeddings"][0])], n_results=1)
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:200]}"}))
    sys.exit(3)
print(json.dumps({"ok": True}))
"""
_PROBE_RAISED = 3


def _import_root() -> str:
    """The folder that holds the ``swarm`` package, for the probe's ``sys.path``."""
    return str(Path(__file__).resolve().parents[2])


def probe(store: Path, collection: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Open the store in a subprocess, so a segfault or a hang costs that process only."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_import_root(), env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(store), collection, str(int(timeout_s) + 5)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(Verdict.HUNG, f"opening it hung for over {timeout_s:g}s")
    except OSError as exc:
        return ProbeResult(Verdict.UNCHECKED, f"probe not started: {exc}")
    if done.returncode == 0:
        return ProbeResult(Verdict.SOUND, "")
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return ProbeResult(Verdict.CRASHED, f"opening it crashed chromadb ({name})")
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode == _PROBE_RAISED and last.startswith("{"):
        return ProbeResult(
            Verdict.FAILED, f"chromadb failed to open it: {json.loads(last)['error']}"
        )
    tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
    return ProbeResult(Verdict.UNCHECKED, f"probe exited {done.returncode}: {tail}")


# ---- salvage


@dataclass
class Salvaged:
    ids: list[str]
    documents: list[str]
    metadatas: list[dict[str, Any]]


def _value(row: sqlite3.Row) -> Any:
    if row["bool_value"] is not None:
        return bool(row["bool_value"])
    for key in ("string_value", "int_value", "float_value"):
        if row[key] is not None:
            return row[key]
    return None


def salvage(store: Path, collection: str) -> Salvaged:
    """Every record of ``collection`` as SQLite holds it: the metadata segment, then the
    log entries it had not applied yet. Read-only; raises when SQLite cannot be read."""
    uri = f"file:{Path(store) / 'chroma.sqlite3'}?mode=ro"
    con = sqlite3.connect(uri, uri=True, timeout=5.0)
    con.row_factory = sqlite3.Row
    try:
        col = con.execute("SELECT id FROM collections WHERE name = ?", (collection,)).fetchone()
        if col is None:
            return Salvaged([], [], [])
        seg = con.execute(
            "SELECT id FROM segments WHERE collection = ? AND scope = 'METADATA'", (col["id"],)
        ).fetchone()
        recs: dict[str, dict[str, Any]] = {}
        applied = -1
        if seg is not None:
            rowid_to_id = {
                r["id"]: r["embedding_id"]
                for r in con.execute(
                    "SELECT id, embedding_id FROM embeddings WHERE segment_id = ? ORDER BY id",
                    (seg["id"],),
                )
            }
            recs = {eid: {} for eid in rowid_to_id.values()}
            for r in con.execute(
                "SELECT m.* FROM embedding_metadata m JOIN embeddings e ON e.id = m.id "
                "WHERE e.segment_id = ?",
                (seg["id"],),
            ):
                recs[rowid_to_id[r["id"]]][r["key"]] = _value(r)
            for r in con.execute(
                "SELECT a.* FROM embedding_metadata_array a JOIN embeddings e ON e.id = a.id "
                "WHERE e.segment_id = ? ORDER BY a.rowid",
                (seg["id"],),
            ):
                recs[rowid_to_id[r["id"]]].setdefault(r["key"], []).append(_value(r))
            got = con.execute(
                "SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (seg["id"],)
            ).fetchone()
            applied = int(got["seq_id"]) if got and isinstance(got["seq_id"], int) else -1
        topic = f"%/{col['id']}"
        for r in con.execute(
            "SELECT operation, id, metadata FROM embeddings_queue "
            "WHERE seq_id > ? AND topic LIKE ? ORDER BY seq_id",
            (applied, topic),
        ):
            op = _QUEUE_OPS.get(r["operation"])
            meta = json.loads(r["metadata"]) if r["metadata"] else {}
            if op == "delete":
                recs.pop(r["id"], None)
            elif op == "update":
                if r["id"] in recs:
                    recs[r["id"]].update(meta)
            elif op == "upsert" or (op == "add" and r["id"] not in recs):
                recs[r["id"]] = meta
    finally:
        con.close()
    ids, docs, metas = [], [], []
    for rid, meta in recs.items():
        meta = {k: v for k, v in meta.items() if v is not None}
        ids.append(rid)
        docs.append(str(meta.pop(DOCUMENT_KEY, "") or ""))
        metas.append(meta)
    return Salvaged(ids, docs, metas)


def quarantine_name(store: Path, now: datetime | None = None) -> Path:
    """``<store>.corrupt-<UTC timestamp>`` beside the store, never an existing path."""
    store = Path(store)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = store.with_name(f"{store.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = store.with_name(f"{store.name}.corrupt-{stamp}-{n}")
    return target
