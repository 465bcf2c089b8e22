"""Issue 24, red-team round 2: fills held to orders, and a lookahead check no run can tell
from a scored run.

Each hostile class runs with and without the lint (a class the lint refuses is refused, which
the gate vetoes too; one it lets through must be caught by the books or the check). The
lookahead classes also run through the CLI (``python -m backtest.run``) and through the pool
over walk-forward folds, as the lab runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import date

import pandas as pd
import pytest
from conftest import DAILY_DIR, REPO_ROOT, read_real_bars
from hostile_paths import walk_forward_jobs

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend
from backtest.lookahead import BUDGET_TIMEOUTS, LookaheadReport, check_lookahead
from backtest.sandbox import SandboxPolicy, run_sandboxed, warm_worker
from backtest.splits import split_holdout, walk_forward_folds
from gate.evaluate import lookahead_veto

pytestmark = pytest.mark.integration

FOLD = Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31))
POLICIES = {"lint": SandboxPolicy(), "nolint": SandboxPolicy(validate=False)}
CLI_WINDOW = ("--start", "2015-03-02", "--end", "2015-12-31", "--warmup-days", "59")


def strategy(name: str, body: str) -> str:
    return (
        f"import backtrader as bt\n\n\nclass {name}(bt.Strategy):\n    params = dict(n=1)\n\n"
        + textwrap.indent(textwrap.dedent(body).strip(), " " * 4)
        + "\n"
    )


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    warm_worker()
    return read_real_bars("AAPL", "2015-01-01", "2015-12-31")


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolBackend(2) as ex:
        yield ex


def _job(code: str, bars: pd.DataFrame, fold: Fold = FOLD) -> BacktestJob:
    return BacktestJob(
        job_id="orders",
        variant_id="orders",
        code=code,
        symbol="AAPL",
        bars=bars,
        fold=fold,
        timeout_s=10.0,
    )


def _caught_by_books(code: str, bars: pd.DataFrame, mode: str, fragment: str) -> None:
    res = run_sandboxed(_job(code, bars), POLICIES[mode]).result
    if res.status == JobStatus.REJECTED:  # the lint refused it: it never runs, never passes
        assert mode == "lint", res
        return
    assert res.status == JobStatus.INTEGRITY_ERROR, (res.status, res.error)
    assert fragment in (res.error or ""), res.error
    assert res.metrics is None


# ---------------------------------------------------------------------------- the books

# "Limit" fills at each bar's low and high, appended to the recorder; no order ever placed.
GHOST_LIMITS = strategy(
    "Ghost",
    """
    def stop(self):
        rec = self.analyzers.recorder
        nums, lows, highs = rec.nums, self.data.low.array, self.data.high.array
        for i in range(len(nums) - 100, len(nums) - 2, 2):
            buy, sell = lows[i + 1], highs[i + 2]
            rec.fills.append((0, nums[i], nums[i + 1], "buy", 10.0, buy, 10.0 * buy * 0.001,
                              "Limit", -1))
            rec.fills.append((0, nums[i + 1], nums[i + 2], "sell", -10.0, sell,
                              10.0 * sell * 0.001, "Limit", -1))
