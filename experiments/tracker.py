"""Append-only, crash-safe, idempotent experiment log (JSONL).

Each record is written whole: one ``write`` of the full line to a file opened in
append mode, then ``fsync``. A crash can therefore only leave a torn *last* line,
which is detected and cut when the file is opened again.

Every record carries a deterministic content id, ``record_id``: the sha256 of the
fields that name it (kind, iteration, variant, symbol), never of timestamps. The
tracker loads the ids already in the file when it opens and skips an append whose id
is there, so a resumed run that replays a step cannot duplicate a record.

Fields that differ between two otherwise identical runs are documented in
``VOLATILE_FIELDS`` (wall-clock timestamps and the run id); drop them to compare runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from backtest.metrics import strict_json

ID_FIELDS = ("kind", "iteration", "variant_id", "symbol")
TIMESTAMP_FIELDS = ("recorded_at",)
# Fields that legitimately differ between a run and its rerun: when, which folder, and how
# many LLM calls were replayed from the cache rather than made.
VOLATILE_FIELDS = (*TIMESTAMP_FIELDS, "run_id", "llm_replay")


def record_id(record: dict[str, Any]) -> str:
    """The record's content id: sha256 over ``ID_FIELDS`` (absent fields count as null).

    A record with none of those fields is identified by its whole content, timestamps and
    run id aside.
    """
    if any(f in record for f in ID_FIELDS):
        payload: Any = [record.get(f) for f in ID_FIELDS]
    else:
        payload = strip_volatile([{k: v for k, v in record.items() if k != "record_id"}])[0]
    key = json.dumps(strict_json(payload), separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ExperimentTracker:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired_bytes = _cut_torn_tail(self.path)
        self._lock = threading.Lock()
        self._ids: set[str] = {r.get("record_id") or record_id(r) for r in read_records(self.path)}
        self.skipped = 0  # appends skipped because their record was already in the file

    def __contains__(self, rid: str) -> bool:
        return rid in self._ids

    def append(self, record: dict[str, Any]) -> bool:
        """Append ``record`` (with its ``record_id``) unless it is already in the file.

        Returns True when written, False when skipped as a duplicate.
        """
        rid = record.get("record_id") or record_id(record)
        record = {**record, "record_id": rid}
        line = json.dumps(strict_json(record), sort_keys=True, allow_nan=False, default=str) + "\n"
        with self._lock:
            if rid in self._ids:
                self.skipped += 1
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._ids.add(rid)
        return True

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record written so far, in order."""
        yield from read_records(self.path)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON records of a JSONL file, blank lines skipped; none when the file does not exist."""
    if not Path(path).exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def strip_volatile(
    records: Iterable[dict[str, Any]], fields: Iterable[str] = VOLATILE_FIELDS
) -> list[dict[str, Any]]:
    """Records without their timestamp and run-id fields, at any depth: what two runs with
    the same inputs and seed must agree on."""
    drop = set(fields)

    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if k not in drop}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return [clean(r) for r in records]


def _cut_torn_tail(path: Path) -> int:
    """Truncate a last line that is incomplete or not valid JSON; return bytes cut."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    data = path.read_bytes()
    keep = len(data)
    if not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1  # 0 when the only line is torn
    else:
        last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
        try:
            json.loads(data[last_start:])
        except ValueError:
            keep = last_start
    if keep < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return len(data) - keep
