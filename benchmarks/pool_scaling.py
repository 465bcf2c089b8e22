"""How the process pool scales with cores: 160 and 480 jobs on 1, 2 and every core.

    .venv/bin/python benchmarks/pool_scaling.py [--jobs 160,480] [--workers 1,2,all] [--repeat 1]

The jobs are the lab's own: the 5 block-family defaults x 16 tech symbols of the corpus
(../shared/data/ohlcv/daily) x 2 folds (160 jobs) or 6 folds (480 jobs), each a sandboxed
Backtrader run through ``ProcessPoolBackend`` exactly as a develop run submits them (one
``map``: micro-batched into cost-balanced chunks, ``backtest.executors.batching``). Each pool
is started and warmed before its timing (a run's pool lives for the run). Prints, per job
count, the wall time on each worker count, the speed-up over one worker and the efficiency
(speed-up / workers), so a machine with many cores reports its scaling in one command; on a
2-core machine only 1 and 2 exist. Best of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus  # noqa: E402
from backtest.executors import ProcessPoolBackend  # noqa: E402
from benchmarks.backtest_throughput import load  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import default_spec  # noqa: E402
from strategies.spec import Family  # noqa: E402

SYMBOLS = (
    "AAPL",
    "ADBE",
    "AMD",
    "AMZN",
    "AVGO",
    "CRM",
    "CSCO",
    "GOOG",
    "IBM",
    "INTC",
    "MSFT",
    "NFLX",
    "NVDA",
    "ORCL",
    "QCOM",
    "TXN",
)
# Six one-year folds, each with a year of warm-up: 2 of them make 160 jobs, all 6 make 480.
FOLDS = tuple(
    Fold(
        index=k,
        warmup_start=date(2012 + k, 1, 3),
        start=date(2013 + k, 1, 2),
        end=date(2013 + k, 12, 31),
    )
    for k in range(6)
)
PER_FOLD = len(Family) * len(SYMBOLS)  # 80 jobs a fold


def make_jobs(n: int) -> list[BacktestJob]:
    """``n`` jobs (a multiple of 80): every family default on every symbol, fold by fold."""
    if n % PER_FOLD or not 0 < n // PER_FOLD <= len(FOLDS):
        raise SystemExit(f"--jobs: {n} is not 80, 160, ... {PER_FOLD * len(FOLDS)}")
    bars = {s: load(s) for s in SYMBOLS}
    codes = {fam: render(default_spec(fam)) for fam in Family}
    return [
        BacktestJob(
            job_id=f"{fam.value}|{sym}|f{fold.index}",
            variant_id=fam.value,
            code=codes[fam],
            symbol=sym,
            bars=bars[sym],
            fold=fold,
            costs=CostModel(),
        )
        for fold in FOLDS[: n // PER_FOLD]
        for fam in Family
        for sym in SYMBOLS
    ]


def time_pool(jobs: list[BacktestJob], workers: int) -> float:
    """Wall seconds of one ``map`` of ``jobs`` on a warmed pool of ``workers``."""
    with ProcessPoolBackend(workers) as pool:
        list(pool.map(jobs[:workers]))  # start and warm the workers outside the timing
        t = time.perf_counter()
        results = pool.map(jobs)
        elapsed = time.perf_counter() - t
    bad = [r for r in results if r.status != JobStatus.OK]
    if bad:
        raise SystemExit(f"{len(bad)} job(s) failed: {bad[0].error}")
    return elapsed


def _counts(text: str, cores: int) -> list[int]:
    out = []
    for part in text.split(","):
        n = cores if part.strip() == "all" else int(part)
        if n < 1:
            raise SystemExit(f"--workers: {part!r} is not a positive count or 'all'")
        out.append(n)
    return sorted(set(out))


def main() -> None:
    """Print the scaling table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="160,480", help="job counts, multiples of 80 (<= 480)")
    ap.add_argument("--workers", default="1,2,all", help="worker counts; 'all' = every core")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the best is kept")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    counts = _counts(args.workers, cores)
    if 1 not in counts:
        counts = [1, *counts]  # the speed-up is over one worker
    print(f"{cores} cores; load average {os.getloadavg()[0]:.1f} at the start")
    print("| jobs | workers | wall s | speed-up | efficiency |")
    print("|---|---|---|---|---|")
    for n in (int(x) for x in args.jobs.split(",")):
        jobs = make_jobs(n)
        base = None
        for w in counts:
            wall = min(time_pool(jobs, w) for _ in range(max(1, args.repeat)))
            base = wall if w == 1 else base
            speed = base / wall if base else float("nan")
            print(f"| {n} | {w} | {wall:.2f} | {speed:.2f}x | {speed / w:.0%} |", flush=True)


if __name__ == "__main__":
    main()
