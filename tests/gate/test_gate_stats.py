from __future__ import annotations

import math

import numpy as np
import pytest

from gate.stats import (
    deflated_sharpe_ratio,
    expected_max_sharpe,
    min_backtest_length,
    min_track_record_length,
    pbo_cscv,
    probabilistic_sharpe_ratio,
)

pytestmark = pytest.mark.unit


def test_expected_max_sharpe_published() -> None:
    assert expected_max_sharpe(100) == pytest.approx(2.5306028932016846, abs=1e-6)


def test_deflated_sharpe_published() -> None:
    dsr = deflated_sharpe_ratio(2.5 / math.sqrt(250), 0.5 / 250, 100, 1250, -3.0, 10.0)
    assert dsr == pytest.approx(0.90039683444939, abs=1e-6)


def test_probabilistic_sharpe_published() -> None:
    psr = probabilistic_sharpe_ratio(1.585 / math.sqrt(12), 24, -2.448, 10.164, target_sharpe=0.0)
    assert psr == pytest.approx(0.91323430688486, abs=1e-6)


def test_min_track_record_length_published() -> None:
    n = min_track_record_length(2 / math.sqrt(250), 1 / math.sqrt(250), 0.0, 3.0, confidence=0.95)
    assert n == pytest.approx(682.79695, abs=1e-5)
    assert n / 250 == pytest.approx(2.7311878, abs=1e-6)


def test_min_backtest_length_published() -> None:
    assert min_backtest_length(45, 1.0) == pytest.approx(4.99808700, abs=1e-6)


def test_single_trial_is_not_deflated() -> None:
    assert expected_max_sharpe(1) == 0.0
    sr = 0.1
    assert deflated_sharpe_ratio(sr, 0.01, 1, 500, 0.0, 3.0) == pytest.approx(
        probabilistic_sharpe_ratio(sr, 500, 0.0, 3.0)
    )


def test_more_trials_deflate_more() -> None:
    values = [deflated_sharpe_ratio(0.1, 0.002, n, 1000, 0.0, 3.0) for n in (1, 10, 100, 1000)]
    assert values == sorted(values, reverse=True)


def test_min_track_record_infinite_when_no_edge_over_target() -> None:
    assert min_track_record_length(0.05, 0.05, 0.0, 3.0) == math.inf


@pytest.mark.parametrize(
    "bad",
    [
        lambda: expected_max_sharpe(0),
        lambda: probabilistic_sharpe_ratio(0.1, 1, 0, 3),
        lambda: min_backtest_length(10, 0.0),
    ],
)
def test_invalid_inputs_raise(bad) -> None:
    with pytest.raises(ValueError):
        bad()


def test_pbo_of_noise_is_near_half() -> None:
    pbos = [pbo_cscv(np.random.default_rng(s).normal(0, 0.01, (800, 10)), 16) for s in range(6)]
    assert 0.3 < float(np.mean(pbos)) < 0.7


def test_pbo_with_dominant_strategy_is_low() -> None:
    rng = np.random.default_rng(1)
    m = rng.normal(0, 0.01, (800, 10))
    m[:, 4] += 0.004  # one strategy with a real edge (daily SR ~0.4)
    assert pbo_cscv(m, 16) < 0.1


def test_pbo_validates_shape() -> None:
    with pytest.raises(ValueError):
        pbo_cscv(np.zeros((10, 10)), 16)
    with pytest.raises(ValueError):
        pbo_cscv(np.zeros((100, 10)), 5)
