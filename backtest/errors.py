"""Errors of the backtest layer.

``DataError`` messages are shown to users as-is: one line that names the
argument (``--tickers``, ``--data-dir``, ``--start/--end``), says what was wrong
and what to do about it.
"""

from __future__ import annotations


class BacktestError(Exception):
    """Root of every error the backtest layer raises on purpose."""


class DataError(BacktestError):
    """A user-facing market-data problem (missing file, bad CSV, empty range...)."""

    def __init__(self, message: str) -> None:
        # Collapse to one line: messages end up in CLI output and JSONL records.
        super().__init__(" ".join(str(message).split()))


class MissingSymbolError(DataError):
    """A symbol has no file in the data folder; ``available`` lists what is there."""

    def __init__(self, message: str, *, symbol: str, available: list[str], short: str) -> None:
        super().__init__(message)
        self.symbol = symbol
        self.available = available
        self.short = short  # compact form for "what was tried" summaries