""",
)


@pytest.mark.parametrize("mode", POLICIES)
def test_limit_fills_with_no_order_are_refused(bars: pd.DataFrame, mode: str) -> None:
    _caught_by_books(GHOST_LIMITS, bars, mode, "answers no order the run placed")


# Real limit buys (and market buys), each fill then moved to a better bar within the next
# five: the limit one at backtrader's exact price there, the market one with its order's bar.
MOVED = strategy(
    "Moved",
    """
    def next(self):
        if len(self) % 20 == 0:
            if self.p.n == 1:
                self.buy(size=10, exectype=bt.Order.Limit, price=self.data.close[0] * 0.995)
            else:
                self.buy(size=10)

    def stop(self):
        rec = self.analyzers.recorder
        nums = rec.nums
        o, h, lo = self.data.open.array, self.data.high.array, self.data.low.array
        at = {num: i for i, num in enumerate(nums)}
        for k, f in enumerate(rec.fills):
            d, c, e, side, size, price, comm, kind, ref = f
            i = at[e]
            best, best_p = None, price
            for j in range(i + 1, min(i + 6, len(nums))):
                if kind == "Limit":
                    _, _, _, _, _, limit, _, _ = rec.orders[ref]
                    if limit >= o[j]:
                        p = min(o[j] * 1.0005, h[j], limit)
                    elif limit >= lo[j]:
                        p = limit
                    else:
                        continue
                    made = (d, c, nums[j], side, size, p, size * p * 0.001, kind, ref)
                else:
                    p = min(o[j] * 1.0005, h[j])
                    made = (d, nums[j - 1], nums[j], side, size, p, size * p * 0.001, kind, ref)
                if p < best_p:
                    best, best_p = made, p
            if best is not None:
                rec.fills[k] = best
""",
)


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize(
    ("kind", "fragment"),
    [(1, "the first bar that reached it"), (2, "as it was placed")],
    ids=["limit", "market"],
)
def test_a_fill_moved_to_a_better_later_bar_is_refused(
    bars: pd.DataFrame, mode: str, kind: int, fragment: str
) -> None:
    _caught_by_books(
        MOVED.replace("params = dict(n=1)", f"params = dict(n={kind})"), bars, mode, fragment
    )


# Limit orders placed far from the market, their created.price then moved to tomorrow's low
# (buys) and high (sells): the broker fills at the edited price, the books hold it to the copy.
MUTATED = strategy(
    "Mutated",
    """
    def next(self):
        i = len(self.data) - 1
        lows, highs = self.data.low.array, self.data.high.array
        if i + 1 >= len(lows) or len(self) % 5:
            return
        if self.position:
            order = self.sell(size=10, exectype=bt.Order.Limit, price=self.data.close[0] * 1.5)
            if order is not None:
                order.created.price = highs[i + 1]
        else:
            order = self.buy(size=10, exectype=bt.Order.Limit, price=self.data.close[0] * 0.5)
            if order is not None:
                order.created.price = lows[i + 1]
""",
)


@pytest.mark.parametrize("mode", POLICIES)
def test_an_order_price_mutated_after_placement_changes_nothing(
    bars: pd.DataFrame, mode: str
) -> None:
    _caught_by_books(MUTATED, bars, mode, "the bar does not reach it")


# ---------------------------------------------------------------------------- lookahead

# Peeks at tomorrow's open, but only when it believes the run is scored.
CHEAT = """
    def next(self):
        arr = self.data.open.array
        i = len(self.data) - 1
        if self.scored() and i + 1 < len(arr):
            if not self.position and arr[i + 1] > arr[i]:
                self.buy(size=10)
            elif self.position and arr[i + 1] < arr[i]:
                self.close()
