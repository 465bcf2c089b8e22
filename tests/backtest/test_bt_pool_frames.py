"""The process pool's frames are published once per run (``backtest.executors.pool_frames``):
a chunk carries references, the worker maps the file, and every window the sandbox cuts from
the mapped frame is the one it would cut from the caller's frame."""

from __future__ import annotations

import gc
import os
from datetime import date

import numpy as np
import pandas as pd
import pytest

from backtest.books import feed_frame
from backtest.contracts import BacktestJob, Fold
from backtest.engine import window_job
from backtest.executors.pool_frames import FrameRef, FrameStore, open_frames, publishable

pytestmark = pytest.mark.unit

FOLDS = [
    Fold(index=0, warmup_start=date(2020, 1, 1), start=date(2020, 2, 1), end=date(2020, 6, 30)),
    Fold(index=1, warmup_start=date(2020, 3, 7), start=date(2020, 4, 1), end=date(2020, 7, 4)),
    Fold(index=2, warmup_start=date(2019, 1, 1), start=date(2019, 2, 1), end=date(2021, 1, 1)),
]


def _frame(seed: int, **index_kw) -> pd.DataFrame:
    idx = pd.bdate_range("2020-01-01", periods=150, **index_kw)
    close = 100 + np.random.default_rng(seed).standard_normal(len(idx)).cumsum()
    return pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6},
        index=idx,
    )


def _job(k: int, bars, fold: Fold = FOLDS[0]) -> BacktestJob:
    return BacktestJob(job_id=f"j{k}", variant_id="v", code="x", symbol="S", bars=bars, fold=fold)


def _variants() -> list[pd.DataFrame]:
    """Publishable frames whose windows could differ if rebuilt carelessly."""
    plain = _frame(1)
    loaded = _frame(2)
    loaded.index = pd.DatetimeIndex(loaded.index.to_numpy(), name="date")  # no freq, as a CSV
    seconds = _frame(3)
    seconds.index = seconds.index.as_unit("s")
    ints = _frame(4).assign(volume=lambda f: (f["volume"] * 3).astype("int64"), extra="x")
    ints = ints[["extra", "close", "volume", "open", "low", "high"]]
    ints.columns.name = "field"
    return [plain, loaded, seconds, ints]


def test_each_frame_is_published_once_and_every_window_is_the_callers() -> None:
    frames = _variants()
    store = FrameStore()
    try:
        jobs = [_job(k, f, fold) for k, f in enumerate(frames) for fold in FOLDS]
        jobs.append(_job(99, {"A": frames[0], "B": frames[1]}, FOLDS[1]))
        packed, refs = store.pack(jobs)
        assert store.stats.frames == len(frames) == len(refs)
        assert all(isinstance(b, FrameRef) for job in packed for _, b in job.feeds())
        again, _ = store.pack(jobs[:3])  # a later chunk publishes nothing new
        assert store.stats.frames == len(frames) and again[0].bars == packed[0].bars
        opened = open_frames(packed)
        for job, mapped in zip(jobs, opened, strict=True):
            for (_, frame), (_, rebuilt) in zip(job.feeds(), mapped.feeds(), strict=True):
                pd.testing.assert_frame_equal(
                    feed_frame(rebuilt, job.fold), feed_frame(frame, job.fold)
                )
            # the child's window: a fresh copy, equal to the one cut from the caller's frame
            for (_, want), (_, got) in zip(
                window_job(job).feeds(), window_job(mapped).feeds(), strict=True
            ):
                pd.testing.assert_frame_equal(got, want)
                assert not np.shares_memory(got.to_numpy(), opened[0].bars.to_numpy())
    finally:
        store.close()


def test_frames_that_cannot_be_rebuilt_exactly_travel_as_they_are() -> None:
    tz = _frame(1, tz="UTC")
    unsorted = _frame(2).iloc[::-1]
    missing = _frame(3).drop(columns="volume")
    text = _frame(4).assign(close="1")
    tagged = _frame(5)
    tagged.attrs["source"] = "x"
    dup = pd.concat([_frame(6), _frame(6)[["close"]]], axis=1)
    odd = [tz, unsorted, missing, text, tagged, dup, "not a frame"]
    assert not any(publishable(f) for f in odd)
    store = FrameStore()
    try:
        packed, refs = store.pack([_job(k, f) for k, f in enumerate(odd)])
        assert refs == [] and store.stats.frames == 0
        assert all(p.bars is f for p, f in zip(packed, odd, strict=True))
        assert open_frames(packed) is packed
    finally:
        store.close()


