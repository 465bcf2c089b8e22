"""The limits of a sandboxed job: shared by the parent (``backtest.sandbox``) and the child
(``backtest.sandbox.child``), so neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one sandboxed job. Picklable (it travels to pool and Ray workers).

    ``validate=False`` skips the static lint: for tests that prove the runtime
    layer alone, never for generated code. ``kernel=False`` skips Landlock and
    seccomp (the uid drop, Python-level guards and rlimits stay).
    """

    validate: bool = True
    # Generated variants declare params (tuners set them); a user's class judged as written
    # (``gate.judge``) may rely on Backtrader's defaults. Every other rule of the lint applies.
    require_params: bool = True
    memory_mb: int = 2048  # address-space growth allowed over the warm worker's mappings
    file_mb: int = 64  # largest file the job may write
    temp_mb: int = 64  # all of the job's temporary files together
    temp_files: int = 1024  # files and folders in the temp dir (tmpfs inodes)
    nofile: int = 64  # open descriptors
    nproc: int = 32  # processes + threads of the child's uid (as root: the child alone)
    result_mb: int = 8  # one job's result line; above it the job is an error
    cpu_s: int | None = None  # CPU seconds; None: ceil(job.timeout_s) + 1
    grace_s: float = 2.0  # wall slack after job.timeout_s before SIGKILL of the group
    kernel: bool = True  # Landlock + seccomp when available
    # With the kernel guards, each job of a batch in a process of its own (a fork a job, its
    # copy-on-write faults): nothing a job leaves reaches the next job's nonce or window.
    # False: the jobs share their batch child (a job's threads or patches then see the next).
    isolate_jobs: bool = True
    # With isolated jobs, each job's process but the first copies the pages a backtest
    # writes while the previous job runs (``backtest.sandbox.prefault``): the same pages,
    # copied off the job's clock. False: each job takes its own page faults as it runs.
    prefault: bool = True

    def forks_each_job(self, n_jobs: int) -> bool:
        """Whether a batch of ``n_jobs`` runs each job in a process of its own (forked from
        the batch child): with the kernel guards, isolation asked and more than one job."""
        return self.kernel and self.isolate_jobs and n_jobs > 1


DEFAULT_POLICY = SandboxPolicy()
