"""Backtest one strategy file, also a user's own: ``python -m backtest.run STRATEGY.py ...``.

Prints ONE JSON object on stdout and nothing else:

    {"file": ..., "tickers": [...], "start": ..., "end": ..., "warmup_start": ...,
     "status": "ok" | "error" | "timeout" | "rejected" | "integrity_error" | "bankrupt",
     "metrics": {...} | null,          # one ticker: its metrics; several: see below
     "error": str | null,
     "lookahead": {"biased": bool, "mismatches": [...], "n_cuts": int,
                   "checked": bool, "error": str | null},          # with --check-lookahead
     "per_ticker": {TICKER: {"status", "metrics", "error", "lookahead"?}},  # 2+ tickers
     "trades": [{symbol, entry_date, exit_date, size, entry_price, exit_price}],  # --trades
     "warnings": [str, ...]}           # data starting/ending inside the window, bars
                                       # --repair changed, orders the broker refused;
                                       # also on stderr

With several tickers the top-level ``status`` is the worst one (integrity_error >
bankrupt > rejected > error > timeout > ok; bankrupt: the equity reached zero, the run
ended there, its metrics are of the equity until then: ``backtest.margin``), ``metrics`` is the equal-weight portfolio of the tickers that
ran ok (daily mean of their returns) and ``lookahead.biased`` is true when any
ticker's check was. Exit 0 whenever the file could be judged (whatever the
status), 2 on bad arguments (one line on stderr naming the argument) and on broken bars in
the window (non-positive prices, repeated dates, high below open/close or low above them: the
line names the file, the line, the date and the fix) unless ``--repair`` mends them.

The file must define exactly one ``bt.Strategy`` subclass and pass the same
static validation as generated code; it runs sandboxed. Bars before ``--start``
(``--warmup-days``, default 365 calendar days) feed indicators only.

A strategy reading an index (``self.getdatabyname("index:SPY")``, a regime filter:
``strategies.regime``) gets ``SPY.csv`` from ``--data-dir`` as an extra feed it never trades;
a missing file exits 2 naming it.

``--skip-validation`` skips the static lint and hands the file straight to the
sandbox: a way to test the sandbox alone (the lint is a convenience, not the
boundary), never a way to run untrusted code with fewer guards.

The JSON is strict: NaN and infinities are printed as ``null``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from backtest.cli_args import (
    OneLineParser,
    add_window_arguments,
    checked_tickers,
    load_index_feeds,
    load_window,
    refuse,
)
from backtest.contracts import BacktestJob, JobStatus
from backtest.metrics import strict_json

PROG = "backtest.run"
_WORST = {
    JobStatus.INTEGRITY_ERROR: 5,
    JobStatus.BANKRUPT: 4,
    JobStatus.REJECTED: 3,
    JobStatus.ERROR: 2,
    JobStatus.TIMEOUT: 1,
    JobStatus.OK: 0,
}


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m backtest.run``."""
    p = OneLineParser(prog="python -m backtest.run", description=__doc__.splitlines()[0])
    p.add_argument("strategy", type=Path, help="a .py file with one bt.Strategy subclass")
    add_window_arguments(p)
    p.add_argument("--timeout", type=float, default=120.0, help="wall seconds per run")
    p.add_argument("--check-lookahead", action="store_true", help="truncated re-run check")
    p.add_argument("--cuts", type=int, default=20, help="cut points of the lookahead check")
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    p.add_argument(
        "--executor",
        choices=("process", "serial", "ray"),
        default=None,
        help="process pool (default; serial for one job), one at a time, or Ray",
    )
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local one)")
    p.add_argument(
        "--trades",
        action="store_true",
        help="add the round trips the books accepted: trades [{symbol, entry_date, ...}]",
    )
    p.add_argument(
        "--skip-validation",
        action="store_true",
        help="skip the static lint (to test the sandbox alone; the sandbox still applies)",
    )
    return p


def _bad(argument: str, message: str) -> NoReturn:
    refuse(PROG, argument, message)