"""
DETECTORS = {
    # the old check's placeholders: the last bars repeat the cut's bar
    "placeholder_bars": """
    def scored(self):
        o, c = self.data.open.array, self.data.close.array
        n = len(o)
        return not (n >= 2 and o[n - 1] == o[n - 2] and c[n - 1] == c[n - 2])
    """,
    # the old check's run parameter
    "stop_after": """
    def scored(self):
        rec = self.analyzers.recorder
        return "stop_after" not in rec.params._getkeys() or rec.p.stop_after is None
    """,
    # the feed's length: a scored run of this fold ends on 2015-12-31
    "feed_length": """
    def scored(self):
        d = self.data.num2date(self.data.datetime.array[-1])
        return (d.year, d.month, d.day) >= (2015, 12, 31)
    """,
}


def _detector(name: str) -> str:
    return strategy("Sly", textwrap.dedent(CHEAT) + textwrap.dedent(DETECTORS[name]))


def _vetoed_as_biased(report: LookaheadReport, mode: str) -> None:
    if not report.checked and "rejected" in (report.error or ""):  # the lint refused it
        assert mode == "lint", report
    else:
        assert report.checked and report.biased, report
    assert lookahead_veto(report, "AAPL") is not None


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize("name", DETECTORS)
def test_a_strategy_that_cheats_only_when_scored_is_caught(
    bars: pd.DataFrame, pool, name: str, mode: str
) -> None:
    code = _detector(name)
    scored = run_sandboxed(_job(code, bars), POLICIES["nolint"]).result
    assert scored.status == JobStatus.OK and scored.metrics.n_trades > 0, scored  # it cheats
    report = check_lookahead(
        code, bars, fold=FOLD, symbol="AAPL", executor=pool, policy=POLICIES[mode]
    )
    _vetoed_as_biased(report, mode)


def _cli(path, *args: str, timeout: float = 180) -> tuple[dict, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "backtest.run", str(path), "--data-dir", str(DAILY_DIR), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), time.monotonic() - started


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize("name", DETECTORS)
def test_a_strategy_that_cheats_only_when_scored_is_caught_by_the_cli(
    tmp_path, name: str, mode: str
) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(_detector(name))
    skip = ("--skip-validation",) if mode == "nolint" else ()
    out, _ = _cli(path, "--tickers", "AAPL", *CLI_WINDOW, "--check-lookahead", *skip)
    if out["status"] == "rejected":
        assert mode == "lint", out
        return
    _vetoed_as_biased(LookaheadReport(**out["lookahead"]), mode)


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize("name", DETECTORS)
def test_a_strategy_that_cheats_only_when_scored_is_caught_on_every_walk_forward_fold(
    pool, name: str, mode: str
) -> None:
    bars = read_real_bars("AAPL", "2013-01-01", "2015-12-31")
    index = pd.DatetimeIndex(bars.index)
    folds = walk_forward_folds(index, split_holdout(index, 0.2), n_folds=2, warmup_bars=60)
    assert len(folds) == 2
    code = _detector(name)
    if name == "feed_length":  # a scored run of each fold ends on that fold's last bar
        code = code.replace("(2015, 12, 31)", "END")
    for fold in folds:
        window = bars.loc[str(fold.warmup_start) : str(fold.end)]
        end = window.index[-1]
        fold_code = code.replace("END", f"({end.year}, {end.month}, {end.day})")
        report = check_lookahead(
            fold_code, bars, fold=fold, symbol="AAPL", executor=pool, policy=POLICIES[mode]
        )
        _vetoed_as_biased(report, mode)


# Spins only where it believes it is checked: on a feed that ends before the fold's end.
SPIN = strategy(
    "Spin",
    """
    def next(self):
        d = self.data.num2date(self.data.datetime.array[-1])
        if (d.year, d.month, d.day) < (2015, 12, 31):
            while True:
                pass
