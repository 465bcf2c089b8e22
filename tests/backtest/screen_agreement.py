"""What the screens' agreement tests (symbol and portfolio) hold a bankrupt run to."""

from __future__ import annotations

from typing import Any

from backtest.contracts import BacktestResult
from backtest.screen import ScreenStatus


def assert_bankrupt_as_the_books(res: Any, books: BacktestResult) -> None:
    """The books ended the run at zero: so must the screen, with what a sweep ranks on (the
    returns, their dates, the Sharpe) equal to the books' to the bit. Its trades and turnover
    stay the run's (``books_result``: a bankrupt set only has to rank last)."""
    assert res.status == ScreenStatus.OK and res.result.status == "bankrupt", res
    assert res.result.returns == books.returns
    assert res.result.return_dates == books.return_dates
    assert res.metrics.sharpe == books.metrics.sharpe