def portfolio_metrics(results: list[Any], periods_per_year: int) -> dict[str, Any] | None:
    """Metrics of the equal-weight mean of the OK results' returns; None if none is OK."""
    import pandas as pd

    from backtest.metrics import compute_metrics, equity_from_returns

    ok = [r for r in results if r.status == JobStatus.OK and r.returns]
    if not ok:
        return None
    frame = pd.concat(
        [pd.Series(r.returns, index=pd.to_datetime(r.return_dates)) for r in ok], axis=1
    )
    rets = frame.mean(axis=1, skipna=True).sort_index().to_numpy()
    metrics = compute_metrics(
        equity_from_returns(rets),
        trade_pnls=[p for r in ok for p in r.trade_pnls],
        bars_in_market=int(np.mean([r.bars_in_market for r in ok])),
        periods_per_year=periods_per_year,
    )
    return metrics.model_dump(mode="json")


def main(argv: list[str] | None = None) -> int:
    """Run the strategy file on every ticker and fold, print the results as JSON; the exit code."""
    args = build_parser().parse_args(argv)
    code = _read_strategy(args.strategy)
    tickers = checked_tickers(PROG, args)
    if args.cash <= 0 or args.timeout <= 0 or args.cuts < 1 or args.warmup_days < 0:
        _bad("--cash/--timeout/--cuts/--warmup-days", "must be positive")

    from backtest.executors import make_executor
    from backtest.sandbox import DEFAULT_POLICY, SandboxPolicy

    bars, fold, costs, ppy, data_notes = load_window(PROG, args, tickers)
    warmup_start = fold.warmup_start
    # A regime filter's index feeds, after the traded one (so self.data stays the ticker).
    feeds = load_index_feeds(PROG, args, code, warmup_start)
    job_bars = {sym: ({sym: frame} | feeds if feeds else frame) for sym, frame in bars.items()}
    jobs = [
        BacktestJob(
            job_id=f"{args.strategy.name}|{sym}",
            variant_id=args.strategy.stem,
            code=code,
            symbol=sym,
            bars=frame,
            fold=fold,
            costs=costs,
            periods_per_year=ppy,
            timeout_s=args.timeout,
        )
        for sym, frame in job_bars.items()
    ]
    parallel = args.check_lookahead or len(jobs) > 1
    policy = SandboxPolicy(validate=False) if args.skip_validation else DEFAULT_POLICY
    if args.ray_address and args.executor != "ray":
        _bad("--ray-address", "applies only with --executor ray")
    kind = args.executor or ("process" if parallel else "serial")
    executor = make_executor(kind, args.workers, args.ray_address, policy=policy)
    with executor:
        results, trades = _run_jobs(executor, jobs, args.trades)
        looks = {}
        if args.check_lookahead:
            looks = _check_lookahead(args, code, bars, job_bars, results, fold, costs, executor)

    report = _report(args, tickers, warmup_start.isoformat(), results, looks, ppy)
    if args.trades:
        report["trades"] = trades
    warnings = rejected_warnings(results)
    for line in warnings:
        sys.stderr.write(f"backtest.run: warning: {line}\n")
    report["warnings"] = data_notes + warnings  # the data's were printed as they loaded
    sys.stdout.write(json.dumps(strict_json(report), allow_nan=False) + "\n")
    return 0


