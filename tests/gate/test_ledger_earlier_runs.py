"""The trial ledger across runs: earlier runs on the same data count in the deflation."""

from __future__ import annotations

import pytest

from gate.ledger import EarlierTrials, EffectiveTrials, TrialLedger

pytestmark = pytest.mark.unit


def _ledger(keys: list[str], *, effective: int | None = None) -> TrialLedger:
    ledger = TrialLedger()
    for i, key in enumerate(keys):
        ledger.record(key, 0.01 * i, 500)
    if effective is not None:
        ledger.effective = EffectiveTrials(n=effective, threshold=0.2)
    return ledger


def test_without_earlier_runs_the_counts_are_the_runs_own() -> None:
    ledger = _ledger(["a", "b", "c"], effective=2)
    assert ledger.cumulative_trials() == (3, 2)
    assert ledger.deflation_trials() == 3
    ledger.deflate_effective = True
    assert ledger.deflation_trials() == 2


def test_earlier_keys_count_once_and_their_clusters_at_most_their_new_keys() -> None:
    earlier = EarlierTrials(
        data_key="k", runs=["r1", "r2"], trial_keys=["a", "x", "y"], n_effective=5
    )
    ledger = _ledger(["a", "b", "c"], effective=2)
    ledger.earlier = earlier
    # "a" was tried before: it counts once; x and y are new to this run.
    assert earlier.new_to(ledger.trials) == (2, 2)
    assert ledger.cumulative_trials() == (5, 4)
    assert ledger.deflation_trials() == 5
    ledger.deflate_effective = True
    assert ledger.deflation_trials() == 4
    # The run's own counts stay its own: the report shows both.
    assert (ledger.n_trials, ledger.n_effective) == (3, 2)


def test_earlier_effective_count_is_capped_by_what_this_run_did_not_try_again() -> None:
    earlier = EarlierTrials(data_key="k", runs=["r1"], trial_keys=["a", "b"], n_effective=1)
    assert earlier.new_to({"a", "b"}) == (0, 0)
    assert earlier.new_to(set()) == (2, 1)


def test_more_earlier_trials_lower_the_deflated_sharpe() -> None:
    from backtest.contracts import Metrics
    from gate.evaluate import deflated_sharpe_of

    m = Metrics.model_construct(sharpe_per_period=0.08, n_obs=750, skew=0.0, kurtosis=3.0)
    own = _ledger([f"k{i}" for i in range(10)])
    alone = deflated_sharpe_of(m, own)
    own.earlier = EarlierTrials(data_key="k", runs=["r"], trial_keys=[f"e{i}" for i in range(500)])
    counted = deflated_sharpe_of(m, own)
    assert alone is not None and counted is not None and counted < alone


def test_a_ledger_with_earlier_trials_round_trips_through_json() -> None:
    ledger = _ledger(["a"])
    ledger.earlier = EarlierTrials(data_key="k", runs=["r"], trial_keys=["x"], n_effective=1)
    again = TrialLedger.model_validate_json(ledger.model_dump_json())
    assert again.earlier == ledger.earlier and again.deflation_trials() == 2
