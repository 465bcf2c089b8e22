"""Run one backtest job: generated Backtrader code on one symbol over one fold.

``run_job`` never raises: whatever the generated code does (syntax error,
exception in ``next``, endless loop) comes back as a ``BacktestResult`` with
status error/timeout and a one-line message.

Execution realism: market orders fill at the next bar's open (no cheat-on-close)
with commission and slippage; orders are refused before ``fold.start`` so the
warm-up bars only feed indicators.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

import pandas as pd

from backtest.compat import import_backtrader
from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus
from backtest.feed import FramePandasData
from backtest.metrics import compute_metrics
from backtest.period_keys import backtrader_keys
from backtest.quality import OHLCV

bt = import_backtrader()

MAX_ERROR_CHARS = 500
_counter = itertools.count()


class JobTimeout(BaseException):
    """Raised by the wall-clock alarm. A BaseException so ``except Exception`` in
    generated code cannot swallow it."""


class StrategyCodeError(Exception):
    """The code is runnable Python but not a usable strategy (0 or 2+ classes, bad params)."""


@dataclass(frozen=True)
class Fill:
    """One executed order, as the broker filled it."""

    created: date
    executed: date
    side: str  # "buy" | "sell"
    size: float
    price: float
    commission: float


@dataclass
class EngineRun:
    """Everything one run produced; ``run_job`` keeps only the result."""

    result: BacktestResult
    fills: list[Fill] = field(default_factory=list)
    dates: list[date] = field(default_factory=list)  # every fed bar, warm-up included
    values: list[float] = field(default_factory=list)  # broker value at each bar's close
    strategy: Any = None  # the strategy instance (None when the run failed early)


# ---------------------------------------------------------------------------- analyzer


class _Recorder(bt.Analyzer):
    """Per-bar broker value and exposure, closed trades and fills.

    Analyzers run after the strategy's ``next`` (and through ``prenext``), so every
    bar is recorded with the value marked at its close.
    """

    params = (("stop_after", None),)

    def start(self) -> None:
        # Raw backtrader date numbers per bar, converted to dates once at the end: the
        # per-bar num2date conversion was a tenth of a short backtest's time.
        self.nums: list[float] = []
        self.values: list[float] = []
        self.in_market: list[bool] = []
        self.pnls: list[float] = []
        self.fills: list[Fill] = []
        self._stop_num = (
            bt.date2num(datetime.combine(self.p.stop_after, datetime.max.time()))
            if self.p.stop_after is not None
            else None
        )
        self._clock = self.strategy.datas[0].datetime
        self._broker = self.strategy.broker
        self._positions = [self.strategy.getposition(d) for d in self.strategy.datas]

    def next(self) -> None:
        num = self._clock[0]
        self.nums.append(num)
        if self._stop_num is not None and num > self._stop_num:
            self.strategy.env.runstop()  # after this bar: no strategy call on later bars
        self.values.append(float(self._broker.getvalue()))
        positions = self._positions
        self.in_market.append(
            positions[0].size != 0 if len(positions) == 1 else any(p.size != 0 for p in positions)
        )

    @property
    def dates(self) -> list[date]:
        # backtrader's date numbers are proleptic ordinals plus the time as a fraction
        return [date.fromordinal(int(n)) for n in self.nums]

    def notify_trade(self, trade: Any) -> None:
        if trade.isclosed:
            self.pnls.append(float(trade.pnlcomm))

    def notify_order(self, order: Any) -> None:
        if order.status == order.Completed:
            self.fills.append(
                Fill(
                    created=bt.num2date(order.created.dt).date(),
                    executed=bt.num2date(order.executed.dt).date(),
                    side="buy" if order.isbuy() else "sell",
                    size=float(order.executed.size),
                    price=float(order.executed.price),
                    commission=float(order.executed.comm),
                )
            )

    def get_analysis(self) -> dict[str, Any]:
        return {"n_bars": len(self.values), "n_trades": len(self.pnls)}


# ---------------------------------------------------------------------------- code loading


@functools.lru_cache(maxsize=32)
def _compile(code: str, filename: str) -> types.CodeType:
    """Compiled once per process: a batch child runs the same code for many jobs."""
    return compile(code, filename, "exec")


def _load_module(code: str, variant_id: str) -> tuple[types.ModuleType, str]:
    """Compile and exec ``code`` into a fresh module registered in ``sys.modules``.

    backtrader's metaclasses look classes' modules up in ``sys.modules``, so the
    module must be registered while the run lasts (the caller removes it).
    """
    name = f"swarm_variant_{os.getpid()}_{next(_counter)}"
    filename = f"<variant {variant_id}>"
    # linecache lets tracebacks quote the generated source line.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    compiled = _compile(code, filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compiled, module.__dict__)
    return module, filename


def _pick_strategy(module: types.ModuleType) -> type:
    found = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, bt.Strategy)
        and obj.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = ", ".join(sorted(c.__name__ for c in found)) or "none"
        raise StrategyCodeError(
            f"the code must define exactly one bt.Strategy subclass, found {len(found)} ({names})"
        )
    return found[0]


def _check_params(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown keys; give int-default params ints (tuners may send 20.0)."""
    known = list(cls.params._getkeys())
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise StrategyCodeError(
            f"unknown param(s) {', '.join(unknown)} for {cls.__name__} "
            f"(known: {', '.join(known) or 'none'})"
        )
    defaults = dict(cls.params._getitems())
    fixed = {}
    for key, value in params.items():
        default = defaults.get(key)
        if (
            isinstance(default, int)
            and not isinstance(default, bool)
            and isinstance(value, float)
            and value.is_integer()
        ):
            value = int(value)
        fixed[key] = value
    return fixed


