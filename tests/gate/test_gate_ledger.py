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
