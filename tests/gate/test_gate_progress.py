"""The graded progress measure: it ranks variants the fuzzy score floors alike (issue 23)."""

from __future__ import annotations

import itertools

import pytest
from gate_builders import make_eval, make_metrics

from gate.alpha import AlphaStats
from gate.contracts import CLEAN_FLOOR, Veto, demote
from gate.criteria import parse_criteria
from gate.evaluate import best_evaluation
from gate.fuzzy import FuzzyScorer
from gate.progress import criteria_attainments, progress, variant_progress

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria(None)  # sharpe, max_dd, win rate, profit factor, alpha_t; 30 trades
LEVELS = [0.0, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0]


def _alpha(t: float | None, deflated: float | None = None) -> AlphaStats:
    return AlphaStats(benchmark="buy-and-hold", n_obs=750, t_stat=t, deflated_alpha=deflated)


def test_monotone_in_each_criterion() -> None:
    base = [0.5, 0.2, 1.0, 0.8]
    for j in range(len(base)):
        values = []
        for a in LEVELS:
            att = list(base)
            att[j] = a
            values.append(progress(att))
        assert values == sorted(values), (j, values)
        # strictly increasing up to the threshold, flat beyond it (the cap)
        below = values[: LEVELS.index(1.0) + 1]
        assert all(b > a for a, b in itertools.pairwise(below)), (j, below)


def test_a_far_criterion_moves_it_while_the_fuzzy_score_stays_floored() -> None:
    scorer = FuzzyScorer(CRITERIA)
    before = [1.2, 1.1, 1.3, 1.0, 0.1]  # alpha_t at 0.1 of its threshold, the rest met
    after = [1.2, 1.1, 1.3, 1.0, 0.3]
    fuzzy = scorer.score_attainments([before, after])
    assert fuzzy[0] == pytest.approx(fuzzy[1])  # both on the LOW floor
    assert fuzzy[0] < 0.2
    assert progress([*before, 1.0]) < progress([*after, 1.0])


def test_no_single_criterion_floors_it() -> None:
    # One criterion at 0: the others still move the measure.
    lo = progress([0.0, 0.4, 0.4, 0.4])
    hi = progress([0.0, 0.9, 0.9, 0.9])
    assert CLEAN_FLOOR < lo < hi < 1.0


def test_balance_beats_one_criterion_ignored() -> None:
    assert progress([0.8] * 6) > progress([1.0] * 5 + [0.0])


def test_bounds_and_the_min_trades_floor() -> None:
    assert progress([0.0] * 6) == pytest.approx(CLEAN_FLOOR)
    assert progress([2.0] * 6) == pytest.approx(1.0)
    m = make_metrics(n_trades=15)
    att = criteria_attainments(CRITERIA, m, _alpha(2.0))
    assert len(att) == len(CRITERIA.rules) + 1 and att[-1] == pytest.approx(0.5)
    more = variant_progress(CRITERIA, make_metrics(n_trades=25), _alpha(2.0), [])
    fewer = variant_progress(CRITERIA, m, _alpha(2.0), [Veto.TOO_FEW_TRADES])
    assert fewer < more and fewer > CLEAN_FLOOR  # too few trades is graded, not demoted


def test_a_vetoed_variant_ranks_below_any_clean_one() -> None:
    worst_clean = progress([0.0] * 6)
    best_vetoed = progress([2.0] * 6, vetoed=True)
    assert best_vetoed < worst_clean
    # still ordered among vetoed ones
    assert progress([0.2] * 6, vetoed=True) < progress([0.6] * 6, vetoed=True)
    # a veto found after scoring (the lookahead check) demotes to the same place
    assert demote(progress([0.7] * 6)) == pytest.approx(progress([0.7] * 6, vetoed=True))
    peeker = make_eval("peeker", progress=progress([2.0] * 6), passed=True, score=0.9)
    peeker.veto(Veto.LOOKAHEAD, "lookahead detected")
    clean = make_eval("clean", progress=progress([0.0] * 6))
    assert peeker.progress < clean.progress
    assert best_evaluation([peeker, clean]).variant_id == "clean"
    bust = variant_progress(CRITERIA, make_metrics(), _alpha(3.0), [Veto.BANKRUPT])
    assert bust < CLEAN_FLOOR


def test_best_is_the_graded_leader_not_an_arbitrary_floor_tie() -> None:
    # Both floor the fuzzy score; the one with alpha t -1.76 and a lower Sharpe is not "best".
    m_bad, m_good = make_metrics(sharpe=1.3), make_metrics(sharpe=0.9)
    bad = make_eval("bad", metrics=m_bad, score=0.147, alpha=_alpha(-1.76))
    good = make_eval("good", metrics=m_good, score=0.147, alpha=_alpha(1.2))
    for e in (bad, good):
        e.progress = variant_progress(CRITERIA, e.metrics, e.alpha, [])
    assert good.progress > bad.progress
    assert best_evaluation([bad, good]).variant_id == "good"


def test_ties_broken_by_deflated_alpha() -> None:
    p = progress([1.0] * 6)
    low = make_eval("low", progress=p, dsr=0.99, alpha=_alpha(3.0, deflated=0.6))
    high = make_eval("high", progress=p, dsr=0.5, alpha=_alpha(3.0, deflated=0.97))
    none = make_eval("none", progress=p, dsr=0.999)
    assert best_evaluation([low, none, high]).variant_id == "high"
    assert best_evaluation([none, low]).variant_id == "low"  # None ranks lowest
    # a pass still comes first, whatever the measure says
    passed = make_eval("passed", progress=0.5, passed=True)
    assert best_evaluation([low, high, passed]).variant_id == "passed"
