"""Backtest throughput: raw backtrader vs our sandboxed executors, on the same jobs.

    .venv/bin/python benchmarks/backtest_throughput.py [--repeat 2] [--no-prefault]

40 jobs = 5 family defaults x 4 symbols x 2 folds of real daily data
(../shared/data/ohlcv/daily). Prints:

* raw    - plain backtrader in one process: for each job exec the code, build a
           cerebro with the same feed, broker, costs and strategy, run it;
           no sandbox, no analyzers, no metrics;
* ours/1 - ProcessPoolBackend(1): validation + forked, limited child per job,
           engine (warm-up gate, recorder analyzer, metrics), JSON back;
* ours/2 - ProcessPoolBackend(2), with the main thread's share of its wall time
           (``time.thread_time()`` of the calling thread over the ``map``: what submitting
           and collecting cost the orchestrator; ``benchmarks/pool_main_thread.py`` has more).

Each path's CPU seconds are printed too: raw and the in-process engine their process's; ours
this process's (every thread) plus the pool's workers' with every process they reaped (the
batch children and their job processes, ``/proc/PID/stat``). On a machine shared with other
work the wall times are the load's; the CPU share of the sandbox (ours/1's CPU over the
engine's) is what the sandbox costs, whatever the load.

Overhead = ours/1 vs raw; speed-up = ours/1 vs ours/2. Each figure is the best
of ``--repeat`` rounds (other processes on the machine add noise), with the median
of the per-round ratios beside it. The overhead is split into its two parts: our
engine in-process vs raw (recording, metrics, order gate; its list-backed pandas
feed makes it faster than raw) and the sandbox alone, ours/1 vs our engine
in-process (validation, forked limited children, pickling, JSON back). The sandbox's own
share is split once more: ``ours/1, jobs share a child`` runs the same sandbox with each
batch's jobs one after the other in their batch child (``SandboxPolicy(isolate_jobs=False)``,
never the lab's default), so ours/1 over it is what each job's process of its own costs (its
fork, its copy-on-write faults, its exit). ``--no-prefault`` runs ours/1 and ours/2 with each
job's process taking its page faults as it runs, not copying its pages while it waits
(``backtest.sandbox.prefault``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import types
from datetime import date
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.books import feed_frame  # noqa: E402
from backtest.compat import import_backtrader  # noqa: E402
from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus  # noqa: E402
from backtest.engine import run_job  # noqa: E402
from backtest.executors import ProcessPoolBackend  # noqa: E402
from backtest.sandbox import SandboxPolicy  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import default_spec  # noqa: E402
from strategies.spec import Family  # noqa: E402

bt = import_backtrader()
# What each job's process of its own costs (issue 24 item 7): the same sandbox with a batch's
# jobs run one after the other in their batch child. Measured, never the lab's default: a
# job's leftovers (threads, patches) would then reach the next job's nonce and window.
SHARED_CHILD = SandboxPolicy(isolate_jobs=False)
DATA = ROOT.parent / "shared" / "data" / "ohlcv" / "daily"
SYMBOLS = ("AAPL", "MSFT", "NVDA", "AMZN")
FOLDS = (
    Fold(index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2015, 12, 31)),
    Fold(index=1, warmup_start=date(2015, 1, 2), start=date(2016, 1, 4), end=date(2018, 12, 31)),
)


def load(symbol: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / f"{symbol}.csv", parse_dates=["date"]).set_index("date")
    return df[["open", "high", "low", "close", "volume"]].astype("float64")


def make_jobs() -> list[BacktestJob]:
    bars = {s: load(s) for s in SYMBOLS}
    jobs = []
    for fam in Family:
        code = render(default_spec(fam))
        for sym in SYMBOLS:
            for fold in FOLDS:
                jobs.append(
                    BacktestJob(
                        job_id=f"{fam.value}|{sym}|f{fold.index}",
                        variant_id=fam.value,
                        code=code,
                        symbol=sym,
                        bars=bars[sym],
                        fold=fold,
                        costs=CostModel(),
                    )
                )
    return jobs


def raw_run(job: BacktestJob) -> float:
    """Plain backtrader: what a researcher's own loop would do."""
    module = types.ModuleType(f"raw_{job.job_id.replace('|', '_')}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(job.code, module.__name__, "exec"), module.__dict__)
        cls = next(
            o
            for o in vars(module).values()
            if isinstance(o, type)
            and issubclass(o, bt.Strategy)
            and o.__module__ == module.__name__
        )
        cerebro = bt.Cerebro(stdstats=False, preload=True, runonce=True, maxcpus=1)
        frame = feed_frame(job.bars, job.fold)
        cerebro.adddata(bt.feeds.PandasData(dataname=frame, openinterest=None), name=job.symbol)
        cerebro.addstrategy(cls)
        cerebro.broker.setcash(job.costs.cash)
        cerebro.broker.setcommission(commission=job.costs.commission_pct / 100.0)
        cerebro.broker.set_slippage_perc(job.costs.slippage_pct / 100.0)
        with contextlib.redirect_stdout(io.StringIO()):
            cerebro.run()
        return cerebro.broker.getvalue()
    finally:
        sys.modules.pop(module.__name__, None)


def time_raw(jobs: list[BacktestJob]) -> tuple[float, float]:
    c, t = time.process_time(), time.perf_counter()
    for job in jobs:
        raw_run(job)
    return time.perf_counter() - t, time.process_time() - c


def time_engine(jobs: list[BacktestJob]) -> tuple[float, float]:
    """Our engine in this process, no sandbox: separates engine from sandbox cost."""
    c, t = time.process_time(), time.perf_counter()
    for job in jobs:
        run_job(job)
    return time.perf_counter() - t, time.process_time() - c


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds of processes and of their reaped descendants (``/proc/PID/stat``: utime,
    stime, cutime, cstime): a worker, the batch children it reaped, their job processes."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / tick  # fields 14-17 of stat(5)
    return total


def time_ours(
    jobs: list[BacktestJob], workers: int, policy: SandboxPolicy | None = None
) -> tuple[float, float, float, float]:
    """Wall seconds, the main thread's CPU seconds over them, and the CPU seconds of the whole
    run: this process's (every thread) and the workers' with everything they reaped (their
    batch children and job processes, which end with their batch), and this process's part."""
    with ProcessPoolBackend(workers, policy=policy) as pool:
        # Start and warm the workers outside the timing (a run's pool lives for the run).
        list(pool.map(jobs[:workers]))
        time.sleep(0.5)  # the warm-up's batch children reaped before the first reading
        # the pool's worker processes (private: a benchmark's reading, not an API)
        pids = list(pool._pool.executor._processes)  # type: ignore[union-attr]
        cpu0, own0 = tree_cpu(pids), time.process_time()
        c, t = time.thread_time(), time.perf_counter()
        results = pool.map(jobs)
        elapsed, main_cpu = time.perf_counter() - t, time.thread_time() - c
        own = time.process_time() - own0
        time.sleep(0.5)  # the last batch children reaped
        tree = tree_cpu(pids) - cpu0
    bad = [r for r in results if r.status != JobStatus.OK]
    if bad:
        raise SystemExit(f"{len(bad)} job(s) failed: {bad[0].error}")
    return elapsed, main_cpu, own + tree, own


def _best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--no-prefault",
        action="store_true",
        help="ours/1 and ours/2 without the job processes' prefault (SandboxPolicy(prefault=False))",
    )
    args = ap.parse_args()
    policy = SandboxPolicy(prefault=False) if args.no_prefault else None
    jobs = make_jobs()
    n_bars = sum(len(feed_frame(j.bars, j.fold)) for j in jobs)
    raw_run(jobs[0])  # first-call warm-up, as our workers get
    run_job(jobs[0])
    # Rounds interleave the four measurements, so drift in the machine's speed (other
    # processes, frequency) hits all of them alike; figures are best-of-rounds, and the
    # overhead is also given as the median of the per-round ratios.
    rounds = []
    for _ in range(args.repeat):
        rounds.append(
            (
                time_raw(jobs),
                time_engine(jobs),
                time_ours(jobs, 1, policy),
                time_ours(jobs, 2, policy),
                time_ours(jobs, 1, SHARED_CHILD),
            )
        )
    raw, raw_cpu = _best([r[0] for r in rounds])
    eng, eng_cpu = _best([r[1] for r in rounds])
    one, _ = _best([r[2] for r in rounds])
    two, _ = _best([r[3] for r in rounds])
    one_cpu = min(r[2][2] for r in rounds)
    one_own = min(r[2][3] for r in rounds)
    two_cpu = min(r[3][2] for r in rounds)
    shared, _ = _best([r[4] for r in rounds])
    shared_cpu = min(r[4][2] for r in rounds)
    isolation = _median([r[2][0] / r[4][0] for r in rounds])
    isolation_cpu = _median([r[2][2] / r[4][2] for r in rounds])
    shared_share = _median([r[4][0] / r[1][0] for r in rounds])
    sandbox_cpu_share = _median([r[2][2] / r[1][1] for r in rounds])
    main_share = _median([r[3][1] / r[3][0] for r in rounds])
    overhead = _median([r[2][0] / r[0][0] for r in rounds])
    engine_share = _median([r[1][0] / r[0][0] for r in rounds])
    sandbox_share = _median([r[2][0] / r[1][0] for r in rounds])
    speedup = _median([r[2][0] / r[3][0] for r in rounds])
    load1 = os.getloadavg()[0]
    print(
        f"jobs: {len(jobs)} ({len(Family)} families x {len(SYMBOLS)} symbols x {len(FOLDS)} folds), "
        f"{n_bars} bars, cores: {os.cpu_count()}, load avg at end: {load1:.2f}"
    )
    print("                               wall s   bars/s    CPU s")
    print(f"raw backtrader, 1 process    : {raw:7.2f} {n_bars / raw:8.0f} {raw_cpu:8.2f}")
    print(f"our engine in-process (no sb): {eng:7.2f} {n_bars / eng:8.0f} {eng_cpu:8.2f}")
    print(f"ours, 1 worker (sandboxed)   : {one:7.2f} {n_bars / one:8.0f} {one_cpu:8.2f}")
    print(f"ours, 2 workers (sandboxed)  : {two:7.2f} {n_bars / two:8.0f} {two_cpu:8.2f}")
    print(f"ours/1, jobs share a child   : {shared:7.2f} {n_bars / shared:8.0f} {shared_cpu:8.2f}")
    n = len(rounds)
    print(f"                                best   median of {n} paired rounds")
    print(
        f"overhead vs raw, wall        : {100 * (one / raw - 1):+6.1f} %  {100 * (overhead - 1):+6.1f} %"
        "   (target <= 10 %)"
    )
    print(
        f"  engine in-process vs raw   : {100 * (eng / raw - 1):+6.1f} %  {100 * (engine_share - 1):+6.1f} %"
    )
    print(
        f"  sandbox: ours/1 vs engine  : {100 * (one / eng - 1):+6.1f} %  {100 * (sandbox_share - 1):+6.1f} %"
        f"   ({1000 * (one - eng) / len(jobs):+.1f} ms per job)"
    )
    print(
        f"  sandbox in CPU time        : {100 * (one_cpu / eng_cpu - 1):+6.1f} %  "
        f"{100 * (sandbox_cpu_share - 1):+6.1f} %   ({1000 * (one_cpu - eng_cpu) / len(jobs):+.1f} "
        "ms CPU per job: ours/1's processes, workers and what they reaped, vs the engine's)"
    )
    print(
        f"    of which this process    : {1000 * one_own / len(jobs):6.1f} ms CPU per job (submitting, "
        "the result stream)"
    )
    print(
        f"  of which each job's process: {100 * (one / shared - 1):+6.1f} %  {100 * (isolation - 1):+6.1f} %"
        f"   wall, {100 * (isolation_cpu - 1):+.1f} % CPU (median) over jobs sharing their batch"
        f" child ({1000 * (one - shared) / len(jobs):+.1f} ms per job); without it the sandbox's"
        f" share would be {100 * (shared / eng - 1):+.1f} % ({100 * (shared_share - 1):+.1f} %)"
    )
    print(
        f"speed-up 2 vs 1 workers      : {one / two:6.2f} x  {speedup:6.2f} x   (target >= 1.8 x)"
    )
    print(
        f"main thread, 2 workers       :          {100 * main_share:6.2f} %   of the wall "
        "(median; target < 2 %)"
    )


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


if __name__ == "__main__":
    main()
