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

import numpy as np
import pandas as pd

from backtest.books import (
    ClaimedFill,
    ClaimedOrder,
    Fill,
    FillLog,
    account,
    bars_run,
    feed_frame,
    feed_frames,
)
from backtest.borrow import borrow_due, per_bar_rate
from backtest.compat import import_backtrader
from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus
from backtest.feed import FramePandasData
from backtest.margin import MAX_GROSS_LEVERAGE, exposure_after, margin_refuses, opens
from strategies.parsing import compile_source

bt = import_backtrader()

MAX_ERROR_CHARS = 500
_counter = itertools.count()


class JobTimeout(BaseException):
    """Raised by the wall-clock alarm. A BaseException so ``except Exception`` in
    generated code cannot swallow it."""


class StrategyCodeError(Exception):
    """The code is runnable Python but not a usable strategy (0 or 2+ classes, bad params)."""


@dataclass
class EngineRun:
    """Everything one run produced; ``run_job`` keeps only the result."""

    result: BacktestResult
    log: FillLog | None = None  # what the run claims (the child sends this, nothing else)
    fills: list[Fill] = field(default_factory=list)  # the fills the books accepted
    dates: list[date] = field(default_factory=list)  # every fed bar, warm-up included
    values: list[float] = field(default_factory=list)  # the books' value at each bar's close
    strategy: Any = None  # the strategy instance (None when the run failed early)
    cerebro: Any = None  # while it runs: where a failed run's recorded bars are read
    bars: int | None = None  # bars the run completed (also when it failed part-way)


# ---------------------------------------------------------------------------- analyzer


class _Recorder(bt.Analyzer):  # type: ignore[name-defined]  # bt is the patched module
    """Per-bar date and broker value, every order placed, every fill and the orders the
    broker refused: the run's claim (``FillLog``), which ``backtest.books`` checks and replays.

    Analyzers run after the strategy's ``next`` (and through ``prenext``), so every
    bar is recorded with the value marked at its close. Orders are copied (plain floats)
    when the strategy places them (``placed``), so editing an order object afterwards
    changes nothing the books read. It has no parameters: a run looks the same from inside
    whatever it is for (scored, or the lookahead check's full or cut run).
    """

    def start(self) -> None:
        # Raw backtrader date numbers per bar, converted to dates once at the end: the
        # per-bar num2date conversion was a tenth of a short backtest's time.
        self.nums: list[float] = []
        self.values: list[float] = []
        # (data, created num, executed num, side, size, price, commission, order type, order)
        self.fills: list[tuple[int, float, float, str, float, float, float, str, int]] = []
        # (data, created num, side, size, order type, price, limit price, has a parent)
        self.orders: list[tuple[int, float, str, float, str, Any, Any, bool]] = []
        self._order_at: dict[int, int] = {}  # order.ref -> its position in ``orders``
        self.rejected = 0
        self._feed = {id(d): i for i, d in enumerate(self.strategy.datas)}
        self._clock = self.strategy.datas[0].datetime
        self._broker = self.strategy.broker
        # The broker values positions in the order they were first touched: touch them in
        # feed order, the order the books sum them in.
        for d in self.strategy.datas:
            self.strategy.getposition(d)

    def next(self) -> None:
        num = self._clock[0]
        self.nums.append(num)
        self.values.append(float(self._broker.getvalue()))

    @property
    def dates(self) -> list[date]:
        # backtrader's date numbers are proleptic ordinals plus the time as a fraction
        return [date.fromordinal(int(n)) for n in self.nums]

    def placed(self, order: Any) -> None:
        """Copy ``order`` as it is placed: the books hold its fills to this copy."""
        created = order.created

        def number(x: Any) -> float | None:
            return None if x is None else float(x)

        limit = number(created.pricelimit) if order.exectype == order.StopLimit else None
        self._order_at[order.ref] = len(self.orders)
        self.orders.append(
            (
                self._feed.get(id(order.data), -1),
                float(created.dt),
                "buy" if order.isbuy() else "sell",
                float(created.size),
                order.ExecTypes[order.exectype],
                number(created.price) if order.exectype != order.Market else None,
                limit,
                order.parent is not None,
            )
        )

    def notify_order(self, order: Any) -> None:
        if order.status in (order.Margin, order.Rejected):
            self.rejected += 1
        # The execution bits since this order's previous notification: each is one fill at
        # the price the broker booked (``executed.price`` is an average, off by an ulp).
        for bit in order.executed.iterpending():
            self.fills.append(
                (
                    self._feed.get(id(order.data), -1),
                    order.created.dt,
                    bit.dt,
                    "buy" if order.isbuy() else "sell",
                    float(bit.size),
                    float(bit.price),
                    float(bit.comm),
                    order.ExecTypes[order.exectype],
                    self._order_at.get(order.ref, -1),
                )
            )

    def claim(self) -> FillLog:
        """The run's fill log, with bar positions for the date numbers."""
        at = {num: i for i, num in enumerate(self.nums)}
        return FillLog(
            fills=[
                ClaimedFill(d, at.get(c, -1), at.get(e, -1), side, size, price, comm, kind, o)
                for d, c, e, side, size, price, comm, kind, o in self.fills
            ],
            values=np.asarray(self.values, dtype=float),
            orders_rejected=self.rejected,
            orders=[ClaimedOrder(d, at.get(c, -1), *rest) for d, c, *rest in self.orders],
        )

    def get_analysis(self) -> dict[str, Any]:
        return {"n_bars": len(self.values), "n_fills": len(self.fills)}


