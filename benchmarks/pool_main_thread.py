"""The sandboxed pool's orchestrator side: how much of a run's wall time the main thread costs.

    .venv/bin/python benchmarks/pool_main_thread.py [--workers 2] [--repeat 3] [--json]

A realistic batch: the 5 family defaults x 5 symbols x 3 walk-forward folds (75 jobs) of real
daily data (../shared/data/ohlcv/daily), run through ``ProcessPoolBackend(workers).map`` with a
result callback, as a run's graph does. Method:

* main thread share = ``time.thread_time()`` of the calling (main) thread over the ``map`` call
  divided by its wall time: the per-job preparation the caller pays (submitting, trimming,
  hashing, the result callbacks); per job, and projected to 16 workers (16 x that per-job
  cost over the mean job's run time: the main thread serves one job per worker per job);
* orchestrator CPU share = ``time.process_time()`` of this process (every thread: the batcher,
  the pool's manager and queue feeder, result readers) over the same wall time;
* batcher thread per job = the CPU time of the ``backtest-batcher`` thread (planning, and
  whatever the dispatch does with the bars: publishing or cutting windows, pickling the chunk)
  over the ``map`` (its POSIX thread CPU clock), per job;
* streaming: when the first result arrived, and how many arrived before the last 10% of the
  wall time (a pool that returns whole chunks delivers most results late, in bursts);
* utilisation = the jobs' own run time (``duration_s``, measured in the children) over
  ``workers x wall``: what the forks, the books and idle workers leave to the backtests.

Each figure is the median of ``--repeat`` rounds (the machine is shared; timings are noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus  # noqa: E402
from backtest.executors import ProcessPoolBackend  # noqa: E402
from benchmarks.backtest_throughput import load  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import default_spec  # noqa: E402
from strategies.spec import Family  # noqa: E402

SYMBOLS = ("AAPL", "MSFT", "NVDA", "AMZN", "GOOG")
FOLDS = (
    Fold(index=0, warmup_start=date(2011, 1, 3), start=date(2012, 1, 3), end=date(2014, 12, 31)),
    Fold(index=1, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2017, 12, 29)),
    Fold(index=2, warmup_start=date(2017, 1, 3), start=date(2018, 1, 2), end=date(2020, 12, 31)),
)


def make_jobs() -> list[BacktestJob]:
    """Every job of a symbol shares its whole history, as a run's jobs do."""
    bars = {s: load(s) for s in SYMBOLS}
    return [
        BacktestJob(
            job_id=f"{fam.value}|{sym}|f{fold.index}",
            variant_id=fam.value,
            code=render(default_spec(fam)),
            symbol=sym,
            bars=bars[sym],
            fold=fold,
            costs=CostModel(),
        )
        for fam in Family
        for sym in SYMBOLS
        for fold in FOLDS
    ]


def batcher_cpu_s() -> float:
    """CPU seconds of the ``backtest-batcher`` thread so far (its POSIX thread CPU clock:
    nanoseconds, where ``/proc``'s ticks are 10 ms); 0 before it started."""
    for thread in threading.enumerate():
        if thread.name == "backtest-batcher" and thread.ident is not None:
            try:
                return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, AttributeError):  # ended meanwhile, or no such clock here
                return 0.0
    return 0.0


def measure(pool: ProcessPoolBackend, jobs: list[BacktestJob]) -> dict[str, float]:
    """One ``map`` of ``jobs`` on a warm pool: the figures of the module's docstring."""
    arrivals: list[float] = []
    t0 = time.perf_counter()

    def on_result(_: BacktestResult) -> None:
        arrivals.append(time.perf_counter() - t0)

    thread0, proc0, batcher0 = time.thread_time(), time.process_time(), batcher_cpu_s()
    t0 = time.perf_counter()
    results = pool.map(jobs, on_result)
    wall = time.perf_counter() - t0
    thread, proc = time.thread_time() - thread0, time.process_time() - proc0
    batcher = batcher_cpu_s() - batcher0
    bad = [r for r in results if r.status != JobStatus.OK]
    if bad:
        raise SystemExit(f"{len(bad)} job(s) failed: {bad[0].error}")
    busy = sum(r.duration_s for r in results)
    return {
        "wall_s": wall,
        "main_thread_pct": 100 * thread / wall,
        "main_thread_ms_per_job": 1000 * thread / len(jobs),
        # the same per-job cost against 16 workers' pace (one job per worker every mean job)
        "main_thread_pct_at_16": 100 * 16 * thread / busy,
        "orchestrator_cpu_pct": 100 * proc / wall,
        "batcher_ms_per_job": 1000 * batcher / len(jobs),
        "orchestrator_ms_per_job": 1000 * proc / len(jobs),
        "first_result_s": min(arrivals),
        "early_results_pct": 100 * sum(a < 0.9 * wall for a in arrivals) / len(arrivals),
        "utilisation_pct": 100 * busy / (pool.workers * wall),
    }


def run(workers: int, repeat: int, jobs: list[BacktestJob] | None = None) -> dict[str, float]:
    """Median figures of ``repeat`` maps on one warm pool of ``workers``."""
    jobs = jobs if jobs is not None else make_jobs()
    rounds = []
    with ProcessPoolBackend(workers) as pool:
        pool.map(jobs[: 2 * workers])  # start and warm the workers outside the timing
        for _ in range(repeat):
            rounds.append(measure(pool, jobs))
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    jobs = make_jobs()
    fig = run(args.workers, args.repeat, jobs)
    if args.json:
        print(json.dumps({k: round(v, 4) for k, v in fig.items()} | {"jobs": len(jobs)}))
        return
    print(
        f"jobs: {len(jobs)} ({len(Family)} families x {len(SYMBOLS)} symbols x {len(FOLDS)} "
        f"folds), workers: {args.workers}, median of {args.repeat} rounds"
    )
    print(f"wall                      : {fig['wall_s']:7.2f} s")
    print(f"main thread share of wall : {fig['main_thread_pct']:7.2f} %   (target < 2 %)")
    print(
        f"main thread per job       : {fig['main_thread_ms_per_job']:7.3f} ms"
        f"  (at 16 workers: {fig['main_thread_pct_at_16']:.2f} % of the wall)"
    )
    print(f"batcher thread per job    : {fig['batcher_ms_per_job']:7.3f} ms")
    print(
        f"orchestrator CPU share    : {fig['orchestrator_cpu_pct']:7.2f} %   (all its threads;"
        f" {fig['orchestrator_ms_per_job']:.3f} ms a job)"
    )
    print(f"first result after        : {fig['first_result_s']:7.2f} s")
    print(f"results before 90% of wall: {fig['early_results_pct']:7.1f} %")
    print(
        f"worker utilisation        : {fig['utilisation_pct']:7.1f} %   (job run time / W x wall)"
    )


if __name__ == "__main__":
    main()
