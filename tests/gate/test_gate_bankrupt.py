"""A bankrupt job (its equity reached zero: ``backtest.margin``) puts its variant out."""

from __future__ import annotations

import numpy as np
import pytest
from gate_builders import iso_dates, make_result

from backtest.contracts import JobStatus
from gate.contracts import Veto
from gate.criteria import parse_criteria
from gate.evaluate import evaluate_variants
from gate.failure import analyse_failure
from gate.ledger import TrialLedger

pytestmark = pytest.mark.unit

N = 500
DATES = iso_dates(N)
WHY = "bankrupt on 2015-04-01: the equity reached -392.32; the run ends there (total return -100 %)"


def test_one_bankrupt_job_vetoes_a_strong_variant() -> None:
    """Four strong jobs and one that lost the capital: the aggregate of the ok jobs would look
    fine, so the bankrupt one is a veto of its own (not an error rate), with its reason."""
    rng = np.random.default_rng(0)
    results = [
        make_result(
            "lev",
            rng.normal(0.002, 0.01, N),
            symbol=s,
            dates=DATES,
            trade_pnls=[200.0] * 12 + [-100.0] * 8,
            bars_in_market=N // 2,
        )
        for s in "ABCD"
    ]
    results.append(make_result("lev", [], symbol="E", status=JobStatus.BANKRUPT, error=WHY))
    criteria = parse_criteria("sharpe>=1")
    (ev,) = evaluate_variants([("lev", "momentum", "sha")], results, criteria, TrialLedger())
    assert Veto.BANKRUPT in ev.veto_kinds and not ev.passed and ev.score == 0.0
    assert f"E/fold0 {WHY}" in ev.vetoes
    analysis = analyse_failure(
        [ev],
        criteria=criteria,
        history=[],
        research_confidence=0.8,
        regime="trending-up",
        families=["momentum"],
    )
    assert any("bankrupt on 2015-04-01" in line for line in analysis.evidence)