# ---------------------------------------------------------------------------- broker


class MarginedBroker(bt.brokers.BackBroker):  # type: ignore[name-defined]  # bt is the patched module
    """backtrader's ``BackBroker`` with the lab's initial margin (``backtest.margin``).

    A stock-like broker checks only cash, and a short sale credits it: without this, any
    short was affordable. When an order's fill would open exposure beyond
    ``max_gross_leverage`` times the equity, its opening part is refused, exactly as the
    broker refuses an opening part the cash cannot pay: the part that covers a position held
    the other way still fills, the rest is refused (status ``Margin``, its bracket
    cancelled). Every other order executes as in ``BackBroker``, float for float.

    With a borrow fee (``borrow_rate`` per bar, ``backtest.borrow``) the shorts held at the
    previous bar's close pay it from cash at the start of each bar, before any order is
    checked or filled.
    """

    params = (("max_gross_leverage", MAX_GROSS_LEVERAGE), ("borrow_rate", 0.0))

    def next(self) -> None:
        """Charge the day's borrow fee on the short positions, then do the broker's usual step."""
        rate = self.p.borrow_rate
        if rate:
            # the positions in the order the recorder touched them: feed order
            datas = list(self.positions)
            sizes = [self.positions[d].size for d in datas]
            if any(s < 0.0 for s in sizes):
                self.cash -= borrow_due(sizes, [d.close[-1] for d in datas], rate)
        super().next()

    def _execute(self, order, ago=None, price=None, cash=None, position=None, dtcoc=None):
        if ago is None or price is None or not self._over_margin(order, price):
            return super()._execute(
                order, ago=ago, price=price, cash=cash, position=position, dtcoc=dtcoc
            )
        held = self.positions[order.data].size
        if held and (held > 0) != (order.executed.remsize > 0):
            # A reversal: the cover fills alone. backtrader sizes a fill by its ``filler``
            # (unsigned); the broker's own code then books it, float for float.
            cover, filler = abs(held), self.p.filler
            self.p.filler = lambda order, price, ago: cover
            try:
                super()._execute(order, ago=ago, price=price, dtcoc=dtcoc)
            finally:
                self.p.filler = filler
        order.margin()
        self.notify(order)
        self._ococheck(order)
        self._bracketize(order, cancel=True)
        return None

    def _over_margin(self, order: Any, price: float) -> bool:
        size = order.executed.remsize
        data = order.data
        if not opens(self.positions[data].size, size):
            return False
        datas = list(self.positions)  # every feed the strategy touched (the recorder: all)
        gross, equity = exposure_after(
            self.cash,
            [self.positions[d].size for d in datas],
            [d.open[0] for d in datas],
            datas.index(data),
            size,
            price,
            self.getcommissioninfo(data).getcommission(size, price),
        )
        return margin_refuses(gross, equity, self.p.max_gross_leverage)


