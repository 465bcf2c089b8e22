"""The batched sweep against the per-set one and a bare fused numba kernel (issue 30 item 5).

    PYTHONPATH=. python benchmarks/screen_batched.py [--json] [--symbols AAPL,...] [--repeat 3]

One sweep: an SMA crossover (``sma_cross``, the opposite cross as the exit, ``fixed_fraction``,
long only), 1,000 parameter sets (fast 5..54 x slow 60..250 by 10) x 5 symbols x 10 years of real
bars (2011-2020 after a year's warm-up), next-open fills, the default costs (0.1 % commission,
0.05 % slippage). Per (set, symbol), best of ``--repeat``, in wall time and in the process's
CPU time (``time.process_time``: every path is one thread, and on a machine shared with other
work the CPU time is what the code costs, the wall time what the load let it have):

- ``per_set``: ``screen_sets(..., batched=False)``: ``evaluate`` for every (set, window);
- ``batched``: ``screen_sets(...)``: one ``fills.simulate_many`` call per window;
- ``batched_core``: the batched window runs alone (``batch.run_window``), without the
  ranking and the ``ScreenedSet`` records both sweeps build;
- ``fused``: a bare kernel written here: one call per symbol for every set, the moving
  averages computed once per period, the crossover, the broker's cash checks, fills and value
  inline (no readiness arrays, no conditions, no fills kept);
- ``vectorbt``: ``Portfolio.from_signals`` on the same crossovers, when vectorbt is importable
  (it is not a dependency; its fills differ in detail, so its equity is not compared).

The three lab figures must agree: the two sweeps' returns and records exactly, and the fused
kernel's returns bit for bit with the batched ones. The first calls (numba's compile or cache
load) are timed apart. With ``--json`` the last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from numba import njit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.contracts import CostModel, Fold  # noqa: E402
from backtest.screen import batch, screen_sets, windows_for  # noqa: E402
from backtest.screen import indicators as ind  # noqa: E402
from strategies.families import reconcile, spec_from_template  # noqa: E402
from strategies.spec import Family, StrategySpec  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "ohlcv" / "daily"
FOLD = Fold(index=0, warmup_start=date(2010, 1, 1), start=date(2011, 1, 1), end=date(2020, 12, 31))
FASTS = range(5, 55)
SLOWS = range(60, 260, 10)


def read_bars(symbol: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / f"{symbol}.csv", parse_dates=["date"]).set_index("date")
    return df.loc["2010-01-01":"2020-12-31", ["open", "high", "low", "close", "volume"]].astype(
        "float64"
    )


def sma_specs() -> list[StrategySpec]:
    """The sweep's sets: an SMA crossover, every (fast, slow) of the grid."""
    base = spec_from_template(Family.TREND, 0).model_copy(
        update={"filters": [], "exits": ["opposite_signal"], "sizing": "fixed_fraction"}
    )
    base = reconcile(base)
    return [
        base.model_copy(
            update={"parameters": {**base.parameters, "fast_period": f, "slow_period": s}}
        )
        for f in FASTS
        for s in SLOWS
    ]


@njit(cache=False)
def fused(  # noqa: C901  (the reference kernel: one loop, as a hand-written sweep would be)
    open_,
    high,
    low,
    close,
    smas,
    fast_row,
    slow_row,
    fast,
    slow,
    first,
    cash0,
    rate,
    slip,
    frac,
    lev,
):
    """Every set on one symbol: SMA(fast) crossing SMA(slow), next-open fills, long only,
    ``fixed_fraction``; the broker's float operations in ``fills.simulate``'s order. Returns
    the value at every close, one row per set."""
    n_sets, n = fast.size, close.size
    values = np.empty((n_sets, n))
    for s in range(n_sets):
        f, sl = smas[fast_row[s]], smas[slow_row[s]]
        both = max(fast[s], slow[s]) - 1
        start = both + 1
        nzd = f[both] - sl[both] if both < n else 0.0
        cash, pos, pos_price, order, order_bar = cash0, 0.0, 0.0, 0.0, -1
        for i in range(n):
            if order != 0.0:
                created = close[order_bar]
                probe = cash - order * created if pos == 0.0 else cash + (-order) * created
                probe -= abs(order) * rate * created
                if probe >= 0.0:
                    if order > 0.0:
                        price = open_[i] * (1 + slip)
                        price = price if price <= high[i] else high[i]
                    else:
                        price = open_[i] * (1 - slip)
                        price = price if price >= low[i] else low[i]
                    if pos == 0.0:
                        after = cash - order * price
                        after -= abs(order) * rate * price
                        gross = 0.0 + abs(order) * price
                        if after >= 0.0 and gross <= lev * (after + (0.0 + order * price)):
                            cash, pos, pos_price = after, order, price
                    else:
                        cash += -order * pos_price + -order * (price - pos_price) * 1.0
                        cash -= abs(order) * rate * price
                        cash += 0.0
                        pos, pos_price = 0.0, 0.0
                order = 0.0
            c = close[i]
            if pos != 0.0:
                dvalue = pos * c
                unrealised = pos * (c - pos_price) * 1.0
                values[s, i] = cash + ((0.0 + (dvalue - unrealised) / 1.0) + unrealised)
            else:
                values[s, i] = cash + 0.0
            up = down = False
            if i > both:
                up = nzd < 0.0 and f[i] > sl[i]
                down = nzd > 0.0 and f[i] < sl[i]
                d = f[i] - sl[i]
                if d:
                    nzd = d
            if i < start:
                continue
            if pos > 0.0:
                if i >= first and down:
                    order, order_bar = -pos, i
            elif up and c > 0.0:
                size = max(0.0, math.floor(values[s, i] * frac / c))
                if size > 0.0 and i >= first:
                    order, order_bar = size, i
    return values


