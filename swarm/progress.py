"""Progress lines on stderr, so stdout stays free for the run folder's path."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# Seconds without a line after which a long silent stage (research, a screen, one slow fold,
# the holdout) says it is still alive: a user cannot tell a busy run from a hung one.
HEARTBEAT_S = 60.0


class Progress:
    """Stage lines and a batch counter: ``tick`` once per finished job (the pool streams each
    job's result as it is done), a line at every fifth of the batch and at least every
    ``interval_s`` while it runs. ``warn`` lines are shown even with ``quiet``; ``heartbeat``
    says a stage is still running when nothing was printed for ``HEARTBEAT_S``."""

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
        self._last_emit = self._t0
        self._stage = "start"

    @property
    def done(self) -> int:
        """Backtests done in the current batch."""
        return self._done

    def stage(self, name: str, message: str) -> None:
        """Enter stage ``name`` and print its message."""
        self._stage = name
        self._emit(f"[{name}] {message}")

    def warn(self, message: str) -> None:
        """A line the user must see (data caveats, repairs), --quiet or not."""
        self._emit(f"[warning] {message}", always=True)

    @contextmanager
    def heartbeat(self, every_s: float = HEARTBEAT_S) -> Iterator[None]:
        """While the block runs, a ``[heartbeat]`` line after every ``every_s`` of silence."""
        if self.quiet or every_s <= 0:
            yield
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(min(every_s, 5.0)):
                silent = time.monotonic() - self._last_emit
                if silent >= every_s:
                    running = self._done < self._total
                    batch = f", backtests {self._done}/{self._total}" if running else ""
                    self._emit(
                        f"[heartbeat] still in {self._stage}{batch}; nothing new for {silent:.0f}s"
                    )

        thread = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=1.0)

    def start_batch(self, total: int) -> None:
        """Start counting a batch of ``total`` backtests (a line every fifth of them)."""
        with self._lock:
            self._done, self._total = 0, total
            self._stage = "backtest"
            self._next_report = max(1, total // 5)
            self._last_line = time.monotonic()

    def tick(self, label: str = "backtests") -> None:
        """Count one finished backtest; print a line every fifth of the batch or every
        ``interval_s``."""
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

    def _emit(self, line: str, *, always: bool = False) -> None:
        if self.quiet and not always:
            return
        now = time.monotonic()
        with self._lock:
            self._last_emit = now
            print(f"{now - self._t0:7.1f}s {line}", file=self.stream, flush=True)
