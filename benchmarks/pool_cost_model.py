"""Fit the pool's job cost model (``backtest.executors.batching.job_cost``) on real jobs.

    .venv/bin/python benchmarks/pool_cost_model.py

The plan balances chunks by expected cost: ``bars x (1 + BLOCK_WEIGHT x indicators) +
JOB_FIXED_BARS``. This runs the 5 family defaults on 3 symbols over 1-, 3- and 6-year
windows (45 jobs, in this process: the engine and the books, as a pool worker pays them),
fits ``seconds = a x bars + b x bars x indicators + c`` by least squares, and prints the
fitted ``b / a`` and ``c / a`` beside the constants in use, and how well each model explains
the measured times (R^2 and the worst relative error): job count (a constant), bars alone,
bars x indicators.
"""

from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.books import window_bars  # noqa: E402
from backtest.contracts import BacktestJob, CostModel, Fold  # noqa: E402
from backtest.engine import execute  # noqa: E402
from backtest.executors.batching import BLOCK_WEIGHT, JOB_FIXED_BARS, code_blocks  # noqa: E402
from benchmarks.backtest_throughput import load  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import default_spec  # noqa: E402
from strategies.spec import Family  # noqa: E402

SYMBOLS = ("AAPL", "MSFT", "NVDA")
YEARS = (1, 3, 6)


def main() -> None:
    rows = []
    for fam in Family:
        code = render(default_spec(fam))
        blocks = code_blocks(code)
        for sym in SYMBOLS:
            bars = load(sym)
            for years in YEARS:
                fold = Fold(
                    index=0,
                    warmup_start=date(2011, 1, 3),
                    start=date(2012, 1, 3),
                    end=date(2011 + years, 12, 31),
                )
                job = BacktestJob(
                    job_id=f"{fam.value}|{sym}|{years}y",
                    variant_id=fam.value,
                    code=code,
                    symbol=sym,
                    bars=bars,
                    fold=fold,
                    costs=CostModel(),
                )
                best = float("inf")
                for _ in range(2):
                    t = time.perf_counter()
                    execute(job)
                    best = min(best, time.perf_counter() - t)
                rows.append((window_bars(bars, fold), blocks, best))
    n, k, secs = (np.array(col, dtype=float) for col in zip(*rows, strict=True))
    (a, b, c), *_ = np.linalg.lstsq(np.column_stack([n, n * k, np.ones_like(n)]), secs, rcond=None)
    print(
        f"{len(rows)} jobs: {sorted(set(n.astype(int)))} bars, {sorted(set(k.astype(int)))} indicators"
    )
    print(
        f"fit: seconds = {a * 1e6:.1f} us x (bars x (1 + {b / a:.3f} x indicators) + {c / a:.0f})"
    )
    print(
        f"in use:                 bars x (1 + {BLOCK_WEIGHT:.3f} x indicators) + {JOB_FIXED_BARS:.0f}"
    )
    models = {
        "job count (equal costs)": np.ones_like(n),
        "bars": n + JOB_FIXED_BARS,
        "bars x indicators (in use)": n * (1 + BLOCK_WEIGHT * k) + JOB_FIXED_BARS,
    }
    for name, x in models.items():
        scale = float(x @ secs / (x @ x))  # the best proportional fit: plans only use ratios
        pred = scale * x
        r2 = 1 - ((secs - pred) ** 2).sum() / ((secs - secs.mean()) ** 2).sum()
        worst = float(np.max(np.abs(pred - secs) / secs))
        print(f"  {name:28s}: R^2 {r2:6.3f}, worst relative error {100 * worst:5.1f} %")


if __name__ == "__main__":
    main()