def fused_sweep(windows: dict, specs: list[StrategySpec], costs: CostModel) -> dict:
    """The fused kernel on every window: the moving averages once per period, then one call."""
    fast = np.array([s.parameters["fast_period"] for s in specs], dtype=np.int64)
    slow = np.array([s.parameters["slow_period"] for s in specs], dtype=np.int64)
    periods = sorted(set(fast.tolist()) | set(slow.tolist()))
    row = {p: k for k, p in enumerate(periods)}
    frac = float(specs[0].parameters["position_fraction"])
    out = {}
    for wk, w in windows.items():
        b = w.bars
        smas = np.stack([ind.sma(b.close, p) for p in periods])
        values = fused(
            b.open,
            b.high,
            b.low,
            b.close,
            smas,
            np.array([row[p] for p in fast.tolist()], dtype=np.int64),
            np.array([row[p] for p in slow.tolist()], dtype=np.int64),
            fast,
            slow,
            w.first,
            costs.cash,
            costs.commission_pct / 100.0,
            costs.slippage_pct / 100.0,
            frac,
            costs.max_gross_leverage,
        )
        out[wk] = values[:, w.first :] / values[:, w.first - 1 : -1] - 1.0
    return out


def batched_core(windows: dict, specs: list[StrategySpec], costs: CostModel) -> dict:
    """The batched window runs alone (what the sweep does before it ranks)."""
    prepared = batch.prepare(specs, costs, 252)
    return {wk: batch.run_window(prepared, w) for wk, w in windows.items()}


def vectorbt_sweep(frames: dict, specs: list[StrategySpec], costs: CostModel) -> float | None:
    """Seconds of vectorbt's sweep (entries on the cross, filled at the next open), or None."""
    try:
        import vectorbt as vbt
    except ImportError:
        return None
    fast = [s.parameters["fast_period"] for s in specs]
    slow = [s.parameters["slow_period"] for s in specs]
    started = time.perf_counter()
    for frame in frames.values():
        close, open_ = frame["close"], frame["open"]
        f = vbt.MA.run(close, fast, short_name="fast")
        s = vbt.MA.run(close, slow, short_name="slow")
        entries = f.ma_crossed_above(s).vbt.fshift(1)
        exits = f.ma_crossed_below(s).vbt.fshift(1)
        vbt.Portfolio.from_signals(
            close,
            entries,
            exits,
            price=open_,
            fees=costs.commission_pct / 100.0,
            slippage=costs.slippage_pct / 100.0,
            init_cash=costs.cash,
            size=0.95,
            size_type="percent",
        ).sharpe_ratio()
    return time.perf_counter() - started


def best_of(repeat: int, run) -> tuple[float, object]:
    """(the fastest of ``repeat`` runs in seconds, the last run's result)."""
    return timed_run(repeat, run)[0::2]  # type: ignore[return-value]


