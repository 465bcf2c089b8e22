"""How the cross-sectional (portfolio) path grows with the universe: screen, Backtrader, memory.

    python benchmarks/wide_universe.py [--symbols-list 10,100,500] [--years 10] [--sets 1000]
                                       [--timeout 0] [--long-short] [--workers W] [--json]
    python benchmarks/wide_universe.py --symbols-list 10,20 --sets 50 --years 3   # a quick check

For each N of ``--symbols-list``, in a fresh process of its own (this script again, with the
hidden ``--one N``: the memory peaks do not accumulate over N):

1. **Data.** A ``cross_sectional`` synthetic universe of N symbols x ``--years`` years (the
   calibration's generator, ``swarm.calibration.synthetic_universe.write_universe``, fixed
   seed) written as ``SYMBOL.csv`` files into a temp folder, read back through the lab's CSV
   source (``backtest.data.load_universe``). One window: the first ``WARMUP_BARS`` bars warm
   up (the folds' default warm-up, ``backtest.splits``), orders and returns from there to the
   last bar.
2. **Screen.** ``--sets`` parameter sets of cross-sectional momentum drawn as the screen
   tuner draws them (``strategies.mutate.neighbourhood`` around the family's default,
   ``strategies.portfolio.portfolio_spec``), screened on the universe's window
   (``backtest.screen.portfolio_windows_for`` + ``screen_sets``, what
   ``swarm.nodes.screen_tuner`` runs, its sets split over ``--workers`` processes: this one
   and forked children, ``backtest.screen.split``; default every core). The numba JIT
   (compile or cache load) is paid first on a two-symbol window and timed apart.
3. **Backtrader.** The top-ranked set rendered (``strategies.codegen.render``) and run once
   over the same window as a portfolio job (``BacktestJob`` with every symbol's bars,
   ``backtest.engine.execute`` in-process: the engine and the books, as a pool worker runs it,
   without the sandbox).

Columns of the table (``xN``: the growth factor from the previous row; a linear cost grows as
N does):

* ``N``        - symbols in the universe;
* ``bars/sym`` - bars per symbol (warm-up included);
* ``screen s`` - wall seconds of ``screen_sets`` over every set (the windows built before it);
* ``ms/set``   - the same per parameter set;
* ``CPU s``    - the screen's CPU seconds, this process's (``time.process_time``) and its
                 forked children's (``RUSAGE_CHILDREN``): what the code costs, where
                 ``screen s`` is what a busy machine (and the cores) let it have;
* ``jit s``    - the numba JIT warm-up, excluded from ``screen s``;
* ``BT s``     - wall seconds of the Backtrader confirmation (``execute``, books included);
                 ``!`` marks a run longer than the lab's wall limit for that job
                 (``backtest.job_timeout.scaled_timeout``: 120 s up to 500,000 symbol-bars,
                 proportionally more beyond), where the develop loop's job would time out;
* ``RSS MB``   - the process's peak resident memory at the end (``getrusage(RUSAGE_SELF)``).

A second table splits the phases: generating and writing the universe, reading it back,
building the screen's window; the RSS peak after each phase (start: the imports; then the
data, the JIT with the sets' sampling and its scipy import, the screen, Backtrader; a peak
only grows, so a phase that does not raise it stayed under the earlier one); the best set's
screened Sharpe and trades beside Backtrader's (they agree when the screen reproduces the
run); and the pickled size of the job as the pool would send it (``backtest.engine.trim_bars``).
Timings need an idle machine: every phase runs on one core.
With ``--json`` the last line is ``{"years", "sets", "rows": [{"n_symbols", "screen_s",
"screen_cpu_s", "ms_per_set", "jit_s", "bt_s", "peak_rss_mb", ...}, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, CostModel, Fold  # noqa: E402
from backtest.data import load_universe  # noqa: E402
from backtest.engine import execute, trim_bars  # noqa: E402
from backtest.job_timeout import scaled_timeout  # noqa: E402
from backtest.screen import (  # noqa: E402
    portfolio_windows_for,
    screen_sets,
    supported_portfolio,
)
from gate.contracts import Criteria  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.mutate import neighbourhood  # noqa: E402
from strategies.portfolio import LABEL, portfolio_spec  # noqa: E402
from strategies.spec import PortfolioFamily  # noqa: E402
from swarm.calibration.synthetic_universe import UniverseSpec, write_universe  # noqa: E402

SEED = 7
START = date(2010, 1, 1)
WARMUP_BARS = 200  # backtest.splits.walk_forward_folds' default warm-up
BARS_PER_YEAR = 252
LAB_TIMEOUT_S = BacktestJob.__dataclass_fields__["timeout_s"].default
MIN_TRADES = Criteria.model_fields["min_trades"].default


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def children_cpu_s() -> float:
    """CPU seconds of this process's reaped children (the screen's forked chunks)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one(n: int, years: float, n_sets: int, timeout: float, long_short: bool, workers: int) -> dict:
    """Every phase for a universe of ``n`` symbols, in this process; the figures."""
    out: dict = {"n_symbols": n, "rss_start_mb": peak_rss_mb()}
    costs = CostModel()
    with tempfile.TemporaryDirectory(prefix="wide-universe-") as tmp:
        spec = UniverseSpec(
            kind="cross_sectional",
            seed=SEED,
            n_symbols=n,
            years=years,
            start=START,
        )
        started = time.perf_counter()
        meta = write_universe(spec, tmp)
        out["gen_s"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        loaded = load_universe(
            meta["symbols"],
            start=date.fromisoformat(meta["start"]),
            end=date.fromisoformat(meta["end"]),
            source="csv",
            data_dir=Path(tmp),
        )
        out["load_s"] = round(time.perf_counter() - started, 3)
    frames = {s: lb.bars for s, lb in loaded.items()}
    index = next(iter(frames.values())).index
    out["bars_per_symbol"] = len(index)
    fold = Fold(
        index=0,
        warmup_start=index[0].date(),
        start=index[WARMUP_BARS].date(),
        end=index[-1].date(),
    )
    out["rss_data_mb"] = peak_rss_mb()

    parent = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, long_short=long_short)
    assert supported_portfolio(parent), parent.name
    ranked = {"costs": costs, "bars_per_year": BARS_PER_YEAR, "periods_per_year": BARS_PER_YEAR}
    # The screen tuner's sample: a pure function of the seed (run seed, iteration, round, 1).
    # Drawn first: its scipy import (~55 MB) then counts before the screen's RSS, not in it.
    specs = neighbourhood(parent, n_sets, seed=(SEED, 1, 1, 1), seen=set())
    # The JIT (compile, or numba's cache load) on a window of two symbols, apart.
    started = time.perf_counter()
    tiny = portfolio_windows_for(dict(list(frames.items())[:2]), [fold])
    screen_sets([parent], tiny, **ranked)
    out["jit_s"] = round(time.perf_counter() - started, 3)
    out["rss_jit_mb"] = peak_rss_mb()  # and the sampling's scipy: ~55 MB

    started = time.perf_counter()
    windows = portfolio_windows_for(frames, [fold])
    out["windows_s"] = round(time.perf_counter() - started, 3)
    started, cpu = time.perf_counter(), time.process_time() + children_cpu_s()
    sweep = screen_sets(specs, windows, min_trades=MIN_TRADES, workers=workers, **ranked)
    out["screen_s"] = round(time.perf_counter() - started, 3)
    out["screen_cpu_s"] = round(time.process_time() + children_cpu_s() - cpu, 3)
    out["workers"] = workers
    out["sets"] = len(specs)
    out["ms_per_set"] = round(out["screen_s"] / max(len(specs), 1) * 1e3, 3)
    out["rss_screen_mb"] = peak_rss_mb()

    best = sweep.top(1)[0]
    out["best"] = best.spec.name.split(" | ", 1)[-1]
    out["screen_sharpe"] = best.sharpe
    out["screen_trades"] = best.n_trades
    del sweep, windows, tiny  # what the confirmation does not need (the pool's worker has none)
    job = BacktestJob(
        job_id=f"wide|{LABEL}|f0",
        variant_id="wide",
        code=render(best.spec, bars_per_year=BARS_PER_YEAR),
        symbol=LABEL,
        bars=frames,
        fold=fold,
        costs=costs,
        periods_per_year=BARS_PER_YEAR,
        timeout_s=timeout,
    )
    started = time.perf_counter()
    run = execute(job)
    out["bt_s"] = round(time.perf_counter() - started, 3)
    out["lab_timeout_s"] = round(scaled_timeout(frames), 1)
    out["rss_bt_mb"] = peak_rss_mb()
    result = run.result
    out["bt_status"] = result.status.value
    out["bt_error"] = result.error
    out["bt_sharpe"] = result.metrics.sharpe if result.metrics else None
    out["bt_trades"] = len(result.trade_pnls)
    out["peak_rss_mb"] = out["rss_bt_mb"]
    del run
    out["job_pickle_mb"] = round(len(pickle.dumps(trim_bars(job))) / (1 << 20), 2)
    return out