""",
)
CLI_TIMEOUT_S = 5.0
# The documented bound: each ticker's check waits at most BUDGET_TIMEOUTS job timeouts, and
# runs it leaves behind end within one more; plus the scored runs and the CLI's start-up.
SPIN_BOUND_S = 2 * (BUDGET_TIMEOUTS + 1) * CLI_TIMEOUT_S + 2 * CLI_TIMEOUT_S + 20


@pytest.mark.parametrize("mode", POLICIES)
def test_spinning_only_in_check_runs_is_bounded_and_vetoed(tmp_path, mode: str) -> None:
    path = tmp_path / "spin.py"
    path.write_text(SPIN)
    skip = ("--skip-validation",) if mode == "nolint" else ()
    out, took = _cli(
        path, "--tickers", "AAPL,MSFT", *CLI_WINDOW, "--timeout", "5", "--check-lookahead", *skip
    )
    assert took < SPIN_BOUND_S, f"took {took:.1f} s, bound {SPIN_BOUND_S:.0f} s"
    if out["status"] == "rejected":
        assert mode == "lint", out
        return
    assert out["status"] == "ok", out  # the scored runs end on the fold's end: no spin
    for sym in ("AAPL", "MSFT"):
        report = LookaheadReport(**out["per_ticker"][sym]["lookahead"])
        assert lookahead_veto(report, sym) is not None, report
        assert report.biased or not report.checked, report


def _outcome(status: JobStatus, bars: int | None, error: str | None = None):
    from backtest.sandbox import SandboxOutcome, error_outcome

    job = _job("", pd.DataFrame())
    if status == JobStatus.OK:
        return SandboxOutcome(error_outcome(job, status, "").result, bars=bars)
    out = error_outcome(job, status, error or "")
    out.bars = bars
    return out


@pytest.mark.unit
def test_where_runs_fail_is_compared() -> None:
    """A cut run (bars 0..9 of 0..99) failing where the full run went on is a mismatch; failing
    on the same bar as the full run, or in ``stop`` after its last bar like it, is not."""
    from backtest.lookahead import _failed_apart

    ok, err, late = JobStatus.OK, JobStatus.ERROR, JobStatus.TIMEOUT
    index_error = "IndexError: array index out of range"
    table = [
        # (full, cut, a mismatch)
        ((ok, 100), (ok, 10), False),
        ((ok, 100), (err, 9, index_error), True),  # close[1] on the cut run's last bar
        ((err, 99, index_error), (err, 9, index_error), True),  # ... and on the full run's
        ((ok, 100), (late, None, "Timeout"), True),  # spins only when checked
        ((err, 5, "ZeroDivisionError"), (err, 5, "ZeroDivisionError"), False),
        ((err, 5, "ZeroDivisionError"), (err, 4, "ZeroDivisionError"), True),
        ((err, 50, "ZeroDivisionError"), (ok, 10), False),  # failed after the cut
        ((err, 100, "in stop"), (err, 10, "in stop"), False),  # both after their last bar
        ((late, None, "Timeout"), (ok, 10), False),  # a full run that timed out proves nothing
    ]
    for full, cut, mismatch in table:
        got = _failed_apart(_outcome(*full), _outcome(*cut), 9, 99)
        assert (got is not None) == mismatch, (full, cut, got)


# ------------------------------------------- the books' classes as the lab and the CLI run them

BOOKS_CLASSES = {
    "ghost_limits": (GHOST_LIMITS, "answers no order the run placed"),
    "moved_limit": (MOVED, "the first bar that reached it"),
    "moved_market": (MOVED.replace("params = dict(n=1)", "params = dict(n=2)"), "as it was placed"),
    "mutated_price": (MUTATED, "the bar does not reach it"),
}


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize("name", BOOKS_CLASSES)
def test_the_books_classes_through_the_cli(tmp_path, name: str, mode: str) -> None:
    code, fragment = BOOKS_CLASSES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    skip = ("--skip-validation",) if mode == "nolint" else ()
    out, _ = _cli(path, "--tickers", "AAPL", *CLI_WINDOW, *skip)
    if out["status"] == "rejected":
        assert mode == "lint", out
        return
    assert out["status"] == "integrity_error", out
    assert fragment in json.dumps(out), out


@pytest.mark.parametrize("mode", POLICIES)
@pytest.mark.parametrize("name", BOOKS_CLASSES)
def test_the_books_classes_through_the_pools_walk_forward(name: str, mode: str) -> None:
    code, fragment = BOOKS_CLASSES[name]
    bars = read_real_bars("AAPL", "2013-01-01", "2015-12-31")
    index = pd.DatetimeIndex(bars.index)
    folds = walk_forward_folds(index, split_holdout(index, 0.2), n_folds=3, warmup_bars=60)
    jobs = walk_forward_jobs(code, bars, folds, variant_id="orders")
    with ProcessPoolBackend(2, policy=POLICIES[mode]) as ex:
        results = [fut.result(timeout=180) for fut in [ex.submit(j) for j in jobs]]
    for res in results:
        if res.status == JobStatus.REJECTED:
            assert mode == "lint", res
            continue
        assert res.status == JobStatus.INTEGRITY_ERROR, (res.fold, res.status, res.error)
        assert fragment in (res.error or "") and res.metrics is None, res.error
