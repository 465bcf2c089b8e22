"""The dataset's ledger file: every finished run on the same data, read by the next run."""

from __future__ import annotations

from datetime import date, timedelta
from types import SimpleNamespace

import pytest

from experiments.dataset_ledger import (
    DatasetLedger,
    LedgerFileError,
    dataset_key,
    earlier_trials,
    ledger_file,
    ledger_folder,
    record,
    recorded_run,
    run_data_key,
)
from gate.ledger import EffectiveTrials, TrialLedger

pytestmark = pytest.mark.unit


def _run(keys: list[str], effective: int) -> TrialLedger:
    ledger = TrialLedger()
    for key in keys:
        ledger.record(key, 0.01, 300)
    ledger.effective = EffectiveTrials(n=effective, threshold=0.2)
    return ledger


def test_the_key_is_the_bars_timeframe_and_prices_not_the_order_or_the_window() -> None:
    a = dataset_key({"AAPL": "1", "MSFT": "2"}, timeframe="1d", prices="raw")
    assert a == dataset_key({"MSFT": "2", "AAPL": "1"}, timeframe="1d", prices="raw")
    assert a != dataset_key({"AAPL": "1", "MSFT": "3"}, timeframe="1d", prices="raw")
    assert a != dataset_key({"AAPL": "1"}, timeframe="1d", prices="raw")
    assert a != dataset_key({"AAPL": "1", "MSFT": "2"}, timeframe="1h", prices="raw")
    assert a != dataset_key({"AAPL": "1", "MSFT": "2"}, timeframe="1d", prices="adjusted")
    config = SimpleNamespace(timeframe="1d", prices="raw", start=date(2015, 1, 1))
    data = {"AAPL": SimpleNamespace(sha256="1"), "MSFT": SimpleNamespace(sha256="2")}
    assert run_data_key(config, data) == a
    config.start += timedelta(days=3)  # the window is in the bars' hashes, not in the key
    assert run_data_key(config, data) == a


def test_runs_recorded_are_the_next_runs_earlier_trials(tmp_path) -> None:
    key = dataset_key({"AAPL": "1"}, timeframe="1d", prices="raw")
    assert earlier_trials(tmp_path, key).runs == []
    record(tmp_path, key, recorded_run("run-1", "ABANDON", _run(["a", "b", "c"], 2)))
    record(tmp_path, key, recorded_run("run-2", "SUCCESS", _run(["c", "d"], 5)))
    seen = earlier_trials(tmp_path, key)
    assert seen.runs == ["run-1", "run-2"]
    assert seen.trial_keys == ["a", "b", "c", "d"]
    assert seen.n_effective == 2 + 2  # each run's clusters capped by its own trials
    # A run never counts itself (a resumed run reads the ledger again).
    assert earlier_trials(tmp_path, key, exclude="run-2").runs == ["run-1"]


def test_a_run_recorded_twice_is_one_entry(tmp_path) -> None:
    key = "k" * 64
    record(tmp_path, key, recorded_run("run-1", "ABANDON", _run(["a"], 1)))
    record(tmp_path, key, recorded_run("run-1", "ABANDON", _run(["a", "b"], 1)))
    ledger = DatasetLedger.model_validate_json(ledger_file(tmp_path, key).read_text())
    assert [r.run_id for r in ledger.runs] == ["run-1"] and ledger.runs[0].n_trials == 2


def test_an_unreadable_or_foreign_ledger_names_the_file_and_the_fix(tmp_path) -> None:
    key = "a" * 64
    path = ledger_file(tmp_path, key)
    path.write_text("{not json")
    with pytest.raises(LedgerFileError, match=r"unreadable.*--fresh-ledger") as info:
        earlier_trials(tmp_path, key)
    assert str(path) in str(info.value)
    path.write_text(DatasetLedger(data_key="a" * 32 + "b" * 32).model_dump_json())
    with pytest.raises(LedgerFileError, match="another dataset"):
        earlier_trials(tmp_path, key)


def test_the_folder_option(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("experiments.dataset_ledger.default_ledger_dir", lambda: tmp_path / "d")
    assert ledger_folder("off") is None
    assert ledger_folder(None) == tmp_path / "d"
    assert ledger_folder(str(tmp_path / "x")) == tmp_path / "x"
