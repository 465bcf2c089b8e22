"""The trial ledger across runs: every run on one dataset, so a re-run is deflated by them.

Re-running the same data with looser criteria, a new seed or another directive is one more
look at it. Each finished run appends what it tried (its trial keys and effective count) to
its dataset's file; the next run on the same data starts from them (``EarlierTrials``) and
its deflated Sharpe and alpha count them (``gate.ledger``). ``--fresh-ledger`` opts a run out
of counting them (the report says so); it is still recorded for the runs after it.
``--ledger-dir off`` neither reads nor records (the calibration's runs, whose synthetic data
nobody re-runs).

"The same data" (``dataset_key``): the same bars of the same symbols (each symbol's bars
sha256, as the manifest records it, whatever their source), timeframe and prices. A run on an
overlapping window or a subset of the symbols is another dataset: not counted (a documented
limit). Files live under the user data dir (``platformdirs.user_data_dir("swarm-lab")``,
not the cache dir: clearing a cache must not reset a count), one JSON file per dataset,
written under an exclusive lock and replaced atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from gate.ledger import EarlierTrials, TrialLedger

OFF = "off"


class LedgerFileError(ValueError):
    """A dataset's ledger file that cannot be read: the message names it and the fix."""


class RecordedRun(BaseModel):
    """One finished run on a dataset."""

    run_id: str
    finished_at: str
    verdict: str
    n_trials: int = Field(ge=0)
    n_effective: int = Field(ge=0)
    trial_keys: list[str] = Field(default_factory=list)


class DatasetLedger(BaseModel):
    """Every finished run on one dataset, oldest first."""

    data_key: str
    describe: str = ""  # the symbols, window, timeframe and prices, for a reader
    runs: list[RecordedRun] = Field(default_factory=list)


def default_ledger_dir() -> Path:
    """Where the datasets' ledgers live by default (the user data dir)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("swarm-lab")) / "ledgers"


def dataset_key(shas: Mapping[str, str], *, timeframe: str, prices: str) -> str:
    """What "the same data" means: each symbol's bars (their content sha256, whatever the
    source; the window is in the bars), the timeframe and the prices."""
    blob = json.dumps(
        {"symbols": {s: shas[s] for s in sorted(shas)}, "timeframe": timeframe, "prices": prices},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def run_data_key(config: Any, data: Mapping[str, Any]) -> str:
    """A run's dataset: its ``data`` (symbol -> loaded bars with their ``sha256``) under its
    config's timeframe and prices."""
    shas = {symbol: loaded.sha256 for symbol, loaded in data.items()}
    return dataset_key(shas, timeframe=config.timeframe, prices=config.prices)


def ledger_folder(option: str | None) -> Path | None:
    """The ledgers' folder of a run's ``ledger_dir`` option: None when it is "off"."""
    if option == OFF:
        return None
    return Path(option) if option else default_ledger_dir()


def ledger_file(folder: Path, key: str) -> Path:
    """The file of the dataset ``key`` in ``folder``."""
    return Path(folder) / f"{key[:32]}.json"


def read_ledger(path: Path, key: str) -> DatasetLedger:
    """The dataset's ledger (empty when no run recorded one yet)."""
    if not path.exists():
        return DatasetLedger(data_key=key)
    try:
        ledger = DatasetLedger.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError) as exc:
        raise LedgerFileError(
            f"the trial ledger {path} is unreadable ({str(exc).splitlines()[0]}); move it "
            "aside to start this dataset's count again, or pass --fresh-ledger"
        ) from None
    if ledger.data_key != key:
        raise LedgerFileError(
            f"the trial ledger {path} belongs to another dataset; move it aside, or pass "
            "--fresh-ledger"
        )
    return ledger


def earlier_trials(folder: Path, key: str, *, exclude: str = "") -> EarlierTrials:
    """What the runs recorded on dataset ``key`` tried (``exclude``: this run's own id)."""
    ledger = read_ledger(ledger_file(folder, key), key)
    runs = [r for r in ledger.runs if r.run_id != exclude]
    keys = dict.fromkeys(k for r in runs for k in r.trial_keys)
    return EarlierTrials(
        data_key=key,
        runs=[r.run_id for r in runs],
        trial_keys=list(keys),
        n_effective=sum(min(r.n_effective, r.n_trials) for r in runs),
    )


def recorded_run(run_id: str, verdict: str, ledger: TrialLedger) -> RecordedRun:
    """This run as the dataset's ledger keeps it: its own trials, not the earlier ones."""
    return RecordedRun(
        run_id=run_id,
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        verdict=verdict,
        n_trials=ledger.n_trials,
        n_effective=ledger.n_effective,
        trial_keys=sorted(ledger.trials),
    )


def record(folder: Path, key: str, run: RecordedRun, *, describe: str = "") -> Path:
    """Add ``run`` to dataset ``key``'s ledger (replacing an entry of the same run: a resumed
    run's finish is recorded once). Locked, then replaced atomically."""
    path = ledger_file(folder, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        ledger = read_ledger(path, key)
        runs = [r for r in ledger.runs if r.run_id != run.run_id] + [run]
        updated = DatasetLedger(data_key=key, describe=describe or ledger.describe, runs=runs)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(updated.model_dump_json(indent=1), encoding="utf-8")
        os.replace(tmp, path)
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path``: two runs finishing together both count."""
    with open(path.with_suffix(".lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
