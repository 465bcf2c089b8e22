"""The trial ledger: every variant x parameter set ever backtested on one dataset.

Deflating a Sharpe is only honest if the trial count includes every attempt, across
iterations and routes. Trials are keyed by content (e.g. code hash + parameters),
not by name, so renaming a strategy cannot reset the count.

The deflation benchmark is ``sqrt(V) x E[max of N standard normals]``: the Sharpe the
best of the N trials would reach if none had an edge. ``V`` must therefore be the
dispersion of the trials' Sharpe *estimates under that null*. The plug-in of Bailey &
López de Prado, the cross-sectional variance of the trials' Sharpes, is right when every
trial is noise, and it captures correlation between trials (for equicorrelated trials
both the variance and E[max] shrink by 1 - rho). But when some trials carry a real edge,
of either sign (a mean-reversion variant on trending data loses about what the momentum
variant wins), their true differences inflate it, and the bar rises with the very edge
it should detect. Under the null, a Sharpe estimated from T returns has variance
1/(T - 1) per period whatever the return distribution (Lo 2002; Mertens 2002: the skew
and kurtosis terms vanish at SR = 0). So ``trial_sharpe_variance`` is the cross-sectional
variance capped at that null variance: correlation can lower the bar, real dispersion
cannot raise it above what noise alone produces.

The same holds for alpha: each trial's alpha Sharpe (its appraisal ratio per period,
against the run's benchmark) is kept beside its Sharpe, and ``trial_alpha_variance`` is
their dispersion under the same cap, the ``V`` of the deflated alpha.

Effective trials (``gate.effective``): neighbouring parameter sets are not independent
draws, so the run also measures how many clusters of correlated trials it made
(``effective``, set by the gate). With ``deflate_effective`` the DSR's N is that count and its
``V`` the dispersion of the clusters' representative Sharpes, under the same null cap
(``deflation_trials`` / ``deflation_variance``); otherwise the raw count and the trials' own
dispersion, as before. The raw count is always kept: it is what the run tried.

Earlier runs on the same data (``EarlierTrials``, read from the dataset's ledger by
``experiments.dataset_ledger``): re-running the same data with looser criteria is one more
look at it, so the deflation counts their trials too. A key an earlier run tried counts
once; each earlier run's trials add at most its own effective count (its clusters are not
merged with this run's: conservative), and at most the keys this run has not tried. ``V``
stays this run's dispersion (the earlier Sharpes are not kept). ``n_trials`` and
``n_effective`` stay this run's own; ``deflation_trials`` is the cumulative figure.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class EffectiveTrials(BaseModel):
    """The last measured clustering of the run's trials (the series stay in the run folder)."""

    n: int = Field(ge=0)  # clusters, plus trials that left no return series
    n_with_series: int = 0
    threshold: float  # the 1 - correlation cut of the average-linkage tree
    cluster_sharpes: list[float] = Field(default_factory=list)  # representatives', per period


class EarlierTrials(BaseModel):
    """What earlier runs on the same data tried, frozen when this run started."""

    model_config = ConfigDict(frozen=True)

    data_key: str
    runs: list[str] = Field(default_factory=list)  # their run ids, oldest first
    trial_keys: list[str] = Field(default_factory=list)  # every distinct key they tried
    n_effective: int = Field(0, ge=0)  # the sum of their effective counts

    def new_to(self, own: Collection[str]) -> tuple[int, int]:
        """(raw, effective) trials these runs add to a run that tried the keys ``own``: keys
        it did not try again, and at most as many clusters as those keys."""
        raw = sum(1 for key in self.trial_keys if key not in own)
        return raw, min(self.n_effective, raw)