def _read_strategy(path: Path) -> str:
    """The strategy file's source; exits 2 naming the problem when it cannot be read."""
    if not path.is_file():
        _bad("STRATEGY", f"{path} is not a file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _bad("STRATEGY", f"cannot read {path}: {exc}")


def _run_jobs(
    executor: Any, jobs: list[BacktestJob], with_trades: bool
) -> tuple[list[Any], list[Any]]:
    """The jobs' results in job order, and (``with_trades``) the round trips the books
    accepted, from the traced outcomes' fills."""
    trades: list[Any] = []
    if with_trades:  # the books' accepted fills come with the traced outcome
        from backtest.trade_list import trades_from_trace_fills

        outcomes = [f.result() for f in [executor.submit_trace(job) for job in jobs]]
        results = [o.result for o in outcomes]
        for job, o in zip(jobs, outcomes, strict=True):
            rows = (o.trace or {}).get("fills") or []
            trades += [t.model_dump() for t in trades_from_trace_fills(job.symbol, rows)]
    else:
        results = executor.map(jobs)
    return results, trades


def _check_lookahead(
    args: argparse.Namespace,
    code: str,
    bars: dict[str, Any],
    job_bars: dict[str, Any],
    results: list[Any],
    fold: Any,
    costs: Any,
    executor: Any,
) -> dict[str, Any]:
    """Each symbol's lookahead report (JSON), the symbols whose run was rejected left out."""
    from backtest.lookahead import check_lookahead

    looks = {}
    for sym, res in zip(bars, results, strict=True):
        if res.status == JobStatus.REJECTED:
            continue
        looks[sym] = check_lookahead(
            code,
            job_bars[sym],
            fold=fold,
            costs=costs,
            n_cuts=args.cuts,
            executor=executor,
            symbol=sym,
            timeout_s=args.timeout,
            job_id=f"{args.strategy.name}|{sym}",
            variant_id=args.strategy.stem,
        ).model_dump(mode="json", exclude={"duration_s"})
    return looks


def _one(res: Any, looks: dict[str, Any], check_lookahead: bool) -> dict[str, Any]:
    """One result's status, metrics and error (and its lookahead report, when checked)."""
    out = {
        "status": res.status.value,
        "metrics": res.metrics.model_dump(mode="json") if res.metrics else None,
        "error": res.error,
    }
    if check_lookahead:
        out["lookahead"] = looks.get(res.symbol)
    return out


def _report(
    args: argparse.Namespace,
    tickers: list[str],
    warmup_start: str,
    results: list[Any],
    looks: dict[str, Any],
    ppy: int,
) -> dict[str, Any]:
    """The JSON report: one result as is, several as the worst status, the portfolio's
    metrics, the errors, the combined lookahead check and each ticker's own."""
    worst = max(results, key=lambda r: _WORST[r.status])
    report: dict[str, Any] = {
        "file": str(args.strategy),
        "tickers": tickers,
        "start": args.start.isoformat(),
        "end": args.end.isoformat(),
        "warmup_start": warmup_start,
    }
    if len(results) == 1:
        report.update(_one(results[0], looks, args.check_lookahead))
    else:
        errors = [f"{r.symbol}: {r.error}" for r in results if r.error]
        report.update(
            status=worst.status.value,
            metrics=portfolio_metrics(results, ppy),
            error="; ".join(errors)[:2000] or None,
        )
        if args.check_lookahead:
            report["lookahead"] = _combined_lookahead(looks)
        report["per_ticker"] = {r.symbol: _one(r, looks, args.check_lookahead) for r in results}
    return report


def _combined_lookahead(looks: dict[str, Any]) -> dict[str, Any] | None:
    """The tickers' lookahead reports as one (None when none was checked)."""
    checked = [v for v in looks.values() if v]
    if not checked:
        return None
    mismatches = [f"{s}: {m}" for s, v in looks.items() if v for m in v["mismatches"]]
    return {
        "biased": any(v["biased"] for v in checked),
        "mismatches": mismatches[:20],
        "n_cuts": sum(v["n_cuts"] for v in checked),
        "checked": bool(checked) and all(v["checked"] for v in checked),
        "error": "; ".join(f"{s}: {v['error']}" for s, v in looks.items() if v["error"]) or None,
    }


def rejected_warnings(results: list[Any]) -> list[str]:
    """One line per symbol whose orders the broker refused: its figures are of the trades it
    got, not of the ones its code asked for (an entry sized at 100% of equity is refused
    whenever the next open gaps up)."""
    out = []
    for r in results:
        n = r.metrics.orders_rejected if r.metrics is not None else 0
        if n:
            out.append(
                f"{r.symbol}: the broker refused {n} order(s) (not enough cash or margin); "
                f"the {r.metrics.n_trades} trade(s) reported are the ones that filled. "
                "Size entries below 100% of equity (e.g. order_target_percent(0.95))."
            )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
