"""Binomial intervals and the SUCCESS rates of calibration runs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good coverage at small n)."""
    if n <= 0:
        return (0.0, 1.0)
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (conservative) binomial interval."""
    if n <= 0:
        return (0.0, 1.0)
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return (lo, hi)


def rate_summary(records: list[dict[str, Any]], kinds: str | Iterable[str]) -> dict[str, Any]:
    """SUCCESS share of the finished runs of one scenario, or of several pooled."""
    wanted = {kinds} if isinstance(kinds, str) else set(kinds)
    mine = [r for r in records if r["kind"] in wanted]
    done = [r for r in mine if r["verdict"] != "ERROR"]
    k = sum(r["verdict"] == "SUCCESS" for r in done)
    n = len(done)
    return {
        "successes": k,
        "runs": n,
        "errors": len(mine) - n,
        "rate": k / n if n else None,
        "wilson95": wilson_interval(k, n),
        "clopper_pearson95": clopper_pearson_interval(k, n),
    }
