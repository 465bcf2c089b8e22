"""A job's wall limit grows with its symbol-bars: a wide universe's honest job is not cut."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtest.job_timeout import BASE_TIMEOUT_S, SYMBOL_BARS_PER_BASE, scaled_timeout

pytestmark = pytest.mark.unit


def _bars(n: int) -> pd.DataFrame:
    idx = pd.bdate_range("2010-01-01", periods=n)
    return pd.DataFrame({c: np.ones(n) for c in ("open", "high", "low", "close", "volume")}, idx)


def test_a_symbol_or_a_usual_universe_keeps_the_base_limit() -> None:
    assert scaled_timeout(_bars(2_520)) == BASE_TIMEOUT_S
    assert scaled_timeout({f"S{i}": _bars(2_520) for i in range(12)}) == BASE_TIMEOUT_S


def test_a_wide_universe_gets_time_in_proportion_to_its_symbol_bars() -> None:
    wide = {f"S{i}": _bars(2_520) for i in range(500)}
    expected = BASE_TIMEOUT_S * 500 * 2_520 / SYMBOL_BARS_PER_BASE
    assert scaled_timeout(wide) == pytest.approx(expected)
    assert scaled_timeout(wide) > 204.0  # Backtrader's measured time under load
    assert scaled_timeout(wide, base_s=10.0) == pytest.approx(expected / 12.0)