def test_a_file_a_chunk_in_flight_reads_outlives_its_eviction() -> None:
    a, b = _frame(1), _frame(2)
    store = FrameStore(max_frames=1)
    try:
        _, refs_a = store.pack([_job(0, a)])
        _, refs_b = store.pack([_job(1, b)])  # over the cap, but a's chunk is still running
        assert os.path.exists(refs_a[0].path) and os.path.exists(refs_b[0].path)
        store.release(refs_a)  # a's chunk ended: its file goes
        assert not os.path.exists(refs_a[0].path) and os.path.exists(refs_b[0].path)
        _, refs_a2 = store.pack([_job(2, a)])  # seen again: published again
        assert refs_a2[0] != refs_a[0] and store.stats.frames == 3
        folder = os.path.dirname(refs_b[0].path)
    finally:
        store.close()
    assert not os.path.exists(folder)
    with pytest.raises(RuntimeError, match="closed"):
        store.pack([_job(3, a)])


def test_a_chunk_reading_more_frames_than_the_cap_keeps_every_file_it_reads() -> None:
    frames = [_frame(k) for k in range(3)]
    store = FrameStore(max_frames=2)
    try:
        packed, refs = store.pack([_job(k, f) for k, f in enumerate(frames)])
        assert len(refs) == 3 and all(os.path.exists(r.path) for r in refs)  # all read now
        store.release(refs)  # done: down to the cap, the least recently used first
        assert [os.path.exists(r.path) for r in refs] == [False, True, True]
    finally:
        store.close()


def test_a_store_never_closed_leaves_no_folder() -> None:
    store = FrameStore()
    _, refs = store.pack([_job(0, _frame(1))])
    folder = os.path.dirname(refs[0].path)
    assert os.path.isdir(folder)
    del store
    gc.collect()
    assert not os.path.exists(folder)


def test_a_killed_drivers_folder_is_removed_by_the_next_store_and_a_live_ones_kept(
    tmp_path, monkeypatch
) -> None:
    import subprocess
    import sys

    from backtest.executors import pool_frames

    monkeypatch.setattr(pool_frames.tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    killed = tmp_path / f"{pool_frames.FRAMES_DIR_PREFIX}{int(dead.stdout)}-abc"
    live = tmp_path / f"{pool_frames.FRAMES_DIR_PREFIX}{os.getppid()}-def"
    other = tmp_path / "bt-frames-old-format"  # not ours to judge: no process id
    for folder in (killed, live, other):
        folder.mkdir()
        (folder / "0.npy").write_bytes(b"x" * 100)
    store = FrameStore()
    try:
        _, refs = store.pack([_job(0, _frame(1))])
        mine = os.path.basename(os.path.dirname(refs[0].path))
        assert mine.startswith(f"{pool_frames.FRAMES_DIR_PREFIX}{os.getpid()}-")
        assert not killed.exists() and live.exists() and other.exists()
    finally:
        store.close()


def test_a_forked_child_keeps_no_mapping_of_the_published_frames() -> None:
    """The worker maps whole frames (the sealed holdout included); the sandboxed child it
    forks replaces those mappings with zero pages before anything else runs
    (``kernel_guards.shared_to_private``), so no address of its own holds them."""
    from backtest.sandbox import kernel_guards as kg

    if kg.libc() is None:
        pytest.skip("no libc mmap here")
    store = FrameStore()
    try:
        packed, _ = store.pack([_job(0, _frame(7))])
        (mapped,) = open_frames(packed)
        values = mapped.bars["close"].to_numpy()
        assert np.abs(values).sum() > 0
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: what the sandbox does first, then look
            code = 1
            try:
                replaced = kg.shared_to_private()
                ok = replaced >= 1 and not np.abs(values).any()
                os.write(write, b"zero" if ok else f"left {replaced}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        said = os.read(read, 64)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and said == b"zero", said
        assert np.abs(values).sum() > 0  # the worker's own mapping is untouched
    finally:
        gc.collect()
        store.close()


def test_host_mappings_are_the_semaphores_and_the_published_frames() -> None:
    from backtest.sandbox import FRAMES_DIR_PREFIX
    from backtest.sandbox.kernel_guards import host_mapping

    assert host_mapping("/dev/shm/sem.mp-abc")
    assert host_mapping(f"/tmp/{FRAMES_DIR_PREFIX}x1y2/0.npy")
    assert not host_mapping("/usr/lib/python3.11/lib-dynload/_ssl.so")
    assert not host_mapping("/tmp/other/bt-frames.npy")
