from __future__ import annotations

import pytest

from gate.ledger import TrialLedger

pytestmark = pytest.mark.unit


def test_counts_distinct_keys_once() -> None:
    led = TrialLedger()
    assert led.record("sha-a|fast=10", 0.05) is True
    assert led.record("sha-a|fast=10", 0.05) is False  # same code+params under a new name
    assert led.record("sha-a|fast=12", 0.07) is True
    assert led.record("sha-b|fast=10", None) is True  # failed trials count too
    assert led.n_trials == 3


def test_failed_then_measured_fills_value_without_new_trial() -> None:
    led = TrialLedger()
    led.record("k", None)
    led.record("k", 0.1)
    assert led.n_trials == 1 and led.sharpes() == [0.1]
    led.record("k", float("nan"))
    assert led.sharpes() == [0.1]


def test_variance_ddof1_and_floor() -> None:
    led = TrialLedger()
    assert led.trial_sharpe_variance() == led.variance_floor > 0
    led.record("a", 0.1)
    led.record("x", None)
    assert led.trial_sharpe_variance() == led.variance_floor
    led.record("b", 0.3)
    assert led.trial_sharpe_variance() == pytest.approx(0.02)  # var([0.1, 0.3], ddof=1)


def test_json_round_trip(tmp_path) -> None:
    led = TrialLedger(data_key="sha256:abc")
    led.record("a", 0.1)
    led.record("b", None)
    path = tmp_path / "ledger.json"
    led.save(path)
    again = TrialLedger.load(path)
    assert again == led and again.n_trials == 2
    assert TrialLedger.load(tmp_path / "missing.json", data_key="d").n_trials == 0
    assert TrialLedger.model_validate_json(led.model_dump_json()) == led


def test_variance_is_capped_at_the_null_variance_of_a_sharpe_estimate() -> None:
    """Real dispersion (an edge and its mirror image) must not raise the deflation bar
    above what noise alone gives: 1/(T-1) per period for T returns."""
    led = TrialLedger()
    led.record("momentum", 0.12, n_obs=1001)
    led.record("mirror", -0.12, n_obs=1001)
    assert led.empirical_sharpe_variance() == pytest.approx(0.0288)
    assert led.null_sharpe_variance() == pytest.approx(1 / 1000)
    assert led.trial_sharpe_variance() == pytest.approx(1 / 1000)


def test_correlated_trials_keep_their_smaller_empirical_variance() -> None:
    led = TrialLedger()
    for i, sr in enumerate([0.030, 0.031, 0.029, 0.030]):  # near-duplicates of one idea
        led.record(f"k{i}", sr, n_obs=1001)
    assert led.trial_sharpe_variance() == pytest.approx(led.empirical_sharpe_variance())
    assert led.trial_sharpe_variance() < 1 / 1000


def test_null_variance_uses_median_n_obs_and_serves_when_dispersion_is_unmeasurable() -> None:
    led = TrialLedger()
    led.record("failed", None, n_obs=900)  # no Sharpe: its n_obs is not a measurement
    assert led.null_sharpe_variance() is None
    led.record("a", 0.05, n_obs=501)
    assert led.trial_sharpe_variance() == pytest.approx(1 / 500)  # one Sharpe: null variance
    led.record("b", 0.05, n_obs=1001)
    led.record("c", 0.05, n_obs=2001)
    assert led.null_sharpe_variance() == pytest.approx(1 / 1000)
    led.record("failed", 0.02, n_obs=800)  # a later Sharpe fills in the n_obs too
    assert led.n_obs["failed"] == 800 and led.n_trials == 4
