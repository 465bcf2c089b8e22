"""What the file-level CLIs (``backtest.run``, ``backtest.screen``, ``strategies.render``) share:
a parser whose errors are one line and exit 2, the same one-line refusal for a bad value, and
the window-and-costs arguments of a backtest on a CSV folder."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr, exit 2, no usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog.removeprefix('python -m ')}: {message}\n")


def refuse(prog: str, argument: str, message: str) -> NoReturn:
    """One line naming the argument and what is wrong with it; exit 2."""
    sys.stderr.write(f"{prog}: {argument}: {message}\n")
    raise SystemExit(2)


def iso_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO date (YYYY-MM-DD)") from exc


def add_window_arguments(p: argparse.ArgumentParser) -> None:
    """--data-dir, --tickers, --start, --end, --warmup-days and the costs."""
    p.add_argument("--data-dir", type=Path, required=True, help="folder of SYMBOL.csv files")
    p.add_argument("--tickers", required=True, help="AAPL or AAPL,MSFT")
    p.add_argument("--start", type=iso_date, required=True)
    p.add_argument("--end", type=iso_date, required=True)
    p.add_argument("--warmup-days", type=int, default=365, help="indicator warm-up before --start")
    p.add_argument("--commission", type=float, default=0.1, help="percent per side (0.1)")
    p.add_argument("--slippage", type=float, default=0.05, help="percent per side (0.05)")
    p.add_argument("--cash", type=float, default=100_000.0)
