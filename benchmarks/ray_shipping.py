"""Bytes shipped to Ray per job: bars pickled into every task (before) vs once per run (now).

    .venv/bin/python benchmarks/ray_shipping.py [--iterations 3] [--variants 5] [--symbols 4]

A develop-shaped workload on the corpus's daily bars: ``--iterations`` maps (a run's
iterations) of ``--variants`` variants x ``--symbols`` symbols x 3 walk-forward folds, every
job reading its symbol's one in-sample frame, as ``swarm.nodes.backtest.job_bars`` gives them.

* before: what the Ray backend sent until issue 30 item 3, computed on the same chunks: each
  chunk's jobs with their windows cut and shared (``batching.share_windows``), pickled
  (protocol 5), once per chunk;
* now: each chunk's packed jobs (slots instead of frames, ``ray_shipping.Bars.pack``) pickled,
  plus each distinct frame pickled once for the run (what ``ray.put`` stores).

The chunks are the Batcher's plan for 2 workers (``plan_chunks`` on the jobs' costs). Then the
same workload runs on a local Ray instance (2 CPUs, 127.0.0.1) through ``RayBackend``: its
shipping counters, its wall time, and its results compared with the process pool's.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, CostModel, Fold  # noqa: E402
from backtest.executors import ProcessPoolBackend  # noqa: E402
from backtest.executors.batching import (  # noqa: E402
    MAX_BATCH,
    code_blocks,
    job_cost,
    plan_chunks,
    share_windows,
)
from backtest.executors.ray_shipping import Bars  # noqa: E402
from benchmarks.backtest_throughput import load  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import TEMPLATES, spec_from_template  # noqa: E402
from strategies.spec import Family  # noqa: E402

SYMBOLS = ("AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "INTC", "CSCO", "ORCL")
FOLDS = tuple(
    Fold(
        index=k,
        warmup_start=date(2012 + 2 * k, 1, 3),
        start=date(2013 + 2 * k, 1, 2),
        end=date(2014 + 2 * k, 12, 31),
    )
    for k in range(3)
)
START, INSAMPLE_END = "2012-01-01", "2018-12-31"  # a run from 2012; its holdout stays sealed


def workload(iterations: int, variants: int, symbols: int) -> list[list[BacktestJob]]:
    """One list of jobs per iteration; every job of a symbol reads the same frame."""
    frames = {s: load(s).loc[START:INSAMPLE_END] for s in SYMBOLS[:symbols]}
    specs = [spec_from_template(fam, k) for fam in Family for k in range(len(TEMPLATES[fam]))]
    out = []
    for it in range(iterations):
        jobs = []
        for v in range(variants):
            spec = specs[(it * variants + v) % len(specs)]
            code = render(spec)
            for s, frame in frames.items():
                for fold in FOLDS:
                    jobs.append(
                        BacktestJob(
                            job_id=f"i{it}v{v}|{s}|f{fold.index}",
                            variant_id=f"i{it}v{v}",
                            code=code,
                            symbol=s,
                            bars=frame,
                            fold=fold,
                            costs=CostModel(),
                        )
                    )
        out.append(jobs)
    return out


def chunks(jobs: list[BacktestJob], workers: int) -> list[list[BacktestJob]]:
    """The Batcher's plan: same-code groups cut by cost for ``workers``."""
    groups: dict[str, list[BacktestJob]] = {}
    for job in jobs:
        groups.setdefault(job.code, []).append(job)
    ordered = list(groups.values())
    costs = [[job_cost(j, code_blocks(g[0].code)) for j in g] for g in ordered]
    return [ordered[g][a:b] for g, a, b in plan_chunks(costs, workers, MAX_BATCH)]


def _size(obj: object) -> int:
    return len(pickle.dumps(obj, protocol=5))


class _Put:
    """``ray.put`` for the byte count: each frame pickled once."""

    def __init__(self) -> None:
        self.bytes = 0

    def put(self, frame: object) -> int:
        self.bytes += _size(frame)
        return self.bytes


def measure(rounds: list[list[BacktestJob]], workers: int) -> tuple[int, int, int, int, int]:
    """(jobs, chunks, bytes before, bytes now, of which the frames put once)."""
    put = _Put()
    bars = Bars(put)
    before = now = n_chunks = 0
    for jobs in rounds:
        for chunk in chunks(jobs, workers):
            n_chunks += 1
            before += _size(share_windows(chunk))
            packed, refs = bars.pack(chunk)
            now += _size(packed) + _size(refs)
    return sum(len(r) for r in rounds), n_chunks, before, now + put.bytes, put.bytes


def on_ray(rounds: list[list[BacktestJob]]) -> None:
    """The workload through RayBackend (local, 2 CPUs), checked against the process pool."""
    try:
        import ray
    except ImportError:
        print("ray is not installed (pip install 'swarm-strategy-lab[ray]'): live run skipped")
        return
    from backtest.executors import RayBackend

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        backend = RayBackend(address=None, workers=2)
        t = time.perf_counter()
        got = [backend.map(jobs) for jobs in rounds]
        wall = time.perf_counter() - t
        stats = backend.bars.stats
        backend.close()
    finally:
        ray.shutdown()
    with ProcessPoolBackend(2) as pool:
        want = [pool.map(jobs) for jobs in rounds]
    same = all(
        a.status == b.status and a.metrics == b.metrics and a.returns == b.returns
        for ga, gb in zip(got, want, strict=True)
        for a, b in zip(ga, gb, strict=True)
    )
    print(
        f"RayBackend: {stats.jobs} jobs in {stats.tasks} tasks, {stats.frames} frames put "
        f"({stats.frame_bytes / 1e6:.2f} MB in memory), {wall:.1f} s; results equal the "
        f"process pool's job for job: {same}"
    )


def main() -> None:
    """Print the bytes per job, before and now, and the live run's counters."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--variants", type=int, default=5)
    ap.add_argument("--symbols", type=int, default=4, help=f"1..{len(SYMBOLS)}")
    ap.add_argument("--no-ray", action="store_true", help="bytes only, no live run")
    args = ap.parse_args()
    rounds = workload(args.iterations, args.variants, args.symbols)
    n, n_chunks, before, now, frames = measure(rounds, workers=2)
    print(f"{n} jobs in {n_chunks} chunks over {args.iterations} iterations")
    print("| | bytes shipped | per job |")
    print("|---|---|---|")
    print(f"| before (windows in every chunk) | {before:,} | {before / n:,.0f} |")
    print(f"| now (frames once, slots per chunk) | {now:,} | {now / n:,.0f} |")
    print(f"| of which the frames, once | {frames:,} | {frames / n:,.0f} |")
    print(f"ratio {before / now:.1f}x fewer bytes")
    if not args.no_ray:
        on_ray(rounds)


if __name__ == "__main__":
    main()
