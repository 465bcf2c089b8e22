"""Judge your own Backtrader strategy the way the lab judges its variants.

    python -m gate.judge FILE [FILE ...] --data-dir DIR --tickers AAPL,MSFT \\
        --start 2012-01-01 --end 2020-12-31 [--benchmark buy-and-hold|SYMBOL|cash] [--trials N]

or from Python: ``gate.judge.judge(path_or_paths, **options) -> JudgeResult`` (never exits).

Each FILE holds one ``bt.Strategy`` subclass (``params`` optional), or is a file
``experiments.export`` wrote (its embedded strategy is judged). A class that reads several
feeds (``self.datas``, ``self.data1``) is a portfolio: one run over every ticker at once;
otherwise one run per ticker. The code runs sandboxed like any variant, with the lab's costs,
walk-forward folds over the in-sample window, benchmark, alpha statistics, deflated Sharpe and
deflated alpha for the trial count you declare (``--trials``: every variant you tried, these
files included; the deflation is only as honest as that count), Hansen's SPA over the files
when several are given, and the lookahead check (truncated re-runs compared on the fills the
trusted books replayed). The sealed holdout is opened once, for the best clean file, and
recorded. The run folder (``--out``, default ./runs) holds manifest.json, experiments.jsonl,
verdict.json, judge.json, report.md (a per-criterion table per file) and the sources judged;
stdout gets the JSON verdict (``JudgeResult``), then nothing else.

Exit codes:
  0  judged and clean (whether it passed the gate is ``passed`` in the JSON);
  1  judged and failed: lookahead measured or unmeasurable, an integrity error in the fills,
     or the code did not run (every job, or most, errored);
  2  bad input: a missing or refused file, no strategy class, a bad option, no data for a
     ticker (one line on stderr saying what to fix, no traceback);
  3  internal failure (the run folder is kept, with error.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from backtest.benchmark import BUY_AND_HOLD, normalise_name
from backtest.cli_args import BORROW_HELP, borrow_pct, borrow_problem
from backtest.contracts import CostModel
from backtest.errors import BacktestError
from backtest.executors import make_executor
from backtest.sandbox import SandboxPolicy
from gate.criteria import CRITERIA_HELP, CRITERIA_REPLACE_HELP, Criteria
from gate.errors import CriteriaError, GateError
from gate.judge_input import SCOPES, JudgeInputError, read_strategy
from gate.judge_report import open_run, write_outputs
from gate.judge_result import EXIT_BAD_INPUT, EXIT_INTERNAL, FileVerdict, JudgeResult, JudgeStatus
from gate.judge_run import JudgeOptions, evaluate, load_window, result_of

__all__ = [
    "FileVerdict",
    "JudgeInputError",
    "JudgeResult",
    "JudgeRunError",
    "JudgeStatus",
    "judge",
    "main",
]

PROG = "gate.judge"
EXECUTORS = ("process", "serial")


def judge(
    path_or_paths: str | Path | Sequence[str | Path],
    *,
    data_dir: str | Path,
    tickers: str | Sequence[str],
    start: str | date,
    end: str | date,
    benchmark: str = BUY_AND_HOLD,
    trials: int = 1,
    alt_data: str | Path | None = None,
    criteria: str | None = None,
    criteria_replace: bool = False,
    folds: int = 3,
    holdout: float = 0.2,
    warmup_bars: int = 200,
    commission: float = 0.1,
    slippage: float = 0.05,
    borrow_cost: float = 0.0,
    cash: float = 100_000.0,
    scope: str = "auto",
    cuts: int = 10,
    timeout: float = 120.0,
    workers: int | None = None,
    executor: str = "process",
    seed: int = 0,
    out: str | Path = "runs",
    argv: list[str] | None = None,
) -> JudgeResult:
    """Judge the file(s); the verdict is also written to a new run folder under ``out``.

    Raises ``JudgeInputError`` (one line naming the fix) on bad input; never calls
    ``sys.exit``. Options mean what ``python -m gate.judge --help`` says.
    """
    paths = [path_or_paths] if isinstance(path_or_paths, str | Path) else list(path_or_paths)
    _check_numbers(paths, trials, holdout, folds, warmup_bars, cuts, timeout)
    _check_choices(borrow_cost, executor, scope)
    files = [read_strategy(Path(p), scope=scope) for p in paths]
    names = _tickers(tickers)
    data, alt = _folders(data_dir, alt_data)
    first, last = _date("--start", start), _date("--end", end)
    if last <= first:
        raise JudgeInputError(f"--end {last} is not after --start {first}; swap them")
    rules, costs = _rules_and_costs(
        criteria, criteria_replace, commission, slippage, borrow_cost, cash
    )
    options = JudgeOptions(
        files=files,
        data_dir=data,
        tickers=list(dict.fromkeys(names)),
        start=first,
        end=last,
        benchmark=normalise_name(benchmark or BUY_AND_HOLD),
        trials=trials,
        alt_data=alt,
        criteria=rules,
        n_folds=folds,
        holdout_frac=holdout,
        warmup_bars=warmup_bars,
        costs=costs,
        cuts=cuts,
        timeout_s=timeout,
        workers=workers,
        executor=executor,
        seed=seed,
        out=Path(out),
        argv=list(argv) if argv is not None else [],
    )
    return _run(options, executor, workers)


def _check_numbers(
    paths: list[str | Path],
    trials: int,
    holdout: float,
    folds: int,
    warmup_bars: int,
    cuts: int,
    timeout: float,
) -> None:
    """Raise ``JudgeInputError`` on no file, or a count or fraction out of its range."""
    if not paths:
        raise JudgeInputError("FILE: no file given; pass one or more strategy .py files")
    if trials < 1:
        raise JudgeInputError(f"--trials: {trials} must be at least 1 (the files judged count)")
    if not 0 < holdout < 0.5:
        raise JudgeInputError(f"--holdout: {holdout} must be a fraction in (0, 0.5), e.g. 0.2")
    if not 1 <= folds <= 10 or warmup_bars < 0 or cuts < 1 or timeout <= 0:
        raise JudgeInputError(
            "--folds/--warmup-bars/--cuts/--timeout: folds 1..10, warm-up >= 0, cuts >= 1, "
            "timeout > 0"
        )


def _check_choices(borrow_cost: float, executor: str, scope: str) -> None:
    """Raise ``JudgeInputError`` on a bad borrow cost, executor or scope."""
    problem = borrow_problem(borrow_cost)
    if problem is not None:
        raise JudgeInputError(f"--borrow-cost: {problem}")
    if executor not in EXECUTORS:
        raise JudgeInputError(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
    if scope not in SCOPES:
        raise JudgeInputError(f"--scope: {scope!r} is not one of {', '.join(SCOPES)}")


def _tickers(tickers: str | Sequence[str]) -> list[str]:
    """The symbols upper-cased, blanks dropped; ``JudgeInputError`` when none is left."""
    names = [t.strip().upper() for t in _split(tickers) if t.strip()]
    if not names:
        raise JudgeInputError("--tickers: no symbol given; pass e.g. AAPL or AAPL,MSFT")
    return names


def _folders(data_dir: str | Path, alt_data: str | Path | None) -> tuple[Path, Path | None]:
    """The data and alt-data folders (alt may be None); ``JudgeInputError`` if not folders."""
    data = Path(data_dir)
    if not data.is_dir():
        raise JudgeInputError(f"--data-dir: {data} is not a folder; pass a folder of SYMBOL.csv")
    alt = Path(alt_data) if alt_data is not None else None
    if alt is not None and not alt.is_dir():
        raise JudgeInputError(
            f"--alt-data: {alt} is not a folder; pass a folder laid out like ../shared/data/"
        )
    return data, alt


def _rules_and_costs(
    criteria: str | None,
    criteria_replace: bool,
    commission: float,
    slippage: float,
    borrow_cost: float,
    cash: float,
) -> tuple[Criteria, CostModel]:
    """The gate's criteria and the cost model; ``JudgeInputError`` naming the bad option."""
    if criteria_replace and not (criteria or "").strip():
        raise JudgeInputError(
            "--criteria-replace: no --criteria to replace the defaults with; add --criteria "
            '"sharpe>=0.8,..." or drop --criteria-replace'
        )
    try:
        from gate.criteria import criteria_from_text

        rules = criteria_from_text(criteria, replace=criteria_replace)
        costs = CostModel(
            commission_pct=commission, slippage_pct=slippage, borrow_pct=borrow_cost, cash=cash
        )
    except CriteriaError as exc:
        raise JudgeInputError(f"--criteria: {exc}") from None
    except ValueError as exc:  # pydantic: a cost out of its range
        raise JudgeInputError(
            f"--commission/--slippage/--cash: {str(exc).splitlines()[0]}; commission and "
            "slippage are percentages between 0 and 5, cash above 0"
        ) from None
    return rules, costs