def timed_run(repeat: int, run) -> tuple[float, float, object]:
    """(the fastest wall seconds, the fewest CPU seconds, of ``repeat`` runs; the last result)."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        out = run()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="last line: the figures as JSON")
    p.add_argument("--symbols", default="AAPL,MSFT,NVDA,INTC,CSCO")
    p.add_argument("--repeat", type=int, default=3, help="timings of each path (best of)")
    args = p.parse_args(argv)
    symbols = [s.strip() for s in args.symbols.split(",") if s.strip()]
    frames = {s: read_bars(s) for s in symbols}
    windows = windows_for(frames, [FOLD])
    for w in windows.values():
        _ = w.days, w.return_keys  # prepared once, as the sweep's windows are
    specs, costs = sma_specs(), CostModel()
    pairs = len(specs) * len(windows)
    kw = {"costs": costs, "bars_per_year": 252, "periods_per_year": 252}

    # First calls: numba's compile (or its cache's load), on two sets, timed apart.
    few = {k: v for k, v in list(windows.items())[:1]}
    jit = {}
    for name, run in (
        ("per_set", lambda: screen_sets(specs[:2], few, batched=False, **kw)),
        ("batched", lambda: screen_sets(specs[:2], few, **kw)),
        ("fused", lambda: fused_sweep(few, specs[:2], costs)),
    ):
        jit[name], _ = best_of(1, run)
    print(
        "first call (compile or cache load), s: "
        + ", ".join(f"{k} {v:.2f}" for k, v in jit.items())
    )

    timed: dict[str, float] = {}
    cpu_timed: dict[str, float] = {}
    results: dict[str, object] = {}
    paths = {
        "per_set": lambda: screen_sets(specs, windows, batched=False, **kw),
        "batched": lambda: screen_sets(specs, windows, **kw),
        "batched_core": lambda: batched_core(windows, specs, costs),
        "fused": lambda: fused_sweep(windows, specs, costs),
    }
    for _ in range(args.repeat):  # interleaved: the machine's load hits every path alike
        for name, run in paths.items():
            seconds, cpu, results[name] = timed_run(1, run)
            timed[name] = min(timed.get(name, math.inf), seconds)
            cpu_timed[name] = min(cpu_timed.get(name, math.inf), cpu)
    agree = _agreement(results, windows)
    ms = {k: v / pairs * 1e3 for k, v in timed.items()}
    cpu_ms = {k: v / pairs * 1e3 for k, v in cpu_timed.items()}
    vbt_s = vectorbt_sweep(frames, specs, costs)
    figures = {
        "sets": len(specs),
        "symbols": len(symbols),
        "bars": int(sum(len(w.bars) for w in windows.values())),
        **{f"{k}_ms_per_variant": round(v, 4) for k, v in ms.items()},
        **{f"{k}_cpu_ms_per_variant": round(v, 4) for k, v in cpu_ms.items()},
        "batched_over_fused": round(ms["batched"] / ms["fused"], 2),
        "batched_core_over_fused": round(ms["batched_core"] / ms["fused"], 2),
        "cpu_batched_over_fused": round(cpu_ms["batched"] / cpu_ms["fused"], 2),
        "cpu_batched_core_over_fused": round(cpu_ms["batched_core"] / cpu_ms["fused"], 2),
        "per_set_over_batched": round(ms["per_set"] / ms["batched"], 2),
        "vectorbt_ms_per_variant": None if vbt_s is None else round(vbt_s / pairs * 1e3, 4),
        "jit_s": {k: round(v, 2) for k, v in jit.items()},
        **agree,
    }
    for k in paths:
        print(
            f"{k:>13}: {ms[k]:.4f} ms a variant (set x symbol), {timed[k]:.3f} s the sweep; "
            f"CPU {cpu_ms[k]:.4f} ms, {cpu_timed[k]:.3f} s"
        )
    if vbt_s is None:
        print("     vectorbt: not importable, skipped (not a dependency)")
    else:
        print(f"     vectorbt: {figures['vectorbt_ms_per_variant']} ms a variant")
    print(
        f"batched / fused {figures['batched_over_fused']}x (window runs alone "
        f"{figures['batched_core_over_fused']}x); per-set / batched "
        f"{figures['per_set_over_batched']}x; agreement: {agree}"
    )
    print(
        f"in CPU time: batched / fused {figures['cpu_batched_over_fused']}x (window runs alone "
        f"{figures['cpu_batched_core_over_fused']}x)"
    )
    if args.json:
        print(json.dumps(figures))
    return 0 if all(agree.values()) else 1


def _agreement(results: dict, windows: dict) -> dict[str, bool]:
    """The two sweeps equal record for record; the fused returns equal the batched ones."""
    old, new = results["per_set"], results["batched"]
    core, fused_returns = results["batched_core"], results["fused"]
    return {
        "sweeps_equal": old.sets == new.sets  # type: ignore[attr-defined]
        and old.ranked == new.ranked  # type: ignore[attr-defined]
        and np.array_equal(old.returns, new.returns),  # type: ignore[attr-defined]
        "fused_equal": all(
            not core[wk].ragged  # type: ignore[index]
            and np.array_equal(core[wk].returns, fused_returns[wk])  # type: ignore[index]
            for wk in windows
        ),
    }


if __name__ == "__main__":
    raise SystemExit(main())
