"""A JSON copy, beside the store, of the records whose run id has one prefix (the decision
reviews), so a one-shot analysis reads them without importing chromadb or opening the store.

Why: chromadb's import and the open cost ~0.6 s, a third of a ``swarm.analyze`` run, only to
read a handful of reviews. Chroma stays the store of record; the sidecar is a cache of it.

Consistency rule: the sidecar is trusted only while its ``stamp`` equals the database's stamp
now (:func:`swarm.memory.index.db_stamp`: size, mtime and SQLite change counter). It is
written under the store's lock, right after the write it describes, with the stamp taken
then. So anything else that touched the database since (a writer that does not keep the
sidecar, older code, even an open: Chroma bumps the counter on open) makes it stale; a crash
between the Chroma write and the sidecar's leaves it stale; a store rebuilt by
``swarm.memory.safety`` is a new folder (the old one, sidecar included, is moved aside). A
stale, missing or unreadable sidecar (the last one logged) is never read: the caller reads
the store and has the sidecar rebuilt from it (:func:`refresh`), so an answer never depends
on the sidecar, only its cost does.

Written atomically (a temporary file, then ``os.replace``): a reader without the lock sees
the old file or the new one. :func:`remember` and :func:`refresh` run inside the store's
guarded operation (its cross-process lock and ``writing`` marker) through the store's
package-internal ``_guarded`` / ``_col`` (``swarm.memory.lifecycle``) and ``_note_keys``;
keep :func:`remember` in step with ``ResearchMemory._upsert``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from swarm.memory.index import db_stamp
from swarm.memory.records import Record

# ``memory`` below is a ``swarm.memory.store.ResearchMemory`` (not imported: the store's
# lifecycle imports this module).
ResearchMemory = Any

log = logging.getLogger("swarm.memory")

VERSION = 1
KIND = "lesson"  # the only kind a sidecar holds (reviews are lessons)


@dataclass(frozen=True)
class Row:
    """What a reader of the records needs: the fields of Chroma's record it selects on."""

    id: str
    run_id: str
    symbols: tuple[str, ...]
    outcome: str | None
    text: str


def sidecar_path(store: Path, prefix: str) -> Path:
    """The sidecar JSON file of the store's ``prefix`` collection."""
    return Path(store) / f"swarm-memory-{prefix}.json"


def rows_of(
    ids: Sequence[str],
    docs: Sequence[str | None],
    metas: Sequence[Mapping[str, Any] | None],
    prefix: str,
) -> list[Row]:
    """The lessons among Chroma records (``get`` columns) whose run id starts with prefix."""
    out = []
    for rid, doc, meta in zip(ids, docs, metas, strict=True):
        meta = meta or {}
        run_id = str(meta.get("run_id") or "")
        if meta.get("kind") != KIND or not run_id.startswith(prefix + ":"):
            continue
        syms = tuple(s for s in str(meta.get("symbols", "")).split(",") if s)
        outcome = meta.get("outcome")
        out.append(Row(rid, run_id, syms, None if outcome is None else str(outcome), doc or ""))
    return out


def _row(raw: Mapping[str, Any]) -> Row:
    """One row of the file, its types checked: a damaged row is a torn file, not a crash."""
    row = Row(raw["id"], raw["run_id"], tuple(raw["symbols"]), raw["outcome"], raw["text"])
    strs = [row.id, row.run_id, row.text, *row.symbols]
    if not all(isinstance(x, str) for x in strs) or not isinstance(row.outcome, str | None):
        raise TypeError(f"row {str(raw)[:60]} has a field of the wrong type")
    return row


def read(store: Path, prefix: str) -> list[Row] | None:
    """The rows, or None when the sidecar cannot stand for the store (then read the store).
    No database at all: no record, so ``[]`` (what the store itself would answer)."""
    stamp = db_stamp(store)
    if stamp is None:
        return []
    path = sidecar_path(store, prefix)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("version") != VERSION or raw.get("prefix") != prefix:
            raise ValueError(f"version/prefix {raw.get('version')!r}/{raw.get('prefix')!r}")
        if [int(x) for x in raw["stamp"]] != stamp:
            return None  # someone touched the store since: stale, not torn
        return [_row(r) for r in raw["rows"]]
    except FileNotFoundError:
        return None  # a memory written before sidecars existed: rebuilt at its next read
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning(
            "%s unreadable (%s: %s): reading the store instead; it is rebuilt from it",
            path,
            type(exc).__name__,
            str(exc)[:120],
        )
        return None


