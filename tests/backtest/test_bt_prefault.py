"""A job's process copies the pages a backtest writes while it waits for its turn
(``backtest.sandbox.prefault``): the worker's probe finds them, the copy really happens
before the job (its writes then take no page fault), it stops when the turn comes, it
survives a page list gone stale, and a batch's outcomes are the same with and without it."""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
from datetime import date

import numpy as np
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.sandbox import SandboxPolicy, landlock_abi, run_sandboxed_batch, warm_worker
from backtest.sandbox import prefault as pf
from strategies.codegen import render
from strategies.families import default_spec
from strategies.spec import Family

PAGE = os.sysconf("SC_PAGE_SIZE")


def _has_populate() -> bool:
    """Whether this kernel has MADV_POPULATE_WRITE (Linux >= 5.14)."""
    m = mmap.mmap(-1, PAGE)
    try:
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        lib = ctypes.CDLL(None, use_errno=True)
        lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return lib.madvise(addr, PAGE, 23) == 0
    finally:
        m.close()


needs_populate = pytest.mark.skipif(
    not os.path.exists("/proc/self/pagemap") or not _has_populate(),
    reason="needs /proc/self/pagemap and MADV_POPULATE_WRITE (Linux >= 5.14)",
)


def _in_fork(fn) -> int:
    """Run ``fn()`` (returning an int >= 0) in a fork of this process; its result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(w, str(fn()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return int(got)


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _touch(ranges: pf.PageRanges) -> None:
    """Write one byte of every page (its own value back: nothing changes but the copy)."""
    for start, length in ranges:
        for at in range(start, start + length, PAGE):
            b = ctypes.c_ubyte.from_address(at)
            b.value = b.value


@pytest.mark.unit
def test_decode_refuses_a_page_list_that_is_not_one() -> None:
    ok = np.array([PAGE, 2 * PAGE], dtype=np.int64).tobytes()
    assert pf._decode(ok) == ((PAGE, 2 * PAGE),)
    with pytest.raises(ValueError, match="truncated"):
        pf._decode(np.array([PAGE], dtype=np.int64).tobytes())
    with pytest.raises(ValueError, match="aligned"):
        pf._decode(np.array([PAGE + 1, PAGE], dtype=np.int64).tobytes())
    with pytest.raises(ValueError, match="aligned"):
        pf._decode(np.array([-PAGE, PAGE], dtype=np.int64).tobytes())


@pytest.mark.unit
def test_prefault_of_nothing_or_without_a_kernel_that_has_it_does_nothing() -> None:
    r, w = os.pipe()
    try:
        assert pf.prefault((), r) == 0
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.integration
@needs_populate
def test_the_probe_finds_the_pages_a_backtest_writes() -> None:
    warm_worker()
    pages = pf.probe_pages()
    n = sum(length for _, length in pages) // PAGE
    # A backtest writes thousands of the worker's pages (reference counts, allocator slots);
    # the list is bounded, page-aligned and holds no range twice.
    assert 200 < n <= pf.MAX_PAGES
    assert all(start % PAGE == 0 and length % PAGE == 0 and length > 0 for start, length in pages)
    starts = [s for s, _ in pages]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert pf.written_pages() is pf.written_pages()  # once per worker


@pytest.mark.integration
@needs_populate
def test_prefaulted_pages_are_copied_before_the_job_writes_them() -> None:
    # A shared buffer of 64 pages, then forks: without the prefault, writing each page costs a
    # fault; with it, the copies were made ahead and the writes take none of those.
    buf = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.write(b"x" * (64 * PAGE))
    start = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    ranges = ((start, 64 * PAGE),)
    r, w = os.pipe()  # the turn never comes: the whole list is copied

    def cold() -> int:
        before = _faults()
        _touch(ranges)
        return _faults() - before

    def warm() -> int:
        copied = pf.prefault(ranges, r)
        assert copied == 64 * PAGE
        before = _faults()
        _touch(ranges)
        return _faults() - before

    try:
        # The same writes, less the 64 page copies (the rest: the loop's own allocations).
        assert _in_fork(cold) - _in_fork(warm) >= 60
        assert buf[:3] == b"xxx"  # the parent's pages are untouched
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.integration
@needs_populate
def test_prefault_stops_when_the_turn_comes_and_survives_a_stale_list() -> None:
    buf = mmap.mmap(-1, 8 * PAGE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    r, w = os.pipe()
    try:
        os.write(w, b"g")  # the job's turn has come: nothing is copied
        assert pf.prefault(((start, 8 * PAGE),), r) == 0
        os.read(r, 1)
        # A range unmapped since the probe is skipped, the next one still copied.
        gone = mmap.mmap(-1, 4 * PAGE)
        gone_at = ctypes.addressof(ctypes.c_char.from_buffer(gone))
        gone.close()
        assert pf.prefault(((gone_at, 4 * PAGE), (start, 8 * PAGE)), r) == 8 * PAGE
    finally:
        os.close(r)
        os.close(w)


FOLDS = [
    Fold(
        index=i,
        warmup_start=date(2013 + i, 1, 2),
        start=date(2014 + i, 1, 2),
        end=date(2014 + i, 12, 31),
    )
    for i in range(3)
]


@pytest.mark.integration
@needs_populate
def test_a_batch_books_the_same_outcomes_with_and_without_the_prefault() -> None:
    if landlock_abi() < 1:
        pytest.skip("no Landlock: a batch's jobs share one process, nothing to prefault")
    warm_worker()
    bars = read_real_bars("MSFT", "2013-01-01", "2017-12-31")
    for family in (Family.MOMENTUM, Family.MEAN_REVERSION):
        jobs = [
            BacktestJob(
                job_id=f"{family.value}-{f.index}",
                variant_id=family.value,
                code=render(default_spec(family)),
                symbol="MSFT",
                bars=bars,
                fold=f,
            )
            for f in FOLDS
        ]
        on = run_sandboxed_batch(jobs, SandboxPolicy(prefault=True))
        off = run_sandboxed_batch(jobs, SandboxPolicy(prefault=False))
        for a, b in zip(on, off, strict=True):
            assert a.result.status == b.result.status == JobStatus.OK, a.result.error
            assert a.result.metrics is not None and a.result.returns
            same = {"duration_s"}  # the only field that may differ: wall time
            assert a.result.model_dump(exclude=same) == b.result.model_dump(exclude=same)


@pytest.mark.unit
def test_the_prefault_runs_only_where_the_workers_leave_a_core_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    policy = SandboxPolicy()
    assert policy.prefault
    assert pf.for_workers(policy, 1) is policy
    assert pf.for_workers(policy, 3).prefault
    assert not pf.for_workers(policy, 4).prefault  # every core runs a job: no copying ahead
    assert not pf.for_workers(policy, 8).prefault
    assert pf.for_workers(policy, 8).memory_mb == policy.memory_mb  # nothing else changes
    off = SandboxPolicy(prefault=False)
    assert pf.for_workers(off, 1) is off
