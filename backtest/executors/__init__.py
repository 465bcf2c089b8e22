"""Executors: run many backtest jobs, serially, on a process pool (forkserver), or on Ray.

Every backend runs each job through ``backtest.sandbox``: static validation,
then a forked, resource-limited child of a warm worker (see that module). The
pool's and Ray's workers are only ever the *parents* of job processes, so the
generated code never runs in the orchestrator or in a long-lived worker.

Futures returned by an executor never raise: a worker that dies anyway
(segfault in the sandbox itself, OOM kill of the worker) or any other failure
becomes a ``BacktestResult`` with status error, and later jobs still run.

Besides the ``Executor`` protocol (submit / map / close, context manager), the
backends here offer ``submit_trace(job) -> Future[SandboxOutcome]``: the result
plus the run's orders and indicator lines, used by ``backtest.lookahead``.

The process pool streams: a chunk of same-code jobs runs in one sandboxed child, and each
job's outcome leaves its worker as soon as the worker has booked it (``ResultStream``), so
a job's future resolves when that job is done, not when its chunk is. Submitting is O(1) in
the bars: windows are cut and costs estimated in the batcher's thread, once per chunk
(``backtest.executors.batching``).

The public face of the executors wing; code outside it imports from here only. The serial
backend and ``make_executor`` are in ``backtest.executors.backends``, the protocol and base
class in ``backtest.executors.base``, the process pool in ``backtest.executors.pool`` (its result
stream in ``backtest.executors.stream``) and Ray in ``backtest.executors.ray``.
"""

from backtest.executors.backends import EXECUTOR_KINDS, SerialBackend, make_executor
from backtest.executors.base import Executor, error_result
from backtest.executors.pool import ProcessPoolBackend
from backtest.executors.ray import RayBackend

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "ProcessPoolBackend",
    "RayBackend",
    "SerialBackend",
    "error_result",
    "make_executor",
]