class TrialLedger(BaseModel):
    data_key: str = ""  # what "the same data" means (e.g. the dataset sha256s)
    trials: dict[str, float | None] = Field(default_factory=dict)  # key -> per-period Sharpe
    n_obs: dict[str, int] = Field(default_factory=dict)  # key -> returns behind its Sharpe
    # key -> per-period alpha Sharpe against the benchmark (appraisal ratio per period)
    alpha_trials: dict[str, float | None] = Field(default_factory=dict)
    variance_floor: float = Field(1e-6, gt=0)  # per-period Sharpe variance when < 2 Sharpes
    effective: EffectiveTrials | None = None  # None: not measured (raw count only)
    deflate_effective: bool = False  # the DSR uses the effective count (the run's choice)
    earlier: EarlierTrials | None = None  # earlier runs on the same data (None: not counted)

    def record(
        self,
        trial_key: str,
        sharpe_per_period: float | None,
        n_obs: int | None = None,
        *,
        alpha_sharpe: float | None = None,
    ) -> bool:
        """Count ``trial_key`` once; returns True when it is a new trial.

        A failed trial (Sharpe None) still counts; a later Sharpe for the same key
        fills in the missing value (and its ``n_obs``) but never adds a trial.
        """
        value = _finite(sharpe_per_period)
        alpha = _finite(alpha_sharpe)
        if self.alpha_trials.get(trial_key) is None:  # first value, or filling a missing one
            self.alpha_trials[trial_key] = alpha
        if trial_key in self.trials:
            if self.trials[trial_key] is None and value is not None:
                self.trials[trial_key] = value
                if n_obs is not None and n_obs >= 2:
                    self.n_obs[trial_key] = int(n_obs)
            return False
        self.trials[trial_key] = value
        if value is not None and n_obs is not None and n_obs >= 2:
            self.n_obs[trial_key] = int(n_obs)
        return True

    @property
    def n_trials(self) -> int:
        """The number of trials recorded."""
        return len(self.trials)

    @property
    def n_effective(self) -> int:
        """Clusters of correlated trials (never more than the raw count); the raw count when
        not measured."""
        if self.effective is None:
            return self.n_trials
        return max(1, min(self.effective.n, self.n_trials)) if self.n_trials else 0

    def cumulative_trials(self) -> tuple[int, int]:
        """(raw, effective) trials over this run and the earlier runs on its data."""
        raw, eff = self.earlier.new_to(self.trials) if self.earlier is not None else (0, 0)
        return self.n_trials + raw, self.n_effective + eff

    def deflation_trials(self) -> int:
        """The N of the deflated Sharpe ratio: effective or raw, as the run chose, over this
        run and the earlier runs on its data."""
        raw, eff = self.cumulative_trials()
        return eff if self.deflate_effective else raw

    def deflation_variance(self) -> float:
        """The V of the deflated Sharpe ratio, paired with ``deflation_trials``."""
        if self.deflate_effective and self.effective is not None:
            return self._capped(self.effective.cluster_sharpes)
        return self.trial_sharpe_variance()

    def sharpes(self) -> list[float]:
        """The recorded Sharpes (trials with none left out)."""
        return [v for v in self.trials.values() if v is not None]

    def alpha_sharpes(self) -> list[float]:
        """The recorded alpha Sharpes (trials with none left out)."""
        return [v for v in self.alpha_trials.values() if v is not None]

    def empirical_sharpe_variance(self) -> float:
        """Cross-sectional variance (ddof=1) of the recorded per-period Sharpes, floored above 0."""
        return self._dispersion(self.sharpes())

    def _dispersion(self, values: list[float]) -> float:
        if len(values) < 2:
            return self.variance_floor
        return max(float(np.var(values, ddof=1)), self.variance_floor)

    def null_sharpe_variance(self) -> float | None:
        """Variance of a per-period Sharpe estimate under no edge: 1 / (T - 1), T the median
        number of returns behind the recorded Sharpes; None when no trial recorded T."""
        if not self.n_obs:
            return None
        t = float(np.median(list(self.n_obs.values())))
        return 1.0 / max(t - 1.0, 1.0)

    def trial_sharpe_variance(self) -> float:
        """The ``V`` of the deflated Sharpe ratio: the empirical variance capped at the null one.

        With fewer than two Sharpes there is no dispersion to measure: the null variance
        is used when known, else the floor.
        """
        return self._capped(self.sharpes())

    def trial_alpha_variance(self) -> float:
        """The ``V`` of the deflated alpha: the trials' alpha-Sharpe dispersion, capped the same way."""
        return self._capped(self.alpha_sharpes())

    def _capped(self, values: list[float]) -> float:
        null = self.null_sharpe_variance()
        if len(values) < 2:
            return null if null is not None else self.variance_floor
        emp = self._dispersion(values)
        return min(emp, null) if null is not None else emp

    def save(self, path: str | Path) -> None:
        """Write the ledger to ``path`` as JSON."""
        Path(path).write_text(self.model_dump_json(indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, *, data_key: str = "") -> TrialLedger:
        """Load a ledger, or start an empty one when the file does not exist yet."""
        p = Path(path)
        if not p.exists():
            return cls(data_key=data_key)
        return cls.model_validate_json(p.read_text(encoding="utf-8"))


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None
