"""The screen's fast exact kernels give the very doubles backtrader computes
(``backtest/screen/indicators.py``).

- ``window_fsum_mean`` rolls a double-double and proves each window's rounding, or sums the
  window exactly: it must equal ``math.fsum(window) / period`` on prices, and on values built to
  defeat it (rounding ties, sums that lose bits, NaN and infinities).
- ``power(x, 2.0)`` and StandardDeviation's ``pow(v, 0.5)`` skip the C library's ``pow`` when
  ``x * x`` / ``sqrt(v)`` is clear of a rounding tie: they must equal CPython's ``x ** y``,
  including where ``x * x`` differs from it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import DAILY_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from backtest.screen import indicators as ind
from backtest.screen.indicators import power, stddev, window_fsum_mean


def _fsum_means(src: np.ndarray, period: int, start: int) -> np.ndarray:
    out = np.full(src.size, np.nan)
    values = src.tolist()
    for i in range(start + period - 1, src.size):
        try:
            out[i] = math.fsum(values[i - period + 1 : i + 1]) / period
        except ValueError:  # fsum(inf - inf): the kernel's NaN
            out[i] = math.nan
    return out


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(((got == want) | (np.isnan(got) & np.isnan(want))).all())


def _pow(x: float, y: float) -> float:
    try:
        return x**y
    except OverflowError:
        return math.inf


def _corpus_columns() -> list[np.ndarray]:
    import pandas as pd

    files = sorted(DAILY_DIR.glob("*.csv"))[:12]
    if not files:
        pytest.skip(f"no corpus at {DAILY_DIR}")
    out = []
    for path in files:
        frame = pd.read_csv(path)
        for column in ("close", "volume"):
            values = frame[column].to_numpy(np.float64)
            out.append(values[np.isfinite(values)])
    return out


def _adversarial(rng: np.random.Generator, kind: int, n: int) -> np.ndarray:
    if kind == 0:  # magnitudes 40 decades apart: the double-double loses bits
        return rng.normal(size=n) * 10.0 ** rng.integers(-20, 20, size=n)
    if kind == 1:  # few-bit values far apart: exact rounding ties everywhere
        return rng.integers(-8, 8, size=n) * 2.0 ** rng.integers(-60, 60, size=n)
    if kind == 2:  # cents
        return np.round(rng.uniform(1, 500, size=n), 2)
    if kind == 3:  # cancellation around 2**53
        return rng.choice([1e16, 1.0, -1e16, 0.5, 3.0, 2.0**-60, 2.0**53], size=n)
    if kind == 4:  # not finite
        x = rng.normal(size=n)
        x[rng.integers(0, n, size=3)] = rng.choice([np.nan, np.inf, -np.inf], size=3)
        return x
    return rng.normal(size=n) * 1e305  # near overflow


@pytest.mark.unit
def test_rolled_average_is_fsum_on_prices_and_volumes() -> None:
    for values in _corpus_columns():
        for period in (1, 2, 14, 20, 200):
            assert _same(window_fsum_mean(values, period, 0), _fsum_means(values, period, 0))
        squares = power(values, 2.0)
        assert _same(window_fsum_mean(squares, 20, 0), _fsum_means(squares, 20, 0))


@pytest.mark.unit
@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.integers(0, 5),
    n=st.integers(1, 300),
    period=st.integers(1, 40),
    start=st.integers(0, 3),
)
def test_rolled_average_is_fsum_on_hostile_values(
    seed: int, kind: int, n: int, period: int, start: int
) -> None:
    src = np.ascontiguousarray(_adversarial(np.random.default_rng(seed), kind, n))
    assert _same(window_fsum_mean(src, period, start), _fsum_means(src, period, start))


@pytest.mark.unit
def test_squares_and_roots_are_the_c_librarys_pow() -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate(
        [
            *_corpus_columns(),
            rng.uniform(0, 1000, 100_000),
            rng.normal(0, 0.02, 100_000),
            np.exp(rng.uniform(-300, 300, 50_000)),
            [0.0, -0.0, 1.0, 2.0, 4.0, 0.5, 3.0, 2.0**0.5, 1e-300, 1e300, np.inf, -np.inf, np.nan],
            np.exp(rng.uniform(-400, -300, 20_000)),
        ]
    )
    x = np.concatenate([x, -x, np.nextafter(x, 0.0)])
    want = np.array([_pow(v, 2.0) for v in x.tolist()])
    with np.errstate(over="ignore"):  # the shortcut must fall back where x * x is not pow
        assert (x * x != want).sum() > 10
    assert _same(power(x, 2.0), want)
    v = np.abs(x)
    assert (np.sqrt(v) != [_pow(t, 0.5) for t in v.tolist()]).sum() > 10
    assert _same(power(v, 0.5), np.array([_pow(t, 0.5) for t in v.tolist()]))


@pytest.mark.unit
def test_stddev_is_backtraders_formula() -> None:
    """StandardDeviation(safepow): ``pow(abs(Average(pow(x, 2)) - pow(Average(x), 2)), 0.5)``."""
    for values in _corpus_columns():
        got = stddev(values, 20)
        squares = [_pow(v, 2.0) for v in values.tolist()]
        for i in range(19, values.size):
            mean = math.fsum(values[i - 19 : i + 1].tolist()) / 20
            meansq = math.fsum(squares[i - 19 : i + 1]) / 20
            assert got[i] == _pow(abs(meansq - _pow(mean, 2.0)), 0.5)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("libc", "bounded"),
    [
        (("glibc", "2.36"), True),
        (("glibc", "2.28"), True),
        (("glibc", "2.27"), False),
        (("", ""), False),
        (("musl", "1.2"), False),
        (("glibc", "x"), False),
    ],
)
def test_the_shortcut_is_taken_only_where_pow_is_documented_within_bound(
    monkeypatch, libc, bounded
) -> None:
    import platform

    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: libc)
    assert ind._pow_is_bounded() is bounded


@pytest.mark.unit
def test_without_the_shortcut_every_square_and_root_is_the_c_librarys_pow() -> None:
    """Off glibc >= 2.28 the kernels call ``pow`` every time: still CPython's ``x ** y``."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0, 1000, 20_000), *_corpus_columns()[:2]])
    want = np.array([_pow(v, 2.0) for v in x.tolist()])
    assert _same(ind._squares_from(x, 0, 2.0, False), want)
    assert _same(ind._roots_from(x, 0, 0.5, False), np.array([_pow(t, 0.5) for t in x]))
    mean, meansq = ind.sma(x, 20), ind.sma(want, 20)
    assert _same(
        ind._std_from(mean, meansq, 19, 2.0, 0.5, False),
        ind._std_from(mean, meansq, 19, 2.0, 0.5, True),
    )


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1.0, 2.0, 2.0, 3.0, float("nan")]),
            st.sampled_from([1.0, 2.0, 2.0, 3.0, float("nan")]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 45),
)
def test_the_stacked_crossings_are_the_crossover_of_each_pair(pairs, first):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    values = np.stack([a, b, a[::-1].copy()])
    a_at, b_at = np.array([0, 1, 2, 0]), np.array([1, 0, 1, 2])
    firsts = np.array([first, max(first - 3, 0), 0, first + 1])
    up, down = ind.crossings(values, a_at, b_at, firsts)
    for r in range(a_at.size):
        cross = _crossover(values[a_at[r]], values[b_at[r]], int(firsts[r]))
        assert np.array_equal(up[r], cross > 0.0) and np.array_equal(down[r], cross < 0.0)


def _crossover(a: np.ndarray, b: np.ndarray, first: int) -> np.ndarray:
    """Backtrader's CrossOver in plain Python: +1 / -1 / 0 from index ``first + 1``, with
    NonZeroDifference's memory of the last non-zero difference (NaN before)."""
    out = np.full(a.size, np.nan)
    if first >= a.size:
        return out
    nzd = a[first] - b[first]
    for i in range(first + 1, a.size):
        up = 1.0 if (nzd < 0.0 and a[i] > b[i]) else 0.0
        down = 1.0 if (nzd > 0.0 and a[i] < b[i]) else 0.0
        out[i] = up - down
        d = a[i] - b[i]
        if d:
            nzd = d
    return out
