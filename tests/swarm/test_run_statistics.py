"""The run's PBO is over every variant it tried, recomputable from the run folder alone."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from lab_runs import reference_args, shared_run

from gate.stats import pbo_cscv

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _strict_args(daily_dir) -> list[str]:
    """The reference run with a bar no variant clears: three iterations of three variants."""
    args = reference_args(daily_dir)
    args[args.index("--criteria") + 1] = "sharpe>=3,min_trades>=10"
    return args


def test_verdict_pbo_equals_cscv_over_every_variant_in_the_folder(tmp_path_factory, daily_dir):
    run_dir, _ = shared_run(tmp_path_factory, "strict", _strict_args(daily_dir))
    verdict = json.loads((run_dir / "verdict.json").read_text())
    # Independent of the lab's aggregation code: equal-weight mean per date over the jobs.
    series: dict[str, dict[str, float]] = {}
    for folder in sorted((run_dir / "backtests").iterdir()):
        by_date: dict[str, list[float]] = defaultdict(list)
        for f in folder.glob("*.json"):
            r = json.loads(f.read_text())
            if r["status"] == "ok":
                for d, x in zip(r["return_dates"], r["returns"], strict=True):
                    by_date[d].append(x)
        if by_date:
            series[folder.name] = {d: sum(v) / len(v) for d, v in by_date.items()}
    assert verdict["verdict"] == "ABANDON" and len(series) >= 8, sorted(series)
    assert verdict["pbo_variants"] == len(series)
    ids = sorted(series)
    common = sorted(set.intersection(*(set(series[v]) for v in ids)))
    matrix = np.array([[series[v][d] for v in ids] for d in common])
    assert verdict["pbo"] == pytest.approx(pbo_cscv(matrix, 16), abs=1e-12)
    assert "over the" in (run_dir / "report.md").read_text().split("PBO (CSCV", 1)[1][:200]
