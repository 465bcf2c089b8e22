"""Golden backtests: whole runs on real data, pinned, through the sandboxed executor.

Why: the sandbox and (later) the trusted replay of fills may change how a job runs, never what
an honest strategy earns. Each case pins its fills (signal and fill dates, side, size, price,
commission), its closed trades' pnl, final value and Sharpe. The strategies are frozen copies of
what the lab generated (``golden/*.pysrc``) plus the SMA-cross fixture, so a later change of the
code generator cannot move these numbers.

Regenerate (only when a change of results is intended, and say why in the commit):
``BT_GOLDEN_WRITE=1 .venv/bin/python -m pytest -q tests/backtest/test_bt_golden.py``.
"""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path
from typing import Any

import bt_strategy_sources as src
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend
from backtest.sandbox import run_sandboxed

pytestmark = pytest.mark.integration

GOLDEN_DIR = Path(__file__).parent / "golden"
EXPECTED = GOLDEN_DIR / "expected.json"
WRITE = os.environ.get("BT_GOLDEN_WRITE") == "1"
FOLD = Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2019, 12, 31))
SYMBOLS = ("AAPL", "MSFT")
CODES = {
    "sma_cross": src.SMA_CROSS,
    **{p.stem: p.read_text(encoding="utf-8") for p in sorted(GOLDEN_DIR.glob("*.pysrc"))},
}
CASES = [(name, sym) for name in CODES for sym in SYMBOLS]
TOL = 1e-9


def _job(name: str, symbol: str) -> BacktestJob:
    return BacktestJob(
        job_id=f"golden|{name}|{symbol}",
        variant_id=name,
        code=CODES[name],
        symbol=symbol,
        bars=read_real_bars(symbol, "2014-01-01", "2019-12-31"),
        fold=FOLD,
    )


def _summary(result: Any, trace: dict[str, Any] | None) -> dict[str, Any]:
    """What is pinned: exact figures, prices and pnls rounded to 1e-6."""
    assert result.status == JobStatus.OK, result.error
    m = result.metrics
    out: dict[str, Any] = {
        "final_value": m.final_value,
        "sharpe": m.sharpe,
        "n_trades": m.n_trades,
        "n_obs": m.n_obs,
        "total_return_pct": m.total_return_pct,
        "max_drawdown_pct": m.max_drawdown_pct,
        "trade_pnls": [round(p, 6) for p in result.trade_pnls],
    }
    if trace is not None:
        out["fills"] = [
            [created, executed, side, size, round(price, 6), round(commission, 6)]
            for created, executed, side, size, price, commission in trace["fills"]
        ]
    return out


def _close(got: Any, want: Any, where: str) -> None:
    if isinstance(want, float) and isinstance(got, float):
        assert abs(got - want) <= TOL * max(1.0, abs(want)), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length differs"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            _close(got[key], want[key], f"{where}.{key}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    if WRITE:
        return {}
    return json.loads(EXPECTED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sandboxed() -> dict[str, dict[str, Any]]:
    """Every case through ``run_sandboxed`` with the trace (fills) on."""
    got = {}
    for name, sym in CASES:
        out = run_sandboxed(_job(name, sym), trace=True)
        got[f"{name}|{sym}"] = _summary(out.result, out.trace)
    if WRITE:
        EXPECTED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return got


@pytest.mark.parametrize(("name", "symbol"), CASES)
def test_sandboxed_run_matches_golden(
    name: str, symbol: str, sandboxed: dict[str, Any], expected: dict[str, Any]
) -> None:
    key = f"{name}|{symbol}"
    got = sandboxed[key]
    assert got["n_trades"] > 0 and got["fills"], f"{key}: a golden case must trade"
    if not WRITE:
        _close(got, expected[key], key)


def test_pool_batches_match_golden(expected: dict[str, Any], sandboxed: dict[str, Any]) -> None:
    """The same jobs through the 2-worker pool (micro-batched children) give the same figures."""
    with ProcessPoolBackend(workers=2) as pool:
        results = pool.map([_job(name, sym) for name, sym in CASES])
    want = sandboxed if WRITE else expected
    for (name, sym), result in zip(CASES, results, strict=True):
        key = f"{name}|{sym}"
        ref = {k: v for k, v in want[key].items() if k != "fills"}
        _close(_summary(result, None), ref, f"pool {key}")
