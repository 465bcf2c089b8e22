"""What the file-level CLIs (``backtest.run``, ``backtest.screen``, ``strategies.render``) share:
a parser whose errors are one line and exit 2, the same one-line refusal for a bad value, and
the window-and-costs arguments of a backtest on a CSV folder."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from backtest.margin import MAX_GROSS_LEVERAGE

if TYPE_CHECKING:
    import pandas as pd

    from backtest.contracts import CostModel, Fold


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr, exit 2, no usage dump."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with one line on stderr, no usage dump."""
        self.exit(2, f"{self.prog.removeprefix('python -m ')}: {message}\n")


def refuse(prog: str, argument: str, message: str) -> NoReturn:
    """One line naming the argument and what is wrong with it; exit 2."""
    sys.stderr.write(f"{prog}: {argument}: {message}\n")
    raise SystemExit(2)


def iso_date(text: str) -> date:
    """argparse type: ``text`` as a date, or a one-line error naming the expected form."""
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO date (YYYY-MM-DD)") from exc


BORROW_HELP = (
    "borrow fee on shorts, percent a year of their market value, accrued per bar held short "
    "and debited from cash (default 0: none; backtest.borrow)"
)


class NotABorrowRate(argparse.ArgumentTypeError, ValueError):
    """A --borrow-cost that is not a yearly percentage. argparse prints its message as the
    argument's error; the Python APIs, which try the flag's type and fall back to their own
    check on a ValueError, then name the option themselves (``borrow_problem``)."""


def borrow_problem(value: object) -> str | None:
    """What is wrong with a --borrow-cost value (None: nothing), as the one line to print."""
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= 100
    )
    if ok:
        return None
    return (
        f"{value!r} is not a yearly fee in percent; give a number from 0 to 100, e.g. "
        "--borrow-cost 2.5 (0, the default, charges nothing)"
    )


def borrow_pct(text: str | float) -> float:
    """argparse type of --borrow-cost: a number from 0 to 100 (percent a year)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = text  # type: ignore[assignment]
    problem = borrow_problem(value)
    if problem is not None:
        raise NotABorrowRate(problem)
    return value


def add_window_arguments(p: argparse.ArgumentParser) -> None:
    """--data-dir, --tickers, --start, --end, --warmup-days, --repair and the costs."""
    p.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        help="folder of SYMBOL.csv files (date,open,high,low,close,volume)",
    )
    p.add_argument("--tickers", required=True, help="AAPL or AAPL,MSFT")
    p.add_argument("--start", type=iso_date, required=True, help="first traded day, ISO date")
    p.add_argument("--end", type=iso_date, required=True, help="last day, ISO date")
    p.add_argument(
        "--warmup-days",
        type=int,
        default=365,
        help="calendar days before --start that feed indicators only (default 365)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="mend broken bars instead of exiting 2 on them: drop rows with a non-positive "
        "price and earlier copies of a repeated date, widen high/low to hold open/close; "
        "each change is printed on stderr and listed in the output",
    )
    p.add_argument("--commission", type=float, default=0.1, help="percent per side (default 0.1)")
    p.add_argument("--slippage", type=float, default=0.05, help="percent per side (default 0.05)")
    p.add_argument("--borrow-cost", type=borrow_pct, default=0.0, help=BORROW_HELP)
    p.add_argument("--cash", type=float, default=100_000.0, help="starting cash (default 100000)")
    p.add_argument(
        "--max-gross-leverage",
        type=float,
        default=MAX_GROSS_LEVERAGE,
        help=f"initial margin: gross exposure over equity after an opening fill "
        f"({MAX_GROSS_LEVERAGE:g}; above it is deliberate leverage; backtest.margin)",
    )


def checked_tickers(prog: str, args: argparse.Namespace) -> list[str]:
    """The window arguments' checks (each a one-line exit 2); the tickers asked for."""
    tickers = [t.strip() for t in args.tickers.split(",") if t.strip()]
    if not tickers:
        refuse(prog, "--tickers", "no symbol given; pass e.g. AAPL or AAPL,MSFT")
    if args.start > args.end:
        refuse(prog, "--start/--end", f"start {args.start} is after end {args.end}")
    for name in ("commission", "slippage"):
        if not 0 <= getattr(args, name) <= 5:
            refuse(prog, f"--{name}", "must be a percentage between 0 and 5")
    if not 0 < args.max_gross_leverage <= 1000:
        refuse(prog, "--max-gross-leverage", "must be above 0 and at most 1000 (e.g. 2 or 4)")
    return tickers


def load_window(
    prog: str, args: argparse.Namespace, tickers: list[str]
) -> tuple[dict[str, pd.DataFrame], Fold, CostModel, int, list[str]]:
    """Each ticker's bars from the CSV folder (warm-up included), the fold, the costs, the
    bars a year, and the data warnings (the window's edges the data does not reach, what
    ``--repair`` changed), already printed on stderr; a file that cannot be read, or one with
    broken bars without ``--repair``, exits 2 naming the argument."""
    from backtest.contracts import CostModel, Fold
    from backtest.data import load_bars, periods_per_year
    from backtest.errors import BacktestError

    warmup_start = args.start - timedelta(days=args.warmup_days)
    bars, notes = {}, []
    for sym in tickers:
        try:
            loaded = load_bars(
                sym,
                start=warmup_start,
                end=args.end,
                source="csv",
                data_dir=args.data_dir,
                repair=getattr(args, "repair", False),
            )
        except BacktestError as exc:
            msg = str(exc)
            arg, _, rest = msg.partition(": ")
            refuse(prog, arg if arg.startswith("--") else "--tickers", rest if rest else msg)
        bars[sym] = loaded.bars
        notes += [
            f"{sym}: {w} (window includes --warmup-days)" for w in loaded.quality.coverage_warnings
        ]
        notes += [f"repaired {line}" for line in loaded.repair_lines()]
    for line in notes:
        sys.stderr.write(f"{prog}: warning: {line}\n")
    costs = CostModel(
        commission_pct=args.commission,
        slippage_pct=args.slippage,
        borrow_pct=args.borrow_cost,
        cash=args.cash,
        max_gross_leverage=args.max_gross_leverage,
    )
    fold = Fold(index=0, warmup_start=warmup_start, start=args.start, end=args.end)
    return bars, fold, costs, periods_per_year(next(iter(bars.values()))), notes


def load_index_feeds(
    prog: str, args: argparse.Namespace, code: str, warmup_start: date
) -> dict[str, pd.DataFrame]:
    """The index feeds ``code`` reads (``getdatabyname("index:SPY")``, a regime filter's:
    ``strategies.regime``), by feed name, from the same CSV folder and window as the tickers;
    a missing file exits 2 naming it."""
    from backtest.data import load_bars
    from backtest.errors import BacktestError
    from strategies.regime import feed_name, index_symbols

    feeds = {}
    for sym in index_symbols(code):
        try:
            feeds[feed_name(sym)] = load_bars(
                sym, start=warmup_start, end=args.end, source="csv", data_dir=args.data_dir
            ).bars
        except BacktestError as exc:
            refuse(
                prog,
                "--data-dir",
                f"the strategy reads the index {sym} (getdatabyname({feed_name(sym)!r})): "
                f"add {sym}.csv to {args.data_dir} ({str(exc).partition(': ')[2] or exc})",
            )
    return feeds
