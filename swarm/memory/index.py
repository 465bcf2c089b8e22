"""What the store is about, in a small JSON file beside it: the symbol flags and sectors its
records carry, so a caller can tell without opening Chroma that a recall would find nothing.

Why: importing chromadb and opening a store costs most of a second, more than a one-shot
analysis spends deciding. :func:`may_hold` answers "could any record match these symbols
or this sector?" from the folder alone:

- no ``chroma.sqlite3``: no store, no record;
- an index whose stamp (the database file's size, mtime and change counter when the index
  was last checked) matches the file, and that names none of the symbols' flags or the sector: no
  record can match (recall filters on exactly those keys);
- anything else (no index, an unreadable one, a database changed by a writer that does not
  keep the index): maybe, so the store is opened, and the index rebuilt from it.

The store keeps the index under its cross-process lock: the keys of a write are added before
the write (the index is always a superset: a crash in between costs an open, never a missed
record), and the stamp is refreshed after every operation (Chroma touches the file even on
open). Deletions are never taken out: a stale key only costs an open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.memory.records import flag

INDEX_FILE = "swarm-memory-index.json"
DB_FILE = "chroma.sqlite3"  # Chroma's database inside a PersistentClient folder
VERSION = 1
SYMBOL_PREFIX = "sym_"


@dataclass
class StoreIndex:
    """The symbol flags (``sym_AAPL``) and sectors of every record ever written."""

    symbol_flags: set[str] = field(default_factory=set)
    sectors: set[str] = field(default_factory=set)
    stamp: list[int] | None = None  # db_stamp() when the index was last checked

    def add(self, metadatas: Iterable[Mapping[str, Any] | None]) -> bool:
        """Take in the keys of these records; True when something was new."""
        before = (len(self.symbol_flags), len(self.sectors))
        for meta in metadatas:
            for key, value in (meta or {}).items():
                if key.startswith(SYMBOL_PREFIX) and value is True:
                    self.symbol_flags.add(key)
            if isinstance((meta or {}).get("sector"), str):
                self.sectors.add(meta["sector"])
        return (len(self.symbol_flags), len(self.sectors)) != before

    def covers(self, symbols: Sequence[str], sector: str | None) -> bool:
        """Could a record match any of ``symbols`` (upper case) or ``sector``?"""
        return any(flag(SYMBOL_PREFIX, s) in self.symbol_flags for s in symbols) or (
            sector is not None and sector in self.sectors
        )


def db_stamp(store: Path) -> list[int] | None:
    """[size, mtime_ns, change counter] of the store's database; None when there is none.
    SQLite bumps the header's change counter on every commit in rollback-journal mode (the
    mode Chroma uses), so a write inside one mtime tick is still seen."""
    db = Path(store) / DB_FILE
    try:
        st = db.stat()
        with open(db, "rb") as fh:
            header = fh.read(28)
    except OSError:
        return None
    counter = int.from_bytes(header[24:28], "big") if len(header) == 28 else -1
    return [st.st_size, st.st_mtime_ns, counter]


def read_index(store: Path) -> StoreIndex | None:
    """The index, or None when it is missing or unreadable."""
    try:
        raw = json.loads((Path(store) / INDEX_FILE).read_text(encoding="utf-8"))
        if raw.get("version") != VERSION:
            return None
        stamp = raw.get("stamp")
        return StoreIndex(
            symbol_flags=set(raw["symbol_flags"]),
            sectors=set(raw["sectors"]),
            stamp=[int(x) for x in stamp] if stamp else None,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_index(store: Path, index: StoreIndex) -> None:
    """Atomically (a reader outside the lock sees the old file or the new one)."""
    path = Path(store) / INDEX_FILE
    tmp = path.with_name(f".{INDEX_FILE}.{os.getpid()}.tmp")
    body = {
        "version": VERSION,
        "symbol_flags": sorted(index.symbol_flags),
        "sectors": sorted(index.sectors),
        "stamp": index.stamp,
    }
    tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def is_current(store: Path, index: StoreIndex | None) -> bool:
    """The index describes the database as it is now (nobody wrote past it)."""
    return index is not None and index.stamp is not None and index.stamp == db_stamp(store)


def may_hold(store: Path, symbols: Sequence[str], sector: str | None = None) -> bool:
    """False only when no record of the store at ``store`` can be about any of ``symbols``
    or ``sector``, known without opening it; True means "open it and look"."""
    if db_stamp(store) is None:
        return False
    index = read_index(store)
    if not is_current(store, index):
        return True
    assert index is not None
    return index.covers(sorted({s.upper() for s in symbols}), sector)
