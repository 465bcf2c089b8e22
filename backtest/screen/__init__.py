"""The vectorised screen: a catalogue spec's Backtrader trades, reproduced in numpy and numba.

The public face of the screen wing; code outside it imports from here only. The single-symbol
screen and the CLI (``python -m backtest.screen``) are ``backtest.screen.screening``; it is
built from the indicators (``backtest.screen.indicators``), the conditions
(``backtest.screen.blocks``), the fill loop (``backtest.screen.fills``) and the books' equity
(``backtest.screen.equity``). ``backtest.screen.portfolio`` screens a portfolio-scope spec;
``backtest.screen.sweep`` is TUNE through the screen (rank many parameter sets, confirm the
best in Backtrader).
"""

from backtest.screen.blocks import Unsupported, supported_blocks
from backtest.screen.portfolio import PortfolioWindow
from backtest.screen.screening import (
    ScreenResult,
    ScreenStatus,
    Window,
    books_result,
    evaluate,
    screen,
    screen_portfolio,
)
from backtest.screen.sweep import (
    ScreenedSet,
    Sweep,
    batch_files,
    combine,
    portfolio_windows_for,
    read_batch,
    screen_sets,
    supported,
    supported_portfolio,
    windows_for,
    write_batch,
)
from backtest.screen.tpe import tpe_sweep

__all__ = [
    "PortfolioWindow",
    "ScreenResult",
    "ScreenStatus",
    "ScreenedSet",
    "Sweep",
    "Unsupported",
    "Window",
    "batch_files",
    "books_result",
    "combine",
    "evaluate",
    "portfolio_windows_for",
    "read_batch",
    "screen",
    "screen_portfolio",
    "screen_sets",
    "supported",
    "supported_blocks",
    "supported_portfolio",
    "tpe_sweep",
    "windows_for",
    "write_batch",
]