def write(store: Path, prefix: str, rows: Iterable[Row], stamp: list[int] | None) -> None:
    """Atomically; rows sorted by id so the same store always gives the same file."""
    path = sidecar_path(store, prefix)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    body = {
        "version": VERSION,
        "prefix": prefix,
        "stamp": stamp,
        "rows": [asdict(r) for r in sorted(rows, key=lambda r: r.id)],
    }
    tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def current(store: Path) -> list[str]:
    """The prefixes of the sidecars that stand for the store now (taken before an operation,
    for :func:`restamp`)."""
    stamp = db_stamp(store)
    if stamp is None:
        return []
    out = []
    for path in sorted(Path(store).glob("swarm-memory-*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("version") == VERSION and [int(x) for x in raw["stamp"]] == stamp:
                out.append(str(raw["prefix"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # unreadable: read() logs it when a reader needs it
    return out


def restamp(store: Path, prefixes: Sequence[str], written_run_ids: Iterable[str]) -> None:
    """After an operation, under the lock: a sidecar that stood for the store before it and
    none of whose records it wrote (an open, which bumps the database's counter; a recall; a
    run's own findings and lessons) still stands for it, so it takes the new stamp. Without
    this, any develop run that opened the shared memory would send the next analysis back to
    chromadb. Writes go through ``_note_keys``, which collects their run ids; a writer that
    bypassed it is not a writer this code has (and would make the sidecar stale, not wrong:
    the stamp is only taken over when the stamp before the operation matched)."""
    written = set(written_run_ids)
    stamp = db_stamp(store)
    for prefix in prefixes:
        if any(r.startswith(prefix + ":") for r in written):
            continue  # remember() kept it itself; anything else leaves it stale
        rows = read_rows_unchecked(store, prefix)
        try:
            if rows is not None:
                write(store, prefix, rows, stamp)
        except OSError as exc:  # stale, not wrong: the next reader reads the store
            log.warning(
                "%s not re-stamped (%s): recalls read the store until it is",
                sidecar_path(store, prefix),
                exc,
            )


def read_rows_unchecked(store: Path, prefix: str) -> list[Row] | None:
    """The rows whatever the stamp (for :func:`restamp`, which checked it before)."""
    try:
        raw = json.loads(sidecar_path(store, prefix).read_text(encoding="utf-8"))
        return [_row(r) for r in raw["rows"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _rebuild(
    memory: ResearchMemory, prefix: str, kept: list[Row] | None, added: Sequence[Record]
) -> None:
    """Under the store's lock: the sidecar as of now. ``kept`` (the sidecar, current before
    ``added`` was written) plus ``added``, or else every matching record read from the store.
    A failure only leaves the sidecar stale (the store answers): logged, never raised."""
    assert memory.path is not None
    try:
        if kept is None:
            got = memory._col.get(where={"kind": KIND}, include=["documents", "metadatas"])
            rows = rows_of(got["ids"], got["documents"] or [], got["metadatas"] or [], prefix)
        else:
            new = rows_of(
                [r[0] for r in added], [r[1] for r in added], [r[2] for r in added], prefix
            )
            rows = list({r.id: r for r in [*kept, *new]}.values())  # an upsert replaces by id
        write(memory.path, prefix, rows, db_stamp(memory.path))
    except Exception as exc:
        log.warning(
            "%s not updated (%s: %s): recalls read the store until it is",
            sidecar_path(memory.path, prefix),
            type(exc).__name__,
            str(exc)[:120],
        )


def remember(memory: ResearchMemory, recs: Sequence[Record], prefix: str) -> int:
    """Upsert ``recs`` and keep the sidecar, in one guarded operation (one lock: no other
    writer can slip between them). Returns what ``remember_lesson`` would: how many."""
    recs = list({r[0]: r for r in recs}.values())  # last one wins, as an upsert would
    if not recs:
        return 0

    def go() -> int:
        assert memory.path is not None
        kept = read(memory.path, prefix)  # current before this write, or None
        memory._note_keys(recs)
        memory._col.upsert(
            ids=[r[0] for r in recs], documents=[r[1] for r in recs], metadatas=[r[2] for r in recs]
        )
        _rebuild(memory, prefix, kept, recs)
        return len(recs)

    return memory._guarded("write", go, 0)


def refresh(memory: ResearchMemory, prefix: str) -> None:
    """Rebuild the sidecar from the store (opened by now: a caller that just read it)."""
    memory._guarded("sidecar rebuild", lambda: _rebuild(memory, prefix, None, []), None)
