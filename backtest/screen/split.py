"""A set-by-set sweep split over processes: contiguous chunks of sets, one per core.

The portfolio screen replays each parameter set in Python (``backtest.screen.portfolio``):
~10 ms a set whatever the universe, one core. Its sets are independent, so ``map_chunks``
computes the first chunk in this process and every other chunk in a process forked for it:
the windows (the universe's bars, often hundreds of MB) are shared copy-on-write, never
pickled; only each chunk's result comes back, pickled on a pipe. A chunk's rows are
computed exactly as in one process (each set's sums only ever see its own returns, in the
windows' order), so the sweep is the same bit for bit with any number of processes.

A child that fails in any way (an exception, a crash, killed, or still running well after
this process finished the same amount of work) is not trusted for anything: it is killed and
its chunk is computed again here, which gives the same result or raises the same error with
this process's traceback. The children die with this thread (``backtest.lifeline``), and a
child still running when this process stops waiting (an error, Ctrl-C) is killed and reaped.

Forking a process that runs other threads (the pool's, an LLM client's, ChromaDB's) is safe
here because the child touches none of their state: it runs the screen's own numpy, numba
and Python code and leaves with ``os._exit`` (no exit handlers, no flushing of this process's
buffers). Its collector is off, so no finalizer of this process's garbage (a client, a
connection) runs in it; and a child that hangs anyway (a lock another thread held at the
fork) costs its grace period, not the run.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import TypeVar

from backtest.lifeline import die_with_parent

T = TypeVar("T")

MIN_SETS = 16  # a chunk smaller than this is not worth a fork and a pickled result
GRACE_S = 30.0  # a child's least time to finish after this process finished its own part


def chunks(n_sets: int, workers: int, min_sets: int = MIN_SETS) -> list[range]:
    """``n_sets`` rows split into at most ``workers`` contiguous, near-equal chunks of at
    least ``min_sets`` rows (one chunk when there are too few), in order."""
    k = max(1, min(workers, n_sets // max(1, min_sets)))
    bounds = [n_sets * i // k for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


def map_chunks(
    compute: Callable[[range], T], parts: list[range], grace_s: float = GRACE_S
) -> list[T]:
    """``[compute(p) for p in parts]``: the first part here, each other in a forked child
    while this one runs (the same results, in order). Once this process's part is done, the
    children get ``grace_s`` or twice its time, whichever is longer, to send theirs."""
    if len(parts) < 2 or not hasattr(os, "fork"):
        return [compute(p) for p in parts]
    running: list[tuple[int, int]] = []  # (pid, read end) of the children not yet reaped
    try:
        for p in parts[1:]:
            running.append(_fork(compute, p))
        started = time.monotonic()
        out = [compute(parts[0])]
        took = time.monotonic() - started
        deadline = time.monotonic() + max(grace_s, 2.0 * took)
        while running:
            pid, fd = running.pop(0)
            try:
                got: tuple[T] | None = _collect(pid, fd, deadline)  # closes its pipe, reaps
            except BaseException:
                _end(pid)
                raise
            # a child that failed: its part again here (the same result, or its error raised)
            out.append(compute(parts[len(out)]) if got is None else got[0])
        return out
    finally:
        for pid, fd in running:  # this process stopped waiting: the others are not needed
            os.close(fd)
            _end(pid)


def _end(pid: int) -> None:
    """Kill and reap a child (already gone: nothing to do)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _fork(compute: Callable[[range], T], part: range) -> tuple[int, int]:
    """Fork a child computing ``part``: (its pid, the read end of its result pipe)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: compute, write, and leave without running the parent's exits
        code = 1
        try:
            gc.disable()  # no finalizer of the parent's garbage runs here
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent kills it
            die_with_parent()
            data = pickle.dumps((compute(part),), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view) :]
            code = 0
        except BaseException:  # noqa: BLE001  (the parent computes the part again)
            pass
        os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int, deadline: float) -> tuple[T] | None:
    """A child's result (in a 1-tuple), or None when it did not end well or by ``deadline``
    (then it is killed)."""
    chunks_: list[bytes] = []
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(math.ceil(left * 1000)):
                chunks_ = []
                os.kill(pid, signal.SIGKILL)  # late: its part is computed here
                break
            block = os.read(fd, 1 << 20)
            if not block:
                break
            chunks_.append(block)
    except OSError:
        chunks_ = []
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0) or not chunks_:
        return None
    try:
        return pickle.loads(b"".join(chunks_))
    except Exception:  # noqa: BLE001  (a truncated result: computed again)
        return None
