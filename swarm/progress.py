"""Progress lines on stderr, so stdout stays free for the run folder's path."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """Stage lines and a batch counter: ``tick`` once per finished job (the pool streams each
    job's result as it is done), a line at every fifth of the batch and at least every
    ``interval_s`` while it runs."""

    def __init__(
        self, stream: TextIO | None = None, *, quiet: bool = False, interval_s: float = 10.0
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._done = 0
        self._total = 0
        self._next_report = 0
        self._last_line = self._t0

    @property
    def done(self) -> int:
        return self._done

    def stage(self, name: str, message: str) -> None:
        self._emit(f"[{name}] {message}")

    def start_batch(self, total: int) -> None:
        with self._lock:
            self._done, self._total = 0, total
            self._next_report = max(1, total // 5)
            self._last_line = time.monotonic()

    def tick(self, label: str = "backtests") -> None:
        now = time.monotonic()
        with self._lock:
            self._done += 1
            done, total = self._done, self._total
            report = (
                done >= self._next_report
                or done == total
                or now - self._last_line >= self.interval_s
            )
            if report:
                self._next_report = done + max(1, total // 5)
                self._last_line = now
        if report:
            self._emit(f"[backtest] {label} done {done}/{total}")

    def _emit(self, line: str) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self._t0
        with self._lock:
            print(f"{elapsed:7.1f}s {line}", file=self.stream, flush=True)
