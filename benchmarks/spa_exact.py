"""The gate's SPA p-value: ``arch.bootstrap.SPA`` against ``gate.spa_exact`` (the same p-value,
bit for bit, without the work the gate does not read).

    PYTHONPATH=. python benchmarks/spa_exact.py [--days 1500] [--trials 50,300] [--reps 1000]

For each trial count: one seeded T x K matrix of studentized loss differentials (Student-t
returns, a few trials better than the rest, as a run's trials are), both p-values, their
equality, and the best of ``--repeat`` timings. numba's first call (compile or cache load) is
timed apart.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.alpha import SPA_BLOCK  # noqa: E402
from gate.spa_exact import arch_pvalue, consistent_pvalue  # noqa: E402


def best_of(repeat: int, run) -> tuple[float, float]:
    best, value = float("inf"), float("nan")
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = run()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=1500)
    p.add_argument("--trials", default="50,300")
    p.add_argument("--reps", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    consistent_pvalue(rng.standard_normal((40, 3)), block_size=SPA_BLOCK, reps=10, seed=0)
    print(f"first call (compile or cache load): {time.perf_counter() - t0:.2f} s")
    for k in (int(x) for x in args.trials.split(",")):
        m = rng.standard_t(4, size=(args.days, k)) * rng.uniform(0.5, 2.0, size=k)
        m[:, : max(1, k // 10)] -= 0.08  # losses: a tenth of the trials do better
        t_arch, p_arch = best_of(
            args.repeat, lambda m=m: arch_pvalue(m, block_size=SPA_BLOCK, reps=args.reps, seed=7)
        )
        t_fast, p_fast = best_of(
            args.repeat,
            lambda m=m: consistent_pvalue(m, block_size=SPA_BLOCK, reps=args.reps, seed=7),
        )
        print(
            f"{args.days} days x {k} trials, {args.reps} reps: arch {t_arch:.2f} s, "
            f"spa_exact {t_fast:.2f} s ({t_arch / t_fast:.1f}x); p {p_arch:.4f} vs {p_fast:.4f}, "
            f"equal: {p_arch == p_fast}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
