"""Which pair of the universe to trade as a spread: Engle-Granger on in-sample prices.

Pure and trusted-side: the strategy node hands it the in-sample closes (never the holdout), it
tests every pair with statsmodels' ``coint`` (Engle-Granger, constant trend) on log prices and
keeps the one with the smallest p-value, with its hedge ratio from the OLS of the first on the
second. The pair and the ratio then travel into the generated code as plain parameters.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

MIN_OBS = 250  # a year of common daily bars before a cointegration test means anything


class PairChoice(NamedTuple):
    a: int  # position of the first leg in the universe (``self.datas``)
    b: int
    hedge_ratio: float  # log(a) ~ const + hedge_ratio * log(b)
    pvalue: float  # Engle-Granger p-value of the pair
    names: tuple[str, str]


def best_pair(closes: dict[str, pd.Series]) -> PairChoice | None:
    """The most cointegrated pair of ``closes`` (symbol -> close, universe order); None with
    fewer than 2 symbols or too little common history."""
    from statsmodels.tsa.stattools import coint

    names = list(closes)
    if len(names) < 2:
        return None
    frame = pd.concat([closes[n].rename(n) for n in names], axis=1, join="inner").dropna()
    if len(frame) < MIN_OBS or (frame <= 0).to_numpy().any():
        return None
    logs = np.log(frame.to_numpy(dtype=float))
    best: PairChoice | None = None
    for i, j in itertools.combinations(range(len(names)), 2):
        _, pvalue, _ = coint(logs[:, i], logs[:, j])
        if not math.isfinite(pvalue):
            continue
        if best is None or pvalue < best.pvalue:
            slope = float(np.polyfit(logs[:, j], logs[:, i], 1)[0])
            best = PairChoice(i, j, slope, float(pvalue), (names[i], names[j]))
    return best
