"""Copy a job's pages before its turn: the page faults of a fresh job process, off its clock.

A job's process is a fork: every page it writes (the reference counts of the modules it
runs, the free slots of the worker's allocator) is first copied, one page fault each. A
backtest writes ~2,500 such pages; in a VM a fault costs 4-7 us, so ~15 ms of every job
went to faults the in-process engine never takes (it reuses pages it already owns).

``written_pages`` learns once per warm worker which of its pages a backtest writes: a
trusted probe, forked from the worker, runs the warm-up strategy (``warm.warm_up_run``,
our own code, no job's) and reads which of its pages are now its own copies
(``/proc/self/pagemap``: present and exclusively mapped). Each job process of a batch but
the first, forked while the previous job runs, copies those pages with
``MADV_POPULATE_WRITE`` while it waits for its turn (``prefault``), on the core the
running job leaves free, and stops as soon as its turn comes. The contents are the same
(a copy is a copy); only when the copying happens changes. The page list is the worker's,
made before any job: nothing a job does reaches the next job through it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import time
from dataclasses import replace

from backtest.sandbox.kernel_guards import libc
from backtest.sandbox.policy import SandboxPolicy

__all__ = [
    "MAX_PAGES",
    "PageRanges",
    "for_workers",
    "prefault",
    "probe_pages",
    "written_pages",
]

PageRanges = tuple[tuple[int, int], ...]  # (start address, length in bytes), page-aligned

MAX_PAGES = 1 << 15  # 128 MiB: a bound on what a job process copies ahead
_MADV_POPULATE_WRITE = 23  # Linux >= 5.14
_CHUNK_BYTES = 1 << 20  # copied between two looks at whether the turn has come
_PROBE_TIMEOUT_S = 5.0  # the probe's run takes ~0.3 s; a stuck one costs a worker no more
_PAGE = os.sysconf("SC_PAGE_SIZE")
_NOT_PROBED: PageRanges = ((-1, -1),)
_pages: PageRanges = _NOT_PROBED  # this worker's probe, once


def for_workers(policy: SandboxPolicy, workers: int) -> SandboxPolicy:
    """The policy that ``workers`` jobs at a time run with: the prefault only where a core is
    left free for it. It trades a spare core's time for the running job's: with every core
    running a job, its copying would take a job's time (measured: a 2-worker pool on 2
    cores +3 to +5 % wall with it, a 1-worker pool -2 %)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return policy if not policy.prefault or workers < cores else replace(policy, prefault=False)


def written_pages() -> PageRanges:
    """The pages of this (warm) process that a backtest in a fork of it writes; probed on the
    first call, empty where the probe cannot run (no ``/proc/self/pagemap``, not Linux)."""
    global _pages
    if _pages is _NOT_PROBED:
        from backtest.sandbox.warm import warm_worker

        warm_worker()  # the probe must see the layout the jobs' processes inherit
        _pages = probe_pages()
    return _pages


def probe_pages() -> PageRanges:
    """Fork a probe that runs the warm-up strategy and reports the pages it copied. Empty on
    any failure (a missing prefault costs time, never a result)."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return ()
    pid = os.fork()
    if pid == 0:  # the probe: our own code only, then _exit
        code = 1
        try:
            os.close(read_end)
            from backtest.sandbox.warm import warm_up_run

            warm_up_run()
            _write_all(write_end, _encode(_own_copies()))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        return _decode(_read_bounded(read_end, 16 * MAX_PAGES + 16, _PROBE_TIMEOUT_S))
    except (OSError, ValueError):
        return ()
    finally:
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def prefault(ranges: PageRanges, turn: int) -> int:
    """Copy ``ranges`` into this process (``MADV_POPULATE_WRITE``) until the descriptor
    ``turn`` is readable (the job's go, or its end); returns the bytes copied. Never
    raises: a range gone or not writable since the probe is skipped."""
    lib = libc()
    if lib is None or not ranges:
        return 0
    madvise = lib.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    watch = select.poll()
    watch.register(turn, select.POLLIN)
    done = 0
    for start, length in ranges:
        for at in range(start, start + length, _CHUNK_BYTES):
            if _arrived(watch):
                return done
            size = min(_CHUNK_BYTES, start + length - at)
            if madvise(at, size, _MADV_POPULATE_WRITE) != 0:
                if ctypes.get_errno() == 22:  # EINVAL: a kernel without it; stop asking
                    return done
                break  # ENOMEM/EFAULT: unmapped or read-only now; the next range
            done += size
    return done


def _arrived(watch: select.poll) -> bool:
    try:
        return bool(watch.poll(0))
    except OSError:
        return True


def _own_copies() -> list[tuple[int, int]]:
    """Ranges of this process's private writable mappings whose pages are present and mapped
    by this process alone: in a fresh fork, the pages it wrote (or allocated) since."""
    import numpy as np

    flags = np.uint64(1 << 63 | 1 << 56)  # present, exclusively mapped
    out: list[tuple[int, int]] = []
    total = 0
    with open("/proc/self/maps", "rb") as maps, open("/proc/self/pagemap", "rb") as pagemap:
        for line in maps.read().splitlines():
            fields = line.split(maxsplit=5)
            name = fields[5] if len(fields) > 5 else b""
            if fields[1] != b"rw-p" or name in (b"[stack]", b"[vvar]", b"[vdso]"):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split(b"-"))
            if hi - lo > 1 << 30:  # a reservation, not a heap
                continue
            pagemap.seek(lo // _PAGE * 8)
            entries = np.frombuffer(pagemap.read((hi - lo) // _PAGE * 8), dtype=np.uint64)
            own = np.flatnonzero((entries & flags) == flags)
            for run in np.split(own, np.flatnonzero(np.diff(own) != 1) + 1):
                if run.size:
                    n = min(int(run.size), MAX_PAGES - total)
                    out.append((lo + int(run[0]) * _PAGE, n * _PAGE))
                    total += n
                    if total >= MAX_PAGES:
                        return out
    return out


def _encode(ranges: list[tuple[int, int]]) -> bytes:
    import numpy as np

    return np.asarray(ranges, dtype=np.int64).reshape(-1).tobytes()


def _decode(data: bytes) -> PageRanges:
    import numpy as np

    flat = np.frombuffer(data, dtype=np.int64)
    if flat.size % 2:
        raise ValueError("a truncated page list")
    pairs = flat.reshape(-1, 2)
    if (pairs < 0).any() or (pairs % _PAGE).any():
        raise ValueError("a page list not page-aligned")
    return tuple((int(a), int(n)) for a, n in pairs)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_bounded(fd: int, cap: int, timeout_s: float) -> bytes:
    """What the probe writes until it closes its end, at most ``cap`` bytes and ``timeout_s``."""
    got = bytearray()
    end = time.monotonic() + timeout_s
    watch = select.poll()
    watch.register(fd, select.POLLIN)
    while len(got) <= cap:
        left = end - time.monotonic()
        if left <= 0 or not watch.poll(int(left * 1000) + 1):
            raise ValueError("the page probe did not finish in time")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(got)
        got += chunk
    raise ValueError("the page probe wrote too much")
