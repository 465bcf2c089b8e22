"""The trial ledger: every variant x parameter set ever backtested on one dataset.

Deflating a Sharpe is only honest if the trial count includes every attempt, across
iterations and routes. Trials are keyed by content (e.g. code hash + parameters),
not by name, so renaming a strategy cannot reset the count.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field


class TrialLedger(BaseModel):
    data_key: str = ""  # what "the same data" means (e.g. the dataset sha256s)
    trials: dict[str, float | None] = Field(default_factory=dict)  # key -> per-period Sharpe
    variance_floor: float = Field(1e-6, gt=0)  # per-period Sharpe variance when < 2 Sharpes

    def record(self, trial_key: str, sharpe_per_period: float | None) -> bool:
        """Count ``trial_key`` once; returns True when it is a new trial.

        A failed trial (Sharpe None) still counts; a later Sharpe for the same key
        fills in the missing value but never adds a trial.
        """
        value = None
        if sharpe_per_period is not None and math.isfinite(sharpe_per_period):
            value = float(sharpe_per_period)
        if trial_key in self.trials:
            if self.trials[trial_key] is None and value is not None:
                self.trials[trial_key] = value
            return False
        self.trials[trial_key] = value
        return True

    @property
    def n_trials(self) -> int:
        return len(self.trials)

    def sharpes(self) -> list[float]:
        return [v for v in self.trials.values() if v is not None]

    def trial_sharpe_variance(self) -> float:
        """Variance (ddof=1) of the recorded per-period Sharpes, floored above 0."""
        values = self.sharpes()
        if len(values) < 2:
            return self.variance_floor
        return max(float(np.var(values, ddof=1)), self.variance_floor)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, *, data_key: str = "") -> TrialLedger:
        """Load a ledger, or start an empty one when the file does not exist yet."""
        p = Path(path)
        if not p.exists():
            return cls(data_key=data_key)
        return cls.model_validate_json(p.read_text(encoding="utf-8"))