def run_child(n: int, args: argparse.Namespace) -> dict:
    """``one(n)`` in a fresh interpreter: its own memory peak. Its stderr passes through."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(n)]
    cmd += ["--years", str(args.years), "--sets", str(args.sets), "--timeout", str(args.timeout)]
    cmd += ["--workers", str(args.workers)]
    cmd += ["--long-short"] if args.long_short else []
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    wall = round(time.perf_counter() - started, 1)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"n_symbols": n, "error": f"exit code {proc.returncode}", "process_s": wall}
    return json.loads(lines[-1]) | {"process_s": wall}


def _growth(rows: list[dict], k: int, key: str) -> str:
    """``xF``: row ``k``'s ``key`` over the previous row's (blank for the first row)."""
    if k == 0 or "error" in rows[k] or "error" in rows[k - 1]:
        return ""
    prev, now = rows[k - 1].get(key), rows[k].get(key)
    if not prev or now is None:
        return ""
    return f"x{now / prev:.1f}"


def _fmt(value: float | None, digits: int) -> str:
    """``value`` with ``digits`` decimals; ``-`` for none (an undefined Sharpe)."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


def print_tables(rows: list[dict]) -> None:
    head = (
        f"{'N':>5} {'xN':>5}  {'bars/sym':>8}  {'screen s':>8} {'x':>5}  {'ms/set':>8} {'x':>5}"
        f"  {'CPU s':>7}  {'jit s':>6}  {'BT s':>8} {'x':>5}  {'RSS MB':>7} {'x':>5}"
    )
    print(head)
    print("-" * len(head))
    for k, r in enumerate(rows):
        if "error" in r:
            print(f"{r['n_symbols']:>5}  failed: {r['error']} after {r['process_s']} s")
            continue
        late = "!" if r["bt_s"] > r.get("lab_timeout_s", LAB_TIMEOUT_S) else " "
        print(
            f"{r['n_symbols']:>5} {_growth(rows, k, 'n_symbols'):>5}  {r['bars_per_symbol']:>8}"
            f"  {r['screen_s']:>8.2f} {_growth(rows, k, 'screen_s'):>5}"
            f"  {r['ms_per_set']:>8.2f} {_growth(rows, k, 'ms_per_set'):>5}"
            f"  {r.get('screen_cpu_s', math.nan):>7.2f}  {r['jit_s']:>6.2f}  {r['bt_s']:>7.2f}{late} {_growth(rows, k, 'bt_s'):>5}"
            f"  {r['peak_rss_mb']:>7.0f} {_growth(rows, k, 'peak_rss_mb'):>5}"
        )
    limits = ", ".join(
        f"{r['n_symbols']}: {r.get('lab_timeout_s', LAB_TIMEOUT_S):g} s"
        for r in rows
        if "error" not in r
    )
    print(f"(! BT longer than the lab's wall limit for the job; limits {limits})")
    print()
    head = (
        f"{'N':>5}  {'gen s':>6} {'load s':>6} {'window s':>8}"
        f"  {'RSS MB: start':>13} {'data':>6} {'jit':>6} {'screen':>6} {'BT':>6}"
        f"  {'Sharpe scr/BT':>15} {'trades scr/BT':>13} {'job MB':>7}  best set"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            continue
        status = "" if r["bt_status"] == "ok" else f"  BT {r['bt_status']}: {r['bt_error']}"
        sharpes = f"{_fmt(r['screen_sharpe'], 3)}/{_fmt(r['bt_sharpe'], 3)}"
        trades = f"{r['screen_trades']}/{r['bt_trades']}"
        print(
            f"{r['n_symbols']:>5}  {r['gen_s']:>6.2f} {r['load_s']:>6.2f} {r['windows_s']:>8.2f}"
            f"  {r['rss_start_mb']:>13.0f} {r['rss_data_mb']:>6.0f} {r['rss_jit_mb']:>6.0f}"
            f" {r['rss_screen_mb']:>6.0f} {r['rss_bt_mb']:>6.0f}  {sharpes:>15} {trades:>13} {r['job_pickle_mb']:>7.1f}"
            f"  {r['best']}{status}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--symbols-list", default="10,100,500", help="universe sizes, in order")
    p.add_argument("--years", type=float, default=10.0)
    p.add_argument("--sets", type=int, default=1000, help="parameter sets screened per N")
    p.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="the Backtrader job's wall-clock limit, seconds (0: none; the lab's is "
        f"{LAB_TIMEOUT_S:g})",
    )
    p.add_argument("--long-short", action="store_true", help="screen the long/short design")
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes the screen's sets are split over (default: every core)",
    )
    p.add_argument("--json", action="store_true", help="last line: the figures as JSON")
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if int(round(args.years * BARS_PER_YEAR)) < WARMUP_BARS + 2 * BARS_PER_YEAR // 4:
        p.error(f"--years {args.years}: too short for {WARMUP_BARS} warm-up bars and a window")
    if args.workers < 1:
        p.error(f"--workers {args.workers}: give 1 or more processes for the screen")
    if args.one is not None:  # the child: one universe, its figures as one JSON line
        got = one(args.one, args.years, args.sets, args.timeout, args.long_short, args.workers)
        print(json.dumps(got))
        return 0
    sizes = [int(s) for s in args.symbols_list.split(",") if s.strip()]
    if min(sizes, default=0) < 2:
        p.error("--symbols-list: a cross-sectional universe needs at least 2 symbols")
    rows = []
    for n in sizes:
        print(
            f"N={n}: {args.years:g} years, {args.sets} sets, screen on {args.workers} "
            "process(es) ...",
            file=sys.stderr,
            flush=True,
        )
        rows.append(run_child(n, args))
    print_tables(rows)
    if args.json:
        print(json.dumps({"years": args.years, "sets": args.sets, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
