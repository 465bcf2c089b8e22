"""The parent's own peak memory: an honest run vs a trace of two million empty tuples.

    .venv/bin/python benchmarks/cli_peak_memory.py

Prints, for each strategy:

* cli    - ``python -m backtest.run FILE --check-lookahead`` on AAPL 2014-2015, the CLI
           process's RSS peak (``getrusage(RUSAGE_SELF)``: the parent alone, not its pool
           workers or sandboxed children) and its wall time;
* parent - ``run_sandboxed(job, trace=True)`` in this process: the ``tracemalloc`` peak of
           what the parent allocates while it reads, checks and books the child's line.

The payload writes its own result line (the nonce from its stack) with a trace of
2,000,000 empty arrays: 6 MB of JSON that ``json.loads`` would turn into ~150 MB of lists per
run (the lookahead check's 21 runs took the CLI to 3.1 GB). The parent now refuses a line
with more JSON items than the job's bars allow before parsing it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import date
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, Fold  # noqa: E402
from backtest.sandbox import SandboxPolicy, run_sandboxed, warm_worker  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "ohlcv" / "daily"

HONEST = """
import backtrader as bt


class Honest(bt.Strategy):
    params = dict(fast=10, slow=30)

    def __init__(self):
        self.cross = bt.ind.CrossOver(bt.ind.SMA(period=self.p.fast), bt.ind.SMA(period=self.p.slow))

    def next(self):
        if not self.position and self.cross[0] > 0:
            self.buy(size=10)
        elif self.position and self.cross[0] < 0:
            self.close()
"""

TUPLES = """
import backtrader as bt


class Tuples(bt.Strategy):
    def next(self):
        import json, os, sys
        f = sys._getframe()
        while f is not None and "nonce" not in f.f_locals:
            f = f.f_back
        nonce, job = f.f_locals["nonce"], f.f_locals["job"]
        log = {"fills": [], "values": "", "orders_rejected": 0}
        line = {"job_id": job.job_id, "nonce": nonce, "status": "ok", "error": None,
                "duration_s": 0.1, "log": log,
                "trace": {"orders": [[]] * 2_000_000, "lines": {}, "n_bars": 1}}
        os.write(3, json.dumps(line).encode() + b"\\n")
        os._exit(0)
"""

WRAPPER = """
import resource, runpy, sys
sys.argv = ARGV
try:
    runpy.run_module("backtest.run", run_name="__main__", alter_sys=True)
finally:
    sys.stderr.write("PEAK_KB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def cli(code: str, folder: Path) -> tuple[float, float, str]:
    """(RSS peak MB of the CLI process, wall seconds, status)."""
    strategy = folder / "strategy.py"
    strategy.write_text(code)
    argv = [
        "backtest.run",
        str(strategy),
        "--data-dir",
        str(folder),
        "--tickers",
        "AAPL",
        "--start",
        "2014-01-01",
        "--end",
        "2015-12-31",
        "--skip-validation",
        "--check-lookahead",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER.replace("ARGV", repr(argv))],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    peak = int(proc.stderr.split("PEAK_KB ")[1].split()[0]) / 1024
    status = json.loads(proc.stdout.strip().splitlines()[-1])["status"]
    return peak, wall, status


def parent(code: str, bars: pd.DataFrame) -> tuple[float, str]:
    """(tracemalloc peak MB of this process while one traced job runs, status)."""
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2014, 6, 2), end=date(2015, 12, 31)
    )
    job = BacktestJob(
        job_id="m", variant_id="m", code=code, symbol="AAPL", bars=bars, fold=fold, timeout_s=60.0
    )
    tracemalloc.start()
    try:
        out = run_sandboxed(job, SandboxPolicy(validate=False), trace=True)
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()
    return peak, out.result.status.value


def main() -> None:
    raw = pd.read_csv(DATA / "AAPL.csv")
    raw = raw[(raw["date"] >= "2013-01-01") & (raw["date"] <= "2015-12-31")]
    bars = raw.set_index(pd.DatetimeIndex(raw["date"]))[["open", "high", "low", "close", "volume"]]
    warm_worker()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        raw.to_csv(folder / "AAPL.csv", index=False)
        for name, code in (("honest", HONEST), ("2M tuples", TUPLES)):
            peak, wall, status = cli(code, folder)
            print(f"cli    {name:10s} RSS peak {peak:7.1f} MB  {wall:5.1f} s  status {status}")
    for name, code in (("honest", HONEST), ("2M tuples", TUPLES)):
        peak, status = parent(code, bars)
        print(f"parent {name:10s} tracemalloc peak {peak:6.1f} MB  status {status}")


if __name__ == "__main__":
    main()