# ---------------------------------------------------------------------------- code loading


@functools.lru_cache(maxsize=32)
def compile_code(code: str, filename: str) -> types.CodeType:
    """Compiled once per process: a batch child runs the same code for many jobs (under the
    parser's lock: the in-process engine may compile on several threads)."""
    return compile_source(code, filename)


def _load_module(code: str, variant_id: str) -> tuple[types.ModuleType, str]:
    """Compile and exec ``code`` into a fresh module registered in ``sys.modules``.

    backtrader's metaclasses look classes' modules up in ``sys.modules``, so the
    module must be registered while the run lasts (the caller removes it).
    """
    name = f"swarm_variant_{os.getpid()}_{next(_counter)}"
    filename = f"<variant {variant_id}>"
    # linecache lets tracebacks quote the generated source line.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    compiled = compile_code(code, filename)
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


def _check_params(cls: Any, params: dict[str, Any]) -> dict[str, Any]:
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
    """Keep (created date, side, size, price[, symbol]) of every order the strategy placed;
    the symbol (the feed's name) when the job has several feeds.

    The lookahead check compares these between a full and a truncated run.
    """
    if order is None:
        return
    created = order.created
    price = created.price
    row: tuple[Any, ...] = (
        strategy.datas[0].datetime.date(0).isoformat(),
        side,
        float(created.size),
        None if price is None else float(price),
    )
    if len(strategy.datas) > 1:  # a portfolio (or index-fed) job: which feed it is for
        row += (str(getattr(order.data, "_name", "") or ""),)
    strategy.__dict__.setdefault("_lab_orders", []).append(row)
    strategy.analyzers.recorder.placed(order)


def _gated(cls: Any, fold_start: date) -> Any:
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


def _one_line(text: object) -> str:
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


def trim_bars(job: BacktestJob) -> BacktestJob:
    """``job`` carrying only the bars its run reads (warm-up start to fold end).

    For jobs crossing a process boundary: a symbol's whole history is often ten times
    the window, and pickling it for every job was a visible part of the pool's cost.
    The run's result is unchanged (``feed_frame`` of the trimmed bars is the same frame).
    """
    try:
        if isinstance(job.bars, dict):
            return replace(job, bars={s: feed_frame(b, job.fold) for s, b in job.bars.items()})
        frame = feed_frame(job.bars, job.fold)
    except Exception:  # malformed bars: leave them for the run to report
        return job
    return replace(job, bars=frame) if len(frame) < len(job.bars) else job


