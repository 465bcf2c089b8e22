"""Run backtest jobs isolated: forked, confined, resource-limited children of a warm worker.

Why a fork: a fresh interpreter per job costs ~1-2 s of imports, more than most
backtests. A worker (a pool process, a Ray worker, or the CLI itself) imports
backtrader/pandas once (``warm_worker``); every job then runs in a ``fork()`` of
it, which costs a few milliseconds and inherits the job's bars copy-on-write.

What the child gets before the strategy source is compiled is listed, in order, in
``backtest.sandbox.child``: a new session without a terminal, no inherited descriptors
but its pipes, private copies of the worker's semaphores, a private size-capped tmpfs,
rlimits, a scrubbed environment, a uid of its own without groups or capabilities
(as root), no_new_privs, the Python-level guards (``backtest.sandbox.python_guards``) and the
kernel guards, Landlock and seccomp (``backtest.sandbox.kernel_guards``;
``kernel_capabilities()`` says which this machine offers). The static lint
(``strategies.validate``) runs first, in the parent: a convenience that names the
problem early, not the boundary.

The parent side never raises: every outcome is a
``BacktestResult`` with status ok / error / timeout / rejected / integrity_error. The
parent keeps the books (``backtest.books``): a child's line is only a claim (its status and
fill log, with the nonce the parent sent it for that job, one at a time, on a pipe); the
parent checks the fills against the bars and costs, replays them and computes the
metrics. A line that is not the running job's (another job id, a wrong nonce, malformed)
is an integrity error, and the child is killed; the jobs after it run in a fresh child. It reads the child's
result pipe and its stdout/stderr through ``poll`` with bounded buffers: a result line
longer than ``policy.result_mb`` kills the child and is an error, output beyond a short
tail is discarded. The wall clock is enforced twice: the engine's SIGALRM inside the
child (a clean "timeout" result) and, ``grace_s`` later, ``SIGKILL`` to the child's
process group from the parent, per job (a batch child's clock restarts at each result
line) and for the child as a whole (the sum of its jobs' limits). Whatever stops a
batch child part-way, the jobs that finished keep their results, the running one gets
the verdict and the rest run in a fresh child. Each job's outcome is final as soon as its
line is booked (``run_sandboxed_batch``'s ``on_outcome``: the pool streams it from there),
so the temporary-file quota is checked before each line is believed, not once at the end.

The public face of the sandbox wing; code outside it imports from here only. The entry points
(validate, then run one job or a same-code batch; the pool's and Ray's task functions) are
``backtest.sandbox.runner``. The parts: ``backtest.sandbox.warm`` (the warm worker),
``backtest.sandbox.prefault`` (the pages a job's process copies before its turn),
``backtest.sandbox.process`` (forking the children, the pipes, deadlines, kills, verdicts),
``backtest.sandbox.result`` (the outcome, and a result line checked and booked) and
``backtest.sandbox.child`` (the child's confinement).
"""

from backtest.sandbox.kernel_guards import (
    FRAMES_DIR_PREFIX,
    kernel_capabilities,
    landlock_abi,
    seccomp_program,
)
from backtest.sandbox.policy import DEFAULT_POLICY, SandboxPolicy
from backtest.sandbox.prefault import for_workers, written_pages
from backtest.sandbox.python_guards import read_roots
from backtest.sandbox.result import OnOutcome, SandboxOutcome, error_outcome
from backtest.sandbox.runner import (
    run_sandboxed,
    run_sandboxed_batch,
    sandbox_batch_task,
    sandbox_task,
)
from backtest.sandbox.warm import warm_worker

__all__ = [
    "DEFAULT_POLICY",
    "FRAMES_DIR_PREFIX",
    "OnOutcome",
    "SandboxOutcome",
    "SandboxPolicy",
    "error_outcome",
    "for_workers",
    "kernel_capabilities",
    "landlock_abi",
    "read_roots",
    "run_sandboxed",
    "run_sandboxed_batch",
    "sandbox_batch_task",
    "sandbox_task",
    "seccomp_program",
    "warm_worker",
    "written_pages",
]
