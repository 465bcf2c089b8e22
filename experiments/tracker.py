"""Append-only, crash-safe experiment log (JSONL).

Each record is written whole: one ``write`` of the full line to a file opened in
append mode, then ``fsync``. A crash can therefore only leave a torn *last* line,
which is detected and cut when the file is opened again.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class ExperimentTracker:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired_bytes = _cut_torn_tail(self.path)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(_finite(record), sort_keys=True, allow_nan=False, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self) -> Iterator[dict[str, Any]]:
        yield from read_records(self.path)


def _finite(obj: Any) -> Any:
    """NaN/inf are not JSON: an undefined number is recorded as null, as in the contracts."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    if not Path(path).exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


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
