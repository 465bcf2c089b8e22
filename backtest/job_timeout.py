"""A job's wall-clock limit, grown with the bars it feeds.

Backtrader's cost is linear in symbol-bars (each feed is advanced, and each indicator
computed, bar by bar): measured on the calibration's generator, a cross-sectional portfolio
of 500 symbols x 10 years (1.26 M symbol-bars) took 108 s on an idle core and 204 s on a
loaded one (``benchmarks/wide_universe.py``). A fixed 120 s limit would time out a wide
universe's honest job. So a job gets the base limit up to ``SYMBOL_BARS_PER_BASE`` symbol-bars
and proportionally more beyond: every single-symbol job and the lab's usual universes keep
120 s, a 500-symbol, 10-year portfolio job gets ~300 s.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

BASE_TIMEOUT_S = 120.0
SYMBOL_BARS_PER_BASE = 500_000


def scaled_timeout(
    bars: pd.DataFrame | Mapping[str, pd.DataFrame], base_s: float = BASE_TIMEOUT_S
) -> float:
    """The wall limit of a job fed ``bars`` (one frame, or a portfolio's frames)."""
    frames = list(bars.values()) if isinstance(bars, Mapping) else [bars]
    symbol_bars = sum(len(f) for f in frames)
    return base_s * max(1.0, symbol_bars / SYMBOL_BARS_PER_BASE)