def fresh_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A deep copy of a fed window that shares no buffer with the frame it was cut from.

    Why: a window cut by ``iloc`` is a view, and ``.to_numpy().base`` (or the index's data,
    or the block manager) then reaches every bar of the frame behind it, holdout included.
    The copy's blocks and index own exactly the window's rows.
    """
    out = frame.copy(deep=True)
    out.index = frame.index.copy(deep=True)
    return out


def window_job(job: BacktestJob) -> BacktestJob:
    """``job`` carrying fresh copies of only the bars its run reads (warm-up start to fold
    end): what a sandboxed child is sent for the job, so nothing reachable from the job
    holds a bar outside its window. Malformed bars travel as they are, for the run to report.
    Any data a job comes to carry besides its bars (alt data) must be cut and copied here too.
    """
    try:
        if isinstance(job.bars, dict):
            bars = {s: fresh_frame(feed_frame(b, job.fold)) for s, b in job.bars.items()}
            return replace(job, bars=bars)
        return replace(job, bars=fresh_frame(feed_frame(job.bars, job.fold)))
    except Exception:
        return job


def _result(job: BacktestJob, status: JobStatus, **kw: Any) -> BacktestResult:
    return BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=status,
        **kw,
    )


def _simulate(job: BacktestJob, run: EngineRun, code_file_box: list[str], books: bool) -> None:
    module, code_file = _load_module(job.code, job.variant_id)
    code_file_box.append(code_file)
    try:
        user_cls = _pick_strategy(module)
        params = _check_params(user_cls, job.params)
        frames = feed_frames(job.feeds(), job.fold)  # a portfolio's feeds on one calendar
        if job.stop_after is not None:  # fed only the bars the run covers: no run parameter
            upto = bars_run(frames[0][1], job.stop_after)
            frames = [(name, f.iloc[:upto]) for name, f in frames]
        # each fed frame a copy, made once, that reaches no bar outside what the run covers
        frames = [(name, fresh_frame(f)) for name, f in frames]
        frame = frames[0][1]
        fold_start = job.fold.start
        if frame.empty or frame.index[-1].date() < fold_start:
            raise ValueError(
                f"no bars for {job.symbol} in fold {job.fold.index} "
                f"({job.fold.start}..{job.fold.end})"
            )

        cerebro = bt.Cerebro(stdstats=False, preload=True, runonce=True, maxcpus=1)
        for name, fed in frames:
            cerebro.adddata(FramePandasData(dataname=fed, openinterest=None), name=name)
        cerebro.addstrategy(_gated(user_cls, fold_start), **params)
        cerebro.addanalyzer(_Recorder, _name="recorder")
        costs = job.costs
        borrow = per_bar_rate(costs.borrow_pct, job.periods_per_year)
        cerebro.setbroker(
            MarginedBroker(max_gross_leverage=costs.max_gross_leverage, borrow_rate=borrow)
        )
        cerebro.broker.setcash(costs.cash)
        cerebro.broker.setcommission(commission=costs.commission_pct / 100.0)
        cerebro.broker.set_slippage_perc(
            costs.slippage_pct / 100.0,
            slip_open=True,
            slip_limit=True,
            slip_match=True,
            slip_out=False,
        )
        run.cerebro = cerebro
        # Generated code may print on every bar: keep worker/CLI output clean.
        with contextlib.redirect_stdout(io.StringIO()):
            strategy = cerebro.run()[0]
    finally:
        sys.modules.pop(module.__name__, None)

    rec = strategy.analyzers.recorder
    run.strategy = strategy
    run.dates = rec.dates
    run.log = rec.claim()
    if not books:  # the sandboxed child: its parent keeps the books
        run.result = _result(job, JobStatus.OK)
        return
    kept = account(job, run.log)
    run.result, run.fills, run.values = kept.result, kept.fills, kept.values.tolist()


def _bars_recorded(run: EngineRun) -> int | None:
    """How many bars the run completed: all it recorded, also when it failed part-way (the
    lookahead check compares where a cut run failed with where the full run did)."""
    if run.log is not None:
        return len(run.log.values)
    try:
        return len(run.cerebro.runningstrats[0].analyzers.recorder.nums)
    except Exception:  # it failed before the recorder started
        return None


def execute(job: BacktestJob, *, books: bool = True) -> EngineRun:
    """Run ``job``; keep its fill log, the strategy instance and (``books``) the books kept
    of the log: the result, the accepted fills, the per-bar values. Never raises.

    ``books=False`` is the sandboxed child's mode: it only claims (``run.log``); the
    parent, which holds the same bars and costs, keeps the books (``backtest.books``).
    """
    started = time.perf_counter()
    run = EngineRun(result=_result(job, JobStatus.ERROR, error="not run"))
    code_file: list[str] = []
    try:
        with _wall_clock_limit(job.timeout_s):
            _simulate(job, run, code_file, books)
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
    run.bars = _bars_recorded(run)
    run.cerebro = None
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