def _run(options: JudgeOptions, executor: str, workers: int | None) -> JudgeResult:
    """Load the window, open the run folder, judge and write the outputs into it."""
    try:
        window = load_window(options)
    except BacktestError as exc:  # the splits' own one-line messages ("widen the range")
        raise JudgeInputError(str(exc)) from None
    run = open_run(options, window)
    try:
        # A user's class judged as written: params optional, every other rule of the lint kept.
        policy = SandboxPolicy(require_params=False)
        with make_executor(executor, workers, policy=policy) as pool:
            judged = evaluate(options, window, pool)
        result = result_of(options, judged, run.root)
        write_outputs(run, options, judged, result)
    except Exception as exc:  # the folder is kept; main writes error.json into it
        raise JudgeRunError(run.root, exc) from exc
    return result


def _split(tickers: str | Sequence[str]) -> list[str]:
    return tickers.split(",") if isinstance(tickers, str) else list(tickers)


def _date(arg: str, value: str | date) -> date:
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise JudgeInputError(f"{arg}: {value!r} is not an ISO date; use YYYY-MM-DD") from None


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr, exit 2, no usage dump."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m gate.judge",
        description=__doc__.split("\n\n")[0],
        epilog="exit codes: 0 judged and clean (passed or not), 1 judged and failed "
        "(lookahead, integrity error, the code did not run), 2 bad input, 3 internal failure",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="strategy .py file(s)")
    p.add_argument("--data-dir", type=Path, required=True, help="folder of SYMBOL.csv files")
    p.add_argument("--tickers", required=True, help="comma-separated symbols, e.g. AAPL,MSFT")
    p.add_argument("--start", required=True, help="first date, ISO")
    p.add_argument("--end", required=True, help="last date, ISO (the holdout is its tail)")
    p.add_argument(
        "--benchmark",
        default=BUY_AND_HOLD,
        help="buy-and-hold (default: the tickers, equal weight), a symbol in --data-dir such "
        "as SPY, or cash (the absolute test)",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=1,
        help="how many variants you tried on this data in all, these files included "
        "(default 1); the deflated Sharpe is only as honest as this count",
    )
    p.add_argument(
        "--alt-data",
        type=Path,
        help="folder laid out like the corpus (fundamentals/, analyst/, news/...): recorded in "
        "the manifest; a Backtrader class is fed bars only",
    )
    p.add_argument("--criteria", help=CRITERIA_HELP)
    p.add_argument("--criteria-replace", action="store_true", help=CRITERIA_REPLACE_HELP)
    p.add_argument("--folds", type=int, default=3, help="walk-forward folds in-sample (3)")
    p.add_argument("--holdout", type=float, default=0.2, help="sealed holdout fraction (0.2)")
    p.add_argument("--warmup-bars", type=int, default=200, help="indicator warm-up bars (200)")
    p.add_argument("--commission", type=float, default=0.1, help="percent per side (0.1)")
    p.add_argument("--slippage", type=float, default=0.05, help="percent per side (0.05)")
    p.add_argument("--borrow-cost", type=borrow_pct, default=0.0, help=BORROW_HELP)
    p.add_argument("--cash", type=float, default=100_000.0)
    p.add_argument(
        "--scope",
        default="auto",
        help="auto (default: a class reading self.datas or self.data1 is a portfolio), "
        "symbol (one run per ticker) or portfolio (every ticker at once)",
    )
    p.add_argument("--cuts", type=int, default=10, help="cut points of the lookahead check (10)")
    p.add_argument("--timeout", type=float, default=120.0, help="wall seconds per run (120)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    p.add_argument("--executor", default="process", help="process (default) or serial")
    p.add_argument("--seed", type=int, default=0, help="seed of the SPA bootstrap (0)")
    p.add_argument("--out", type=Path, default=Path("runs"), help="where run folders go (runs)")
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line of the judge: prints the result as JSON; the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k != "files"}
    try:
        result = judge(args.files, **options, argv=argv)
    except JudgeInputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except JudgeRunError as exc:  # an internal failure after the folder exists: keep it
        _keep_error(exc)
        print(
            f"{PROG}: internal error: {exc.cause!r}; run folder kept, traceback in "
            f"{exc.run_dir / 'error.json'}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    print(f"{PROG}: caveat: {result.caveat}", file=sys.stderr)
    print(result.model_dump_json())
    return result.exit_code


class JudgeRunError(GateError):
    """The judge failed after its run folder was made (a bug, not bad input)."""

    def __init__(self, run_dir: Path, cause: Exception) -> None:
        super().__init__(f"{cause!r} (run folder {run_dir})")
        self.run_dir = run_dir
        self.cause = cause


def _keep_error(exc: JudgeRunError) -> None:
    tb = "".join(traceback.format_exception(exc.cause))
    at = datetime.now(UTC).isoformat()
    (exc.run_dir / "error.json").write_text(
        json.dumps({"error": repr(exc.cause), "traceback": tb, "at": at}, indent=2),
        encoding="utf-8",
    )


if __name__ == "__main__":
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
