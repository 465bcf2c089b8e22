"""The vectorised screen against Backtrader, side by side, on the same specs and bars.

    python benchmarks/screen_throughput.py [--json] [--symbols AAPL,MSFT,...] [--sweep 1000]

1. **Per variant.** Every catalogue template of every block family (long only and long/short) on
   each symbol's ten years: Backtrader through the engine in-process (``backtest.engine.execute``,
   the books included) and the screen (``backtest.screen.screen``, indicators computed from
   scratch for every variant; the window's bars and dates are prepared once per symbol, as the
   engine's frame is). Two screen figures: ``evaluate`` + its Sharpe ratio (what a sweep ranks
   on: the fills as arrays and the books' equity) and the full ``screen`` (typed trades and
   every metric of ``compute_metrics``). Agreement: the same trades (entry and exit dates,
   size, prices to 1e-6) and the same metrics as Backtrader's books.
2. **A TUNE-sized sweep.** ``--sweep`` parameter sets drawn around each template on
   ``--symbols`` (5 x 10 years by default), screened with the indicator cache a sweep shares,
   on ``--workers`` processes; its wall time is printed.

The numba JIT compile is timed apart (``jit_s``) and excluded from the per-variant figure.
With ``--json`` the last line is
``{"speedup_per_variant", "agreement": "k/n", "specs", "bars", ...}``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import BacktestJob, CostModel, Fold  # noqa: E402
from backtest.engine import execute  # noqa: E402
from backtest.screen import ScreenStatus, Window, evaluate, screen  # noqa: E402
from backtest.trade_list import FillRow, Trade, pair_fills  # noqa: E402
from strategies.codegen import render  # noqa: E402
from strategies.families import PARAM_SPACE, TEMPLATES, snap_params, spec_from_template  # noqa: E402
from strategies.spec import Family, StrategySpec  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "ohlcv" / "daily"
FOLD = Fold(index=0, warmup_start=date(2010, 1, 1), start=date(2011, 1, 1), end=date(2020, 12, 31))
PRICE_TOL = 1e-6


def read_bars(symbol: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / f"{symbol}.csv", parse_dates=["date"]).set_index("date")
    return df.loc["2010-01-01":"2020-12-31", ["open", "high", "low", "close", "volume"]].astype(
        "float64"
    )


def templates() -> list[StrategySpec]:
    return [
        spec_from_template(family, k, long_short=ls)
        for family in Family
        for k in range(len(TEMPLATES[family]))
        for ls in (False, True)
    ]


def same_trades(a: list[Trade], b: list[Trade]) -> bool:
    def close(x: float | None, y: float | None) -> bool:
        return (x is None and y is None) or (
            x is not None and y is not None and abs(x - y) <= PRICE_TOL
        )

    return len(a) == len(b) and all(
        (s.entry_date, s.exit_date, s.size) == (t.entry_date, t.exit_date, t.size)
        and close(s.entry_price, t.entry_price)
        and close(s.exit_price, t.exit_price)
        for s, t in zip(a, b, strict=True)
    )


def backtrader_run(spec: StrategySpec, frame: pd.DataFrame, symbol: str, costs: CostModel):
    job = BacktestJob(
        job_id=f"bench|{symbol}",
        variant_id="bench",
        code=render(spec),
        symbol=symbol,
        bars=frame,
        fold=FOLD,
        costs=costs,
    )
    started = time.perf_counter()
    run = execute(job)
    elapsed = time.perf_counter() - started
    fills = [FillRow(f.executed.isoformat(), f.size, f.price) for f in run.fills]
    return elapsed, run.result, pair_fills(symbol, fills)


def fresh(window: Window) -> Window:
    """The same prepared window with an empty indicator cache: a variant pays its indicators."""
    bars = type(window.bars)(
        window.bars.open, window.bars.high, window.bars.low, window.bars.close, window.bars.volume
    )
    out = Window(symbol=window.symbol, bars=bars, index=window.index, first=window.first)
    out.__dict__.update(days=window.days, return_keys=window.return_keys)
    return out


def jit_warmup(frame: pd.DataFrame) -> float:
    """Compile (or load from numba's cache) every kernel once; returns the seconds it took."""
    started = time.perf_counter()
    window = Window.from_frame(frame, FOLD, "JIT")
    for spec in templates():
        screen(spec, window)
    return time.perf_counter() - started


def per_variant(symbols: list[str], frames: dict[str, pd.DataFrame], repeat: int) -> dict:
    costs = CostModel()
    bt_times, sc_times, full_times, agree, total, bars = [], [], [], 0, 0, 0
    for symbol in symbols:
        frame = frames[symbol]
        window = Window.from_frame(frame, FOLD, symbol)
        _ = window.days, window.return_keys
        bars += len(window.bars)
        for spec in templates():
            bt_s, bt_result, bt_trades = backtrader_run(spec, frame, symbol, costs)
            runs, full_runs = [], []
            for _ in range(repeat):
                w = fresh(window)
                started = time.perf_counter()
                evaluate(spec, w, costs=costs).sharpe()
                runs.append(time.perf_counter() - started)
                w = fresh(window)
                started = time.perf_counter()
                res = screen(spec, w, costs=costs)
                full_runs.append(time.perf_counter() - started)
            total += 1
            ok = (
                res.status == ScreenStatus.OK
                and same_trades(bt_trades, res.trades)
                and res.metrics == bt_result.metrics
            )
            agree += ok
            if not ok:
                print(f"  MISMATCH {symbol} {spec.name}", file=sys.stderr)
            bt_times.append(bt_s)
            sc_times.append(min(runs))
            full_times.append(min(full_runs))
    bt_mean, sc_mean = statistics.mean(bt_times), statistics.mean(sc_times)
    full_mean = statistics.mean(full_times)
    return {
        "backtrader_ms_per_variant": round(bt_mean * 1e3, 2),
        "screen_ms_per_variant": round(sc_mean * 1e3, 4),
        "speedup_per_variant": round(bt_mean / sc_mean, 1),
        "screen_full_ms_per_variant": round(full_mean * 1e3, 4),
        "speedup_per_variant_full": round(bt_mean / full_mean, 1),
        "agreement": f"{agree}/{total}",
        "specs": total,
        "bars": bars,
    }


def sweep_specs(n: int, seed: int = 7) -> list[StrategySpec]:
    """``n`` parameter sets drawn on the lab's grid around the templates (TUNE-like)."""
    rng = random.Random(seed)
    bases = templates()
    out = []
    for k in range(n):
        base = bases[k % len(bases)]
        params = dict(base.parameters)
        for name in params:
            rng_ = PARAM_SPACE.get(name)
            if rng_ is not None and rng_.tunable:
                params[name] = rng_.low + rng_.step * rng.randint(
                    0, int(round((rng_.high - rng_.low) / rng_.step))
                )
        out.append(base.model_copy(update={"parameters": snap_params(params)}))
    return out


def _sweep_one(args: tuple[str, list[StrategySpec]]) -> tuple[str, int, float]:
    symbol, specs = args
    window = Window.from_frame(read_bars(symbol), FOLD, symbol)
    costs = CostModel()
    best = -float("inf")
    for spec in specs:
        sharpe = evaluate(spec, window, costs=costs).sharpe()
        if sharpe is not None:
            best = max(best, sharpe)
    return symbol, len(specs), best


def sweep(symbols: list[str], n: int, workers: int) -> dict:
    specs = sweep_specs(n)
    started = time.perf_counter()
    # Every worker takes a share of the parameter sets on every symbol (the symbols alone
    # would leave a worker idle for a whole symbol).
    tasks = [(s, specs[k::workers]) for s in symbols for k in range(max(1, workers))]
    if workers > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(workers) as pool:
            done = pool.map(_sweep_one, tasks)
    else:
        done = [_sweep_one(t) for t in tasks]
    wall = time.perf_counter() - started
    return {
        "sweep_parameter_sets": n,
        "sweep_symbols": len(symbols),
        "sweep_screens": sum(k for _, k, _ in done),
        "sweep_wall_s": round(wall, 3),
        "sweep_workers": workers,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="last line: the figures as JSON")
    p.add_argument("--symbols", default="AAPL,MSFT,NVDA,INTC,CSCO")
    p.add_argument("--compare-symbols", type=int, default=2, help="symbols of the side-by-side")
    p.add_argument("--repeat", type=int, default=3, help="screen timings per variant (best of)")
    p.add_argument("--sweep", type=int, default=1000, help="parameter sets of the sweep (0: skip)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    symbols = [s.strip() for s in args.symbols.split(",") if s.strip()]
    frames = {s: read_bars(s) for s in symbols}
    figures: dict = {"jit_s": round(jit_warmup(frames[symbols[0]]), 3)}
    print(f"numba JIT (compile or cache load), excluded below: {figures['jit_s']} s")
    figures.update(per_variant(symbols[: args.compare_symbols], frames, args.repeat))
    print(
        f"per variant: Backtrader {figures['backtrader_ms_per_variant']} ms; screen "
        f"(evaluate + Sharpe) {figures['screen_ms_per_variant']} ms -> "
        f"{figures['speedup_per_variant']}x; screen with typed trades and every metric "
        f"{figures['screen_full_ms_per_variant']} ms -> {figures['speedup_per_variant_full']}x; "
        f"agreement {figures['agreement']} specs on {figures['bars']} bars"
    )
    if args.sweep:
        figures.update(sweep(symbols, args.sweep, args.workers))
        print(
            f"sweep: {figures['sweep_parameter_sets']} parameter sets x "
            f"{figures['sweep_symbols']} symbols = {figures['sweep_screens']} screens in "
            f"{figures['sweep_wall_s']} s on {figures['sweep_workers']} workers"
        )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
