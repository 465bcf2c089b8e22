"""Bars shipped to a Ray cluster once per run, through the object store, not once per task.

A develop run submits hundreds of jobs over the same few frames (each symbol's in-sample
bars, the winner's holdout bars). Pickled into every task, a symbol's window crosses to the
cluster once per chunk and iteration; here each distinct frame is ``ray.put`` once for the
backend's life and a task carries only the jobs' code, folds and a slot number per feed,
with the frames' references as top-level arguments (Ray resolves those in the worker, from
its node's object store: a node fetches a frame once). The worker rebuilds the jobs and the
sandbox cuts each job's window there, as a fresh copy (``backtest.engine.window_job``), so
no child is fed more than its window. Frames are keyed by identity and kept referenced while
shipped, so an id is never reused for another frame.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pandas as pd

from backtest.contracts import BacktestJob
from backtest.sandbox import SandboxOutcome, SandboxPolicy, sandbox_batch_task

# Frames kept shipped at once (least recently used dropped first): a run has a few dozen; a
# caller that made a new frame per job cannot grow the object store without bound.
MAX_FRAMES = 512


@dataclass(frozen=True)
class Slot:
    """A feed's place in the task's frame arguments (``Bars.pack``)."""

    index: int


@dataclass
class ShippingStats:
    """What crossed to the cluster: frames put (once each) and their bytes, tasks sent."""

    frames: int = 0
    frame_bytes: int = 0
    tasks: int = 0
    jobs: int = 0


class Bars:
    """The run's frames in the object store: ``pack`` a chunk of jobs for a task."""

    def __init__(self, ray: Any) -> None:
        self._ray = ray
        self._lock = threading.Lock()
        # id(frame) -> (the frame, kept so its id is not reused; its object reference)
        self._shipped: OrderedDict[int, tuple[pd.DataFrame, Any]] = OrderedDict()
        self.stats = ShippingStats()

    def _ref(self, frame: pd.DataFrame) -> Any:
        with self._lock:
            held = self._shipped.get(id(frame))
            if held is None:
                held = (frame, self._ray.put(frame))
                self._shipped[id(frame)] = held
                self.stats.frames += 1
                self.stats.frame_bytes += int(frame.memory_usage(index=True, deep=True).sum())
                while len(self._shipped) > MAX_FRAMES:
                    self._shipped.popitem(last=False)
            else:
                self._shipped.move_to_end(id(frame))
            return held[1]

    def pack(self, jobs: list[BacktestJob]) -> tuple[list[BacktestJob], list[Any]]:
        """The jobs with each frame replaced by its ``Slot``, and the slots' references in
        order (pass them as the task's trailing arguments)."""
        refs: list[Any] = []
        slots: dict[int, Slot] = {}

        def slot(frame: pd.DataFrame) -> Slot:
            if id(frame) not in slots:
                slots[id(frame)] = Slot(len(refs))
                refs.append(self._ref(frame))
            return slots[id(frame)]

        packed = [job.map_bars(slot) for job in jobs]
        with self._lock:
            self.stats.tasks += 1
            self.stats.jobs += len(jobs)
        return packed, refs

    def clear(self) -> None:
        """Forget the frames (their references go: the object store may free them)."""
        with self._lock:
            self._shipped.clear()


def unpack(jobs: list[BacktestJob], frames: tuple[pd.DataFrame, ...]) -> list[BacktestJob]:
    """In the worker: each job with its slots replaced by the resolved frames."""

    def frame(bars: Any) -> Any:
        return frames[bars.index] if isinstance(bars, Slot) else bars

    return [job.map_bars(frame) for job in jobs]


def shipped_batch_task(
    jobs: list[BacktestJob], policy: SandboxPolicy, *frames: pd.DataFrame
) -> list[SandboxOutcome]:
    """The Ray task of a packed chunk: the jobs rebuilt on the resolved frames, then the
    pool's sandboxed batch (each child fed a fresh copy of its job's window)."""
    return sandbox_batch_task(unpack(jobs, frames), policy)
