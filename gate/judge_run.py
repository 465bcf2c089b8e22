"""The judge's run: data and windows, sandboxed backtests, the gate, the lookahead check and
the holdout, for files ``gate.judge`` has already read and checked.

The pieces are the lab's own: ``backtest.splits`` seals the holdout and cuts the folds as
``swarm.develop`` does, ``backtest.benchmark`` prices the benchmark on the same windows,
``gate.evaluate.evaluate_variants`` is the one place a pass is decided, and
``backtest.lookahead`` compares truncated re-runs. Unlike the develop loop, every file gets
the lookahead check, passing or not: a user's file is judged once and its bias is the news.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import pandas as pd

from backtest.benchmark import BUY_AND_HOLD, CASH, Benchmark, returns_metrics
from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus
from backtest.data import LoadedBars, load_bars, periods_per_year
from backtest.errors import DataError
from backtest.executors import Executor
from backtest.lookahead import LookaheadReport, check_lookahead
from backtest.splits import TimeSplit, holdout_fold, split_holdout, walk_forward_folds
from gate.aggregate import aggregate_variant, portfolio_series
from gate.alpha import aligned_stats, run_spa
from gate.contracts import Criteria, VariantEvaluation
from gate.evaluate import best_evaluation, evaluate_variants, lookahead_veto
from gate.judge_input import JudgeInputError, StrategyFile, job_symbols, variant_ids
from gate.judge_result import (
    EXIT,
    FAILING,
    TRIALS_CAVEAT,
    FileVerdict,
    HoldoutOutcome,
    JudgeResult,
    JudgeStatus,
)
from gate.ledger import TrialLedger
from strategies.family_api import whole_universe
from strategies.portfolio import LABEL as PORTFOLIO
from strategies.regime import feed_name, index_symbols

MIN_BENCHMARK_OVERLAP = 60  # in-sample returns a symbol benchmark must share (as develop)
DECLARED = "declared"  # trial-key prefix of the trials the user declares beyond the files


@dataclass
class JudgeOptions:
    """What ``gate.judge.judge`` checked; every field is already valid."""

    files: list[StrategyFile]
    data_dir: Path
    tickers: list[str]
    start: date
    end: date
    benchmark: str
    trials: int
    alt_data: Path | None
    criteria: Criteria
    n_folds: int
    holdout_frac: float
    warmup_bars: int
    costs: CostModel
    cuts: int
    timeout_s: float
    workers: int | None
    executor: str
    seed: int
    out: Path
    argv: list[str] = field(default_factory=list)


@dataclass
class Window:
    """The data and its cut: bars by ticker (the whole range, holdout included), the index
    feeds files read, the split, the folds, the sealed holdout and the benchmark."""

    data: dict[str, LoadedBars]
    indices: dict[str, LoadedBars]
    split: TimeSplit
    folds: list[Fold]
    holdout: Fold
    benchmark: Benchmark
    periods_per_year: int

    def bars(
        self, f: StrategyFile, symbol: str, *, sealed: bool = True
    ) -> pd.DataFrame | dict[str, pd.DataFrame]:
        """A job's bars: one ticker's or (portfolio) every ticker's, the index feeds the code
        reads after them; in-sample only while ``sealed``."""

        def cut(frame: pd.DataFrame) -> pd.DataFrame:
            return self.split.insample_bars(frame) if sealed else frame

        traded = (
            {s: cut(d.bars) for s, d in self.data.items()}
            if symbol == PORTFOLIO
            else cut(self.data[symbol].bars)
        )
        wanted = index_symbols(f.code)
        if not wanted:
            return traded
        out = dict(traded) if isinstance(traded, dict) else {symbol: traded}
        for s in wanted:
            out[feed_name(s)] = cut(self.indices[s].bars)
        return out

    def data_sha256(self, symbol: str) -> str:
        """The hash of the bars ``symbol`` runs on (the portfolio's hashes every symbol's)."""
        if symbol != PORTFOLIO:
            return self.data[symbol].sha256
        joined = ",".join(f"{s}:{d.sha256}" for s, d in self.data.items())
        return hashlib.sha256(joined.encode()).hexdigest()


def load_window(o: JudgeOptions) -> Window:
    """Bars from ``--data-dir`` over [start, end], split as ``swarm.develop`` splits them."""
    data = {s: _load(o, s, "--tickers") for s in o.tickers}
    indices = {
        s: _load(o, s, "--data-dir", reader=f.path.name)
        for f in o.files
        for s in index_symbols(f.code)
    }
    calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
    split = split_holdout(calendar, holdout_frac=o.holdout_frac)
    folds = walk_forward_folds(calendar, split, n_folds=o.n_folds, warmup_bars=o.warmup_bars)
    hold = holdout_fold(calendar, split, warmup_bars=o.warmup_bars)
    bench = _benchmark(o, data, calendar, folds)
    ppy = periods_per_year(pd.DataFrame(index=calendar))
    return Window(data, indices, split, folds, hold, bench, ppy)


def _load(o: JudgeOptions, symbol: str, arg: str, reader: str | None = None) -> LoadedBars:
    try:
        return load_bars(symbol, start=o.start, end=o.end, source="csv", data_dir=o.data_dir)
    except DataError as exc:
        why = str(exc).partition(": ")[2] or str(exc)
        who = f"{reader} reads the index {symbol}: " if reader else ""
        raise JudgeInputError(f"{arg}: {who}no usable data for {symbol}: {why}") from None


def _benchmark(
    o: JudgeOptions, data: dict[str, LoadedBars], calendar: pd.DatetimeIndex, folds: list[Fold]
) -> Benchmark:
    if o.benchmark == CASH:
        return Benchmark(name=CASH, calendar=calendar)
    if o.benchmark == BUY_AND_HOLD:
        return Benchmark(
            name=BUY_AND_HOLD, held={s: d.bars for s, d in data.items()}, calendar=calendar
        )
    held = data[o.benchmark] if o.benchmark in data else _load(o, o.benchmark, "--benchmark")
    bench = Benchmark(name=o.benchmark, held={o.benchmark: held.bars}, calendar=calendar)
    if len(bench.fold_returns(folds, costs=o.costs)) < MIN_BENCHMARK_OVERLAP:
        raise JudgeInputError(
            f"--benchmark: {o.benchmark} shares fewer than {MIN_BENCHMARK_OVERLAP} in-sample "
            "dates with the tickers; pick a series covering the range, or buy-and-hold / cash"
        )
    return bench


def in_sample_jobs(o: JudgeOptions, w: Window, f: StrategyFile, vid: str) -> list[BacktestJob]:
    """The in-sample jobs of one file: one per symbol and fold."""
    return [
        BacktestJob(
            job_id=f"{vid}|{symbol}|f{fold.index}",
            variant_id=vid,
            code=f.code,
            symbol=symbol,
            bars=w.bars(f, symbol),
            fold=fold,
            costs=o.costs,
            periods_per_year=w.periods_per_year,
            timeout_s=o.timeout_s,
        )
        for symbol in job_symbols(f, o.tickers)
        for fold in w.folds
    ]


def declared_ledger(trials: int, trial_keys: list[str]) -> TrialLedger:
    """A ledger holding the declared count: the files are recorded by the gate itself, the
    rest as trials without a Sharpe (they count in N; the dispersion V falls back to what
    noise alone gives, ``TrialLedger``'s cap)."""
    ledger = TrialLedger()
    for k in range(max(0, trials - len(set(trial_keys)))):
        ledger.record(f"{DECLARED}:{k}", None)
    return ledger


@dataclass
class Judged:
    """What ``evaluate`` found, for the result and the run folder."""

    window: Window
    ids: list[str]
    results: list[BacktestResult]
    evaluations: list[VariantEvaluation]
    lookahead: dict[str, LookaheadReport]
    ledger: TrialLedger
    spa_pvalue: float | None
    spa_trials: int
    bench_in: dict[str, float]
    holdout: HoldoutOutcome | None = None
    holdout_results: list[BacktestResult] = field(default_factory=list)


def evaluate(o: JudgeOptions, w: Window, executor: Executor) -> Judged:
    """Backtest every file in-sample, run the gate, check lookahead, open the holdout once."""
    ids = variant_ids(o.files)
    jobs = [j for f, vid in zip(o.files, ids, strict=True) for j in in_sample_jobs(o, w, f, vid)]
    results = executor.map(jobs)
    bench_in = {
        str(k): float(v) for k, v in w.benchmark.fold_returns(w.folds, costs=o.costs).items()
    }
    # SPA asks whether the best of several files beats the benchmark given how many there were.
    spa_p, spa_n = None, 0
    if len(o.files) > 1:
        series = {vid: portfolio_series([r for r in results if r.variant_id == vid]) for vid in ids}
        spa_p, spa_n = run_spa(series, bench_in, seed=o.seed)
    keys = [hashlib.sha256(f.code.encode()).hexdigest() for f in o.files]
    ledger = declared_ledger(o.trials, keys)
    evaluations = evaluate_variants(
        [(vid, f.scope, key) for f, vid, key in zip(o.files, ids, keys, strict=True)],
        results,
        o.criteria,
        ledger,
        periods_per_year=w.periods_per_year,
        benchmark=None if w.benchmark.is_cash else bench_in,
        benchmark_name=w.benchmark.name,
        # Several files: not computable is not evidence (no pass on it), as in the loop.
        spa_pvalue=(1.0 if spa_p is None else spa_p) if len(o.files) > 1 else None,
    )
    looks: dict[str, LookaheadReport] = {}
    for f, vid, ev in zip(o.files, ids, evaluations, strict=True):
        # Lookahead is a property of the code: the first ticker (or the whole universe) on
        # the last in-sample fold suffices, with the scored job's ids.
        on = job_symbols(f, o.tickers)[0]
        fold = w.folds[-1]
        looks[vid] = report = check_lookahead(
            f.code,
            w.bars(f, on),
            fold=fold,
            costs=o.costs,
            n_cuts=o.cuts,
            executor=executor,
            symbol=on,
            timeout_s=o.timeout_s,
            job_id=f"{vid}|{on}|f{fold.index}",
            variant_id=vid,
        )
        if (veto := lookahead_veto(report, on)) is not None:
            ev.veto(*veto)
    judged = Judged(w, ids, results, evaluations, looks, ledger, spa_p, spa_n, bench_in)
    clean = [e for e in evaluations if not FAILING.intersection(e.veto_kinds)]
    top = best_evaluation(clean)
    if top is not None:
        f = o.files[ids.index(top.variant_id)]
        judged.holdout, judged.holdout_results = open_holdout(o, w, f, top.variant_id, executor)
    return judged


def open_holdout(
    o: JudgeOptions, w: Window, f: StrategyFile, vid: str, executor: Executor
) -> tuple[HoldoutOutcome, list[BacktestResult]]:
    """The sealed holdout, opened once, for the best clean file; reported, never fed back."""
    fold = w.holdout
    jobs = [
        BacktestJob(
            job_id=f"{vid}|{symbol}|holdout",
            variant_id=vid,
            code=f.code,
            symbol=symbol,
            bars=w.bars(f, symbol, sealed=False),
            fold=fold,
            costs=o.costs,
            periods_per_year=w.periods_per_year,
            timeout_s=o.timeout_s,
        )
        for symbol in job_symbols(f, o.tickers)
    ]
    results = executor.map(jobs)
    ok = [r for r in results if r.status == JobStatus.OK]
    metrics, _, _ = aggregate_variant(ok, periods_per_year=w.periods_per_year)
    bench = w.benchmark.window_returns(fold.start, fold.end, costs=o.costs)
    by_date = portfolio_series(ok)
    alpha = (
        aligned_stats(
            by_date,
            None if w.benchmark.is_cash else {str(k): float(v) for k, v in bench.items()},
            name=w.benchmark.name,
            periods_per_year=w.periods_per_year,
        )
        if by_date
        else None
    )
    outcome = HoldoutOutcome(
        variant_id=vid,
        start=fold.start,
        end=fold.end,
        metrics=metrics,
        benchmark=returns_metrics(bench, periods_per_year=w.periods_per_year),
        alpha=alpha,
        errors=[f"{r.symbol} {r.status}: {r.error}" for r in results if r.error],
    )
    return outcome, results


def verdicts(o: JudgeOptions, j: Judged) -> list[FileVerdict]:
    """Each file's verdict: its criteria rows and whether it passes."""
    from experiments.scorecard import FILLS, ROUND_TRIPS, criteria_rows
    from gate.judge_result import CriterionResult

    out = []
    for f, vid, ev in zip(o.files, j.ids, j.evaluations, strict=True):
        rows = criteria_rows(
            o.criteria,
            metrics=ev.metrics,
            alpha=ev.alpha,
            score=ev.score,
            dsr=ev.dsr,
            spa_pvalue=ev.spa_pvalue,
            cash=j.window.benchmark.is_cash,
            trades=FILLS if whole_universe(f.scope) else ROUND_TRIPS,
        )
        failed = bool(FAILING.intersection(ev.veto_kinds))
        out.append(
            FileVerdict(
                file=str(f.path),
                variant_id=vid,
                class_name=f.class_name,
                scope=f.scope,
                exported=f.exported,
                status=JudgeStatus.FAILED if failed else JudgeStatus.OK,
                passed=ev.passed,
                vetoes=ev.vetoes,
                veto_kinds=ev.veto_kinds,
                errors=ev.errors,
                metrics=ev.metrics,
                fold_sharpes=ev.fold_sharpes,
                score=ev.score,
                dsr=ev.dsr,
                alpha=ev.alpha,
                criteria=[
                    CriterionResult(
                        name=r.name,
                        value=r.value,
                        op=r.op,
                        threshold=r.threshold,
                        passed=r.passed,
                        margin=r.margin,
                        attainment=r.attainment,
                    )
                    for r in rows
                ],
                lookahead=j.lookahead.get(vid),
            )
        )
    return out


def result_of(o: JudgeOptions, j: Judged, run_dir: Path) -> JudgeResult:
    """The judge's result: the verdicts, the window and the best file."""
    files = verdicts(o, j)
    status = (
        JudgeStatus.FAILED if any(v.status == JudgeStatus.FAILED for v in files) else JudgeStatus.OK
    )
    w = j.window
    top = best_evaluation(j.evaluations)
    return JudgeResult(
        status=status,
        exit_code=EXIT[status],
        run_dir=str(run_dir),
        tickers=o.tickers,
        start=o.start,
        end=o.end,
        split=w.split,
        folds=w.folds,
        benchmark=w.benchmark.name,
        benchmark_description=w.benchmark.describe(),
        benchmark_in_sample=returns_metrics(
            pd.Series(j.bench_in, dtype=float), periods_per_year=w.periods_per_year
        ),
        trials_declared=o.trials,
        trials_counted=j.ledger.deflation_trials(),
        caveat=TRIALS_CAVEAT.format(n=o.trials),
        spa_pvalue=j.spa_pvalue,
        spa_trials=j.spa_trials,
        best=top.variant_id if top else None,
        files=files,
        holdout=j.holdout,
        alt_data=str(o.alt_data) if o.alt_data else None,
    )
