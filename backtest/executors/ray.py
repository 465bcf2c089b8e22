"""The Ray backend: the process pool's sandboxed task functions, as Ray tasks."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future
from typing import Any

from backtest.contracts import BacktestJob
from backtest.engine import trim_bars
from backtest.errors import BacktestError
from backtest.executors.base import BaseExecutor, outcome_error
from backtest.executors.batching import Batcher
from backtest.executors.ray_loopback import LOOPBACK, is_loopback, loopback_kept
from backtest.executors.ray_shipping import Bars, shipped_batch_task
from backtest.sandbox import (
    DEFAULT_POLICY,
    SandboxOutcome,
    SandboxPolicy,
    for_workers,
    sandbox_task,
)


class RayBackend(BaseExecutor):
    """Ray tasks running the same sandboxed functions as the process pool, micro-batched the
    same way (a task per planned chunk of same-code jobs, cut for the cluster's CPUs).

    ``address=None`` starts a local Ray instance with ``workers`` CPUs (no
    dashboard; ~5-7 s to start); an address (``auto``, ``ray://host:10001`` or
    ``host:6379``) connects to an existing cluster, whose nodes need this project
    and its dependencies installed. Ray is shut down on ``close`` only if this
    backend started it. A local instance, and a cluster at a loopback address, stay on
    127.0.0.1 (``backtest.executors.ray_loopback``).
    """

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        policy: SandboxPolicy | None = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise BacktestError(
                "--executor ray needs the ray package: pip install 'swarm-strategy-lab[ray]'"
            ) from exc
        self._ray = ray
        self.policy = policy or DEFAULT_POLICY
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = self.workers
            loopback = is_loopback(address)
            if loopback:  # a local instance or a loopback cluster: nothing off 127.0.0.1
                kwargs["_node_ip_address"] = LOOPBACK
            try:
                with loopback_kept() if loopback else contextlib.nullcontext():
                    ray.init(**kwargs)
            except Exception as exc:
                where = f"--ray-address {address}" if address else "a local Ray instance"
                raise BacktestError(
                    f"--executor ray: could not start/connect to {where}: "
                    f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                ) from exc
        with contextlib.suppress(Exception):  # a cluster: plan chunks for all its CPUs
            self.workers = max(1, int(ray.cluster_resources().get("CPU", self.workers)))
        self._remote = ray.remote(num_cpus=1, max_retries=1)(sandbox_task)
        self._remote_batch = ray.remote(num_cpus=1, max_retries=1)(shipped_batch_task)
        # Each frame goes to the object store once for the backend's life (ray_shipping);
        # the chunks keep the callers' frames so that each is recognised.
        self.bars = Bars(ray)
        self._batcher = Batcher(self.workers, self._submit_batch, outcome_error, share=False)
        self._closed = False

    def _submit(
        self, job: BacktestJob, trace: bool, policy: SandboxPolicy | None
    ) -> Future[SandboxOutcome]:
        outer: Future[SandboxOutcome] = Future()
        if self._closed:
            outer.set_result(outcome_error(job, "BacktestError: executor is closed"))
            return outer
        policy = for_workers(policy or self.policy, self.workers)
        if not trace:
            self._batcher.add(job, policy, outer)  # the batcher's thread packs the chunks
            return outer
        job = trim_bars(job)  # a traced run's bars are often its own (the lookahead cuts)
        try:
            inner = self._remote.remote(job, policy, trace).future()
        except Exception as exc:
            outer.set_result(outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return outer
        inner.add_done_callback(lambda f: self._resolve([(job, outer)], f, single=True))
        return outer

    def _submit_batch(
        self, items: list[tuple[BacktestJob, Future[SandboxOutcome]]], policy: SandboxPolicy
    ) -> None:
        try:
            packed, refs = self.bars.pack([job for job, _ in items])
            inner = self._remote_batch.remote(packed, policy, *refs).future()
        except Exception as exc:
            for job, outer in items:
                outer.set_result(outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return
        inner.add_done_callback(lambda f: self._resolve(items, f, single=False))

    @staticmethod
    def _resolve(
        items: list[tuple[BacktestJob, Future[SandboxOutcome]]], f: Future[Any], *, single: bool
    ) -> None:
        try:
            got = f.result()
            outs = [got] if single else list(got)
        except BaseException as exc:  # RayTaskError, WorkerCrashedError, cancellation
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            for job, outer in items:
                outer.set_result(outcome_error(job, f"RayError: {type(exc).__name__}: {first}"))
            return
        for (_, outer), out in zip(items, outs, strict=True):
            outer.set_result(out)

    def close(self) -> None:
        """Hand the pending jobs to Ray, then shut Ray down if this backend started it."""
        if self._closed:
            return
        self._batcher.close()  # pending jobs are handed to Ray before it may shut down
        self._closed = True
        self.bars.clear()
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
