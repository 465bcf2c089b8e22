"""Does the margin ever bind a lab template? Every template at the default cap and at 1000.

    python benchmarks/margin_templates.py [--symbols AAPL,NVDA,...]

Every catalogue template of every block family (long only and long/short) on each symbol, and
every portfolio template (long/short too) and the most cointegrated pair on the symbols but SPY,
2008-2020 on the daily corpus, run through the engine (the books included) at
``max_gross_leverage`` 2 (the default) and 1000: the values, fills and refusals must be the same
(the cap never bound). Also printed: the highest gross exposure over equity at any close.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date

import numpy as np

from backtest.books import feed_frames
from backtest.contracts import BacktestJob, CostModel, Fold
from backtest.data import load_bars
from backtest.engine import execute
from backtest.margin import MAX_GROSS_LEVERAGE
from strategies.families import TEMPLATES, spec_from_template
from strategies.pairs import best_pair
from strategies.portfolio import TEMPLATES as PORTFOLIO_TEMPLATES
from strategies.portfolio import portfolio_spec
from strategies.render import render_spec
from strategies.spec import Family, PortfolioFamily

FOLD = Fold(index=0, warmup_start=date(2007, 1, 1), start=date(2008, 1, 2), end=date(2020, 12, 31))
SYMBOLS = "AAPL,NVDA,AMD,TSLA,NFLX,MSFT,INTC,SPY"


def _max_gross(job: BacktestJob, run) -> float:  # noqa: ANN001
    """The highest gross exposure over equity at any close of the run."""
    n = len(run.values)
    closes = {name: f["close"].to_numpy()[:n] for name, f in feed_frames(job.feeds(), FOLD)}
    at = {d: i for i, d in enumerate(run.dates)}
    sizes = {name: np.zeros(n) for name in closes}
    for f in run.fills:
        sizes[f.symbol][at[f.executed] :] += f.size
    gross = sum(np.abs(sizes[name]) * closes[name] for name in closes)
    values = np.asarray(run.values)
    return float(np.max(np.where(values > 0, gross / np.where(values > 0, values, 1), np.inf)))


def check(label: str, code: str, bars, symbol: str) -> bool:  # noqa: ANN001
    runs = []
    for cap in (MAX_GROSS_LEVERAGE, 1000.0):
        job = BacktestJob(
            job_id=label,
            variant_id="v",
            code=code,
            symbol=symbol,
            bars=bars,
            fold=FOLD,
            costs=CostModel(max_gross_leverage=cap),
            timeout_s=600,
        )
        runs.append(execute(job))
    a, b = runs
    same = (
        a.result.status == b.result.status
        and np.array_equal(np.asarray(a.values), np.asarray(b.values))
        and a.fills == b.fills
        and a.log.orders_rejected == b.log.orders_rejected
    )
    print(
        f"{label:70s} {a.result.status:8s} same={same} "
        f"max_gross/equity={_max_gross(job, a):.3f} refused={a.log.orders_rejected}",
        flush=True,
    )
    return same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--symbols", default=SYMBOLS)
    p.add_argument("--data-dir", default="../shared/data/ohlcv/daily")
    args = p.parse_args(argv)
    started = time.perf_counter()
    bars = {
        s: load_bars(
            s, start=FOLD.warmup_start, end=FOLD.end, source="csv", data_dir=args.data_dir
        ).bars
        for s in args.symbols.split(",")
    }
    same = True
    for family in Family:
        for k in range(len(TEMPLATES[family])):
            for long_short in (False, True):
                spec = spec_from_template(family, k, long_short=long_short)
                for s, frame in bars.items():
                    same &= check(f"{spec.name}|{s}", render_spec(spec), frame, s)
    universe = {s: f for s, f in bars.items() if s != "SPY"}
    designs = list(PORTFOLIO_TEMPLATES) + [
        t._replace(long_short=True)
        for t in PORTFOLIO_TEMPLATES
        if t.family == PortfolioFamily.CROSS_SECTIONAL_MOMENTUM and not t.long_short
    ]
    for t in designs:
        spec = portfolio_spec(t.family, t.params, long_short=t.long_short, note=t.note)
        same &= check(spec.name, render_spec(spec), universe, "PORTFOLIO")
    pair = best_pair({s: f["close"] for s, f in universe.items()})
    if pair is not None:
        params = {"pair_a": pair.a, "pair_b": pair.b, "hedge_ratio": pair.hedge_ratio}
        spec = portfolio_spec(PortfolioFamily.PAIRS, params)
        same &= check(f"{spec.name} {pair.names}", render_spec(spec), universe, "PORTFOLIO")
    print(
        ("the cap never bound" if same else "THE CAP BOUND"),
        f"({time.perf_counter() - started:.0f} s)",
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
