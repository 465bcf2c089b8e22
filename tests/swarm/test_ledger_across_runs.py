"""Trials counted across runs: a second run on the same data is deflated by the first's.

Re-running the same data with another idea (or looser criteria) is one more look at it: its
deflated Sharpe counts the earlier run's trials, the report says how many, and
``--fresh-ledger`` opts out (and says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _options(daily_dir: Path, out: Path, ledger: Path | str, seed: int, **extra) -> dict:
    return {
        "directive": "momentum",
        "tickers": ["AAPL", "MSFT"],
        "data_dir": daily_dir,
        "start": "2014-01-01",
        "end": "2019-12-31",
        "offline": True,
        "quiet": True,
        "memory_dir": "off",
        "ledger_dir": ledger,
        "max_iterations": 1,
        "variants": 3,
        "no_screen": True,
        # Not what is counted: the research's tweets and headlines, and the figures.
        "alt_data": "off",
        "no_figures": True,
        "seed": seed,
        "out": out,
        **extra,
    }


def test_a_second_run_counts_the_firsts_trials_and_fresh_ledger_opts_out(tmp_path, daily_dir):
    from swarm import develop

    ledger = tmp_path / "ledgers"
    # Another idea on the same data first: its trials are other looks at these bars.
    first = develop(
        **_options(daily_dir, tmp_path / "a", ledger, seed=1, directive="mean reversion")
    )
    assert first.verdict.ledger == "counted" and first.verdict.earlier_runs == 0
    assert first.verdict.n_trials_cumulative == first.n_trials
    (stored,) = ledger.glob("*.json")
    entry = json.loads(stored.read_text())["runs"]
    assert [r["run_id"] for r in entry] == [first.run_id]
    assert entry[0]["n_trials"] == first.n_trials

    second = develop(**_options(daily_dir, tmp_path / "b", ledger, seed=2))
    v = second.verdict
    assert v.ledger == "counted" and v.earlier_runs == 1
    assert v.n_trials_cumulative is not None and v.n_trials_cumulative > second.n_trials
    earlier = json.loads((second.run_dir / "earlier_trials.json").read_text())
    assert earlier["runs"] == [first.run_id]
    report = (second.run_dir / "report.md").read_text()
    assert (
        f"Earlier runs on this data: 1; trials with this run's: {v.n_trials_cumulative}" in report
    )
    assert "this run's and 1 earlier run(s)' on this data" in report

    # The same run without the earlier one: the same trials, a higher deflated Sharpe.
    fresh = develop(**_options(daily_dir, tmp_path / "c", ledger, seed=2, fresh_ledger=True))
    f = fresh.verdict
    assert f.ledger == "fresh" and f.earlier_runs == 0 and f.n_trials == v.n_trials
    assert not (fresh.run_dir / "earlier_trials.json").exists()
    assert "**not counted** (`--fresh-ledger`)" in (fresh.run_dir / "report.md").read_text()
    assert f.best_dsr_all_trials is not None and v.best_dsr_all_trials is not None
    assert v.best_dsr_all_trials < f.best_dsr_all_trials
    # Both were recorded: the runs after them count three.
    assert len(json.loads(stored.read_text())["runs"]) == 3


def test_ledger_dir_off_neither_reads_nor_records(tmp_path, daily_dir, monkeypatch):
    from swarm import develop

    monkeypatch.setattr("experiments.dataset_ledger.default_ledger_dir", lambda: tmp_path / "d")
    done = develop(**_options(daily_dir, tmp_path / "a", "off", seed=1))
    assert done.verdict.ledger == "off" and done.verdict.n_trials_cumulative is None
    assert not (tmp_path / "d").exists()
    assert "not read (`--ledger-dir off`)" in (done.run_dir / "report.md").read_text()


def test_a_corrupt_ledger_file_exits_2_naming_it(tmp_path, daily_dir):
    import subprocess
    import sys

    ledger = tmp_path / "ledgers"
    argv = [
        *(sys.executable, "-m", "swarm.develop", "--directive", "momentum"),
        *("--tickers", "AAPL", "--data-dir", str(daily_dir), "--offline"),
        *("--start", "2015-01-01", "--end", "2016-12-31", "--memory-dir", "off"),
        *("--max-iterations", "1", "--variants", "1", "--no-screen", "--quiet"),
        *("--alt-data", "off", "--no-figures"),
        *("--ledger-dir", str(ledger), "--out", str(tmp_path / "runs")),
    ]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    (stored,) = ledger.glob("*.json")
    stored.write_text("{torn")
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2, again.stderr[-2000:]
    assert "Traceback" not in again.stderr
    assert str(stored) in again.stderr and "--fresh-ledger" in again.stderr
    assert len(list((tmp_path / "runs").iterdir())) == 1  # no half run was started