def _note_order(strategy: Any, order: Any, side: str) -> None:
    """Keep (created date, side, size, price) of every order the strategy placed.

    The lookahead check compares these between a full and a truncated run.
    """
    if order is None:
        return
    created = order.created
    price = created.price
    strategy.__dict__.setdefault("_lab_orders", []).append(
        (
            strategy.datas[0].datetime.date(0).isoformat(),
            side,
            float(created.size),
            None if price is None else float(price),
        )
    )


def _gated(cls: type, fold_start: date) -> type:
    """Subclass whose buy/sell refuse orders on bars dated before ``fold_start``.

    ``close``, ``order_target_*`` and brackets all go through buy/sell. Placed
    orders are noted for the lookahead check.
    """

    def buy(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.datas[0].datetime.date(0) < fold_start:
            return None
        order = cls.buy(self, *args, **kwargs)
        _note_order(self, order, "buy")
        return order

    def sell(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.datas[0].datetime.date(0) < fold_start:
            return None
        order = cls.sell(self, *args, **kwargs)
        _note_order(self, order, "sell")
        return order

    # Same __module__ as the user class: backtrader's metaclass resolves it.
    namespace = {"buy": buy, "sell": sell, "__module__": cls.__module__}
    return type(cls)(cls.__name__, (cls,), namespace)


# ---------------------------------------------------------------------------- errors


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _describe_error(exc: BaseException, code_file: str | None) -> str:
    msg = f"{type(exc).__name__}: {_one_line(exc)}" if str(exc) else type(exc).__name__
    where = ""
    if isinstance(exc, SyntaxError) and exc.filename == code_file and exc.lineno:
        where = f" [line {exc.lineno}: {_one_line(exc.text or '')}]"
    elif code_file is not None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == code_file]
        if frames:
            last = frames[-1]
            where = f" [line {last.lineno} in {last.name}: {_one_line(last.line or '')}]"
    return (msg + where)[:MAX_ERROR_CHARS]


@contextlib.contextmanager
def _wall_clock_limit(seconds: float) -> Iterator[None]:
    """SIGALRM-based timeout; only possible in the main thread of a process."""
    usable = (
        seconds
        and seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise JobTimeout(f"wall-clock limit of {seconds:g} s exceeded")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------- run


def _feed_frame(bars: pd.DataFrame, fold: Fold) -> pd.DataFrame:
    lo = pd.Timestamp(fold.warmup_start)
    hi = pd.Timestamp(fold.end) + pd.Timedelta(days=1)  # end inclusive, intraday too
    index = bars.index
    if index.is_monotonic_increasing:  # the loaders guarantee it: slice, don't mask
        i, j = index.searchsorted(lo, "left"), index.searchsorted(hi, "left")
        frame = bars.iloc[i:j][OHLCV]
    else:
        frame = bars.loc[(index >= lo) & (index < hi), OHLCV]
    return frame.astype("float64")  # copy-on-write (pandas 3): no copy when already float64


def trim_bars(job: BacktestJob) -> BacktestJob:
    """``job`` carrying only the bars its run reads (warm-up start to fold end).

    For jobs crossing a process boundary: a symbol's whole history is often ten times
    the window, and pickling it for every job was a visible part of the pool's cost.
    The run's result is unchanged (``_feed_frame`` of the trimmed bars is the same frame).
    """
    try:
        frame = _feed_frame(job.bars, job.fold)
    except Exception:  # malformed bars: leave them for the run to report
        return job
    return replace(job, bars=frame) if len(frame) < len(job.bars) else job


def _result(job: BacktestJob, status: JobStatus, **kw: Any) -> BacktestResult:
    return BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=status,
        **kw,
    )


def _simulate(job: BacktestJob, run: EngineRun, code_file_box: list[str]) -> None:
    module, code_file = _load_module(job.code, job.variant_id)
    code_file_box.append(code_file)
    try:
        user_cls = _pick_strategy(module)
        params = _check_params(user_cls, job.params)
        frame = _feed_frame(job.bars, job.fold)
        fold_start = job.fold.start
        if frame.empty or frame.index[-1].date() < fold_start:
            raise ValueError(
                f"no bars for {job.symbol} in fold {job.fold.index} "
                f"({job.fold.start}..{job.fold.end})"
            )

        cerebro = bt.Cerebro(stdstats=False, preload=True, runonce=True, maxcpus=1)
        cerebro.adddata(FramePandasData(dataname=frame, openinterest=None), name=job.symbol)
        cerebro.addstrategy(_gated(user_cls, fold_start), **params)
        cerebro.addanalyzer(_Recorder, _name="recorder", stop_after=job.stop_after)
        costs = job.costs
        cerebro.broker.setcash(costs.cash)
        cerebro.broker.setcommission(commission=costs.commission_pct / 100.0)
        cerebro.broker.set_slippage_perc(
            costs.slippage_pct / 100.0,
            slip_open=True,
            slip_limit=True,
            slip_match=True,
            slip_out=False,
        )
        # Generated code may print on every bar: keep worker/CLI output clean.
        with contextlib.redirect_stdout(io.StringIO()):
            strategy = cerebro.run()[0]
    finally:
        sys.modules.pop(module.__name__, None)

    rec = strategy.analyzers.recorder
    run.strategy = strategy
    run.fills = rec.fills
    run.dates = dates = rec.dates  # computed once: a conversion of every bar
    run.values = rec.values

    first = next((i for i, d in enumerate(dates) if d >= fold_start), None)
    if first is None:
        raise ValueError(f"no bars on or after fold start {fold_start}")
    base = rec.values[first - 1] if first > 0 else costs.cash
    equity = [base, *rec.values[first:]]
    bars_in_market = int(sum(rec.in_market[first:]))
    traded = float(sum(abs(f.size) * f.price for f in rec.fills if f.executed >= fold_start))
    metrics = compute_metrics(
        equity,
        trade_pnls=rec.pnls,
        bars_in_market=bars_in_market,
        periods_per_year=job.periods_per_year,
        traded_notional=traded,
    )
    returns = [b / a - 1.0 for a, b in itertools.pairwise(equity)]
    run.result = _result(
        job,
        JobStatus.OK,
        metrics=metrics,
        return_dates=backtrader_keys(rec.nums[first:]),
        returns=returns,
        trade_pnls=list(rec.pnls),
        bars_in_market=bars_in_market,
        traded_notional=traded,
    )


def execute(job: BacktestJob) -> EngineRun:
    """Run ``job`` and keep the fills, per-bar values and strategy instance. Never raises."""
    started = time.perf_counter()
    run = EngineRun(result=_result(job, JobStatus.ERROR, error="not run"))
    code_file: list[str] = []
    try:
        with _wall_clock_limit(job.timeout_s):
            _simulate(job, run, code_file)
    except JobTimeout as exc:
        run.result = _result(job, JobStatus.TIMEOUT, error=f"Timeout: {exc}")
    except (Exception, SystemExit) as exc:
        # SystemExit: generated code calling sys.exit() must not end the worker.
        run.result = _result(
            job, JobStatus.ERROR, error=_describe_error(exc, code_file[0] if code_file else None)
        )
    finally:
        if code_file:
            linecache.cache.pop(code_file[0], None)
    run.result.duration_s = round(time.perf_counter() - started, 4)
    return run


def run_job(job: BacktestJob) -> BacktestResult:
    """Run one job; never raises (errors and timeouts come back as statuses)."""
    return execute(job).result


def run_code_on_bars(
    code: str,
    bars: pd.DataFrame,
    *,
    params: dict[str, float | int] | None = None,
    costs: CostModel | None = None,
    start: date | None = None,
    end: date | None = None,
    symbol: str = "SYMBOL",
    periods_per_year: int = 252,
    timeout_s: float = 120.0,
) -> BacktestResult:
    """Convenience: run ``code`` over ``bars``; bars before ``start`` are warm-up only."""
    index = pd.DatetimeIndex(bars.index)
    if len(index) == 0:
        raise ValueError("run_code_on_bars needs at least one bar")
    first, last = index[0].date(), index[-1].date()
    fold = Fold(index=0, warmup_start=first, start=start or first, end=end or last)
    job = BacktestJob(
        job_id=f"adhoc-{datetime.now():%H%M%S}-{next(_counter)}",
        variant_id="adhoc",
        code=code,
        symbol=symbol,
        bars=bars,
        fold=fold,
        costs=costs or CostModel(),
        params=dict(params or {}),
        periods_per_year=periods_per_year,
        timeout_s=timeout_s,
    )
    return run_job(job)
