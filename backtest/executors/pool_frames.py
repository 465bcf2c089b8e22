"""Bars published once per run for the process pool's workers, as memory-mapped files.

A develop run submits hundreds of jobs over the same few frames. Cutting each chunk's windows
in the driver and pickling them into every task made the driver's batcher thread, and the
pipe, work in proportion to the jobs; on many cores that became the pool's bottleneck. Here
each distinct frame is written once (its OHLCV as float64 and its index, one ``.npy`` file
in a private temporary folder of the backend's life) and a task carries only the jobs'
code, folds and a ``FrameRef`` per feed. The worker maps the file (the page cache holds
it once for every worker: no copy per worker), rebuilds the frame on it without copying,
and the sandbox cuts each job's window there as a fresh copy
(``backtest.engine.window_job``): the child is never fed more than its window. The Ray
backend does the same through its object store (``backtest.executors.ray_shipping``).

A frame is published only when the window a job is fed from the rebuilt frame is exactly
the one it is fed from the original (``publishable``: a sorted, tz-naive ``DatetimeIndex``,
unique columns holding OHLCV as float64 or int64, no ``attrs``); anything else travels as
before, one window per chunk (``share_windows``), or whole when it cannot be sliced, for the
run to report. Frames are keyed by identity and kept referenced
while published, so an id is never reused for another frame.

The folder is removed when the backend closes, or at exit; a driver killed outright (SIGKILL,
the OOM killer) cannot, so the folder's name carries its process id and the next backend to
publish removes the folders of this user's drivers that are no longer running
(``remove_orphans``): a killed 500-symbol run would otherwise leave ~60 MB in the temp dir.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from backtest.books import OHLCV
from backtest.contracts import BacktestJob
from backtest.sandbox import FRAMES_DIR_PREFIX

# Frames kept published at once (least recently used dropped first, once no chunk in flight
# reads it): a run has a few dozen; a caller making a new frame per job cannot fill the disk.
MAX_FRAMES = 512


@dataclass(frozen=True)
class FrameRef:
    """A published frame: where its file is and how to rebuild its index and columns."""

    path: str
    index_dtype: str  # "datetime64[ns]", "datetime64[s]", ...
    index_name: Hashable | None
    columns_name: Hashable | None
    freq: str | None = None  # the index's frequency ("B"), kept by a window cut by iloc


@dataclass
class PublishStats:
    """What was published (once each) and how many jobs crossed as references."""

    frames: int = 0
    frame_bytes: int = 0
    jobs: int = 0


def publishable(frame: Any) -> bool:
    """Whether ``frame`` rebuilt from its published arrays feeds every job exactly the same
    window (``feed_frame``) as the frame itself. Pure."""
    if not isinstance(frame, pd.DataFrame) or frame.attrs:
        return False
    index = frame.index
    if not isinstance(index, pd.DatetimeIndex) or index.tz is not None:
        return False
    if not frame.columns.is_unique or not all(c in frame.columns for c in OHLCV):
        return False
    if not all(frame[c].dtype in (np.float64, np.int64) for c in OHLCV):
        return False
    return bool(index.is_monotonic_increasing)


def frame_arrays(frame: pd.DataFrame) -> np.ndarray:
    """The published form of a ``publishable`` frame: a ``(6, rows)`` int64 array, the
    index's ticks then each OHLCV column's float64 bits (one file, one mapping)."""
    out = np.empty((1 + len(OHLCV), len(frame)), dtype=np.int64)
    out[0] = frame.index.asi8
    out[1:] = frame[OHLCV].to_numpy(dtype=np.float64).T.view(np.int64)
    return out


def rebuild(ref: FrameRef, arrays: np.ndarray) -> pd.DataFrame:
    """The frame of ``frame_arrays`` on ``arrays`` itself (a mapped file: read-only, no
    copy); ``feed_frame`` cuts the same windows from it as from the published frame."""
    ticks = arrays[0].view(ref.index_dtype)
    index = pd.DatetimeIndex(ticks, name=ref.index_name, freq=ref.freq, copy=False)
    values = arrays[1:].view(np.float64).T  # (rows, 5), one block over the mapping
    frame = pd.DataFrame(values, index=index, columns=list(OHLCV), copy=False)
    frame.columns.name = ref.columns_name
    return frame


def open_frames(jobs: list[BacktestJob]) -> list[BacktestJob]:
    """In the worker: each job with its ``FrameRef`` feeds replaced by the mapped frames
    (each file mapped once per call). Jobs without references are returned as they are."""
    frames: dict[FrameRef, pd.DataFrame] = {}

    def frame(bars: Any) -> Any:
        if not isinstance(bars, FrameRef):
            return bars
        if bars not in frames:
            frames[bars] = rebuild(bars, np.load(bars.path, mmap_mode="r"))
        return frames[bars]

    if not any(isinstance(b, FrameRef) for job in jobs for _, b in job.feeds()):
        return jobs
    return [job.map_bars(frame) for job in jobs]


_OWNED = re.compile(re.escape(FRAMES_DIR_PREFIX) + r"(\d+)-")


def remove_orphans(tmp: str) -> list[str]:
    """Remove the frame folders in ``tmp`` that this user's drivers left when killed: named
    after a process that no longer exists, and owned by this user. A folder whose process id
    is alive (its driver, or a process that reused the id) is left alone. The removed paths."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return removed
    for entry in entries:
        owner = _OWNED.match(entry.name)
        try:
            if owner is None or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or _alive(
                int(owner.group(1))
            ):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class FrameStore:
    """The driver's side: ``pack`` a chunk's jobs, ``release`` them when the chunk is done."""

    def __init__(self, max_frames: int = MAX_FRAMES) -> None:
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._max = max_frames
        # id(frame) -> (the frame, kept so its id is not reused; its reference)
        self._published: OrderedDict[int, tuple[pd.DataFrame, FrameRef]] = OrderedDict()
        self._readers: dict[FrameRef, int] = {}  # chunks in flight reading each file
        self.stats = PublishStats()
        self._closed = False

    def _publish(self, frame: pd.DataFrame) -> FrameRef:
        if self._dir is None:
            remove_orphans(tempfile.gettempdir())
            # 0700: the workers' uid only; named after this process, for remove_orphans
            self._dir = tempfile.mkdtemp(prefix=f"{FRAMES_DIR_PREFIX}{os.getpid()}-")
            # removed on close, or at exit for a backend never closed
            weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        path = os.path.join(self._dir, f"{self.stats.frames}.npy")
        arrays = frame_arrays(frame)
        np.save(path, arrays, allow_pickle=False)
        self.stats.frames += 1
        self.stats.frame_bytes += arrays.nbytes
        index = frame.index
        freq = None if index.freq is None else index.freqstr
        return FrameRef(path, str(index.dtype), index.name, frame.columns.name, freq)

    def _ref(self, frame: Any) -> Any:
        """``frame``'s reference (published on first sight), or ``frame`` if not publishable."""
        held = self._published.get(id(frame))
        if held is not None:
            self._published.move_to_end(id(frame))
            return held[1]
        if not publishable(frame):
            return frame
        try:
            ref = self._publish(frame)
        except OSError:  # no room in the temporary folder: the frame travels as before
            return frame
        self._published[id(frame)] = (frame, ref)  # evicted by ``pack`` once it counts readers
        return ref

    def _evict(self) -> None:
        for key in list(self._published)[: max(0, len(self._published) - self._max)]:
            ref = self._published[key][1]
            if not self._readers.get(ref):
                del self._published[key]
                os.unlink(ref.path)

    def pack(self, jobs: list[BacktestJob]) -> tuple[list[BacktestJob], list[FrameRef]]:
        """The jobs with each publishable frame replaced by its ``FrameRef``, and the
        references they read (``release`` them once the chunk is done)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("FrameStore is closed")
            packed = [job.map_bars(self._ref) for job in jobs]
            refs = {b for job in packed for _, b in job.feeds() if isinstance(b, FrameRef)}
            for ref in refs:
                self._readers[ref] = self._readers.get(ref, 0) + 1
            self._evict()  # after: a chunk reading more frames than the cap keeps them all
            self.stats.jobs += len(jobs)
        return packed, sorted(refs, key=lambda r: r.path)

    def release(self, refs: list[FrameRef]) -> None:
        """The chunk that read ``refs`` is done: their files may be dropped when evicted."""
        with self._lock:
            for ref in refs:
                left = self._readers.get(ref, 0) - 1
                if left > 0:
                    self._readers[ref] = left
                else:
                    self._readers.pop(ref, None)
            self._evict()

    def close(self) -> None:
        """Delete the files (after the pool stopped: no task reads them any more)."""
        with self._lock:
            self._closed = True
            self._published.clear()
            self._readers.clear()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
