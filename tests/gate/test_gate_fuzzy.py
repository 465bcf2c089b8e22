from __future__ import annotations

import warnings

import numpy as np
import pytest
from gate_builders import ABSOLUTE_CRITERIA_TEXT, make_metrics
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.criteria import parse_criteria
from gate.fuzzy import RULE_BASE, FuzzyScorer

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria(ABSOLUTE_CRITERIA_TEXT)
SCORER = FuzzyScorer(CRITERIA)
N = len(CRITERIA.rules)


def test_meeting_all_beats_failing_all() -> None:
    good = make_metrics(sharpe=1.2, max_drawdown_pct=15, win_rate_pct=45, profit_factor=1.3)
    bad = make_metrics(sharpe=-0.3, max_drawdown_pct=45, win_rate_pct=25, profit_factor=0.8)
    s = SCORER.score([good, bad, None])
    assert s[0] > CRITERIA.score_threshold > s[1]
    assert s[2] == pytest.approx(s[1])  # None attains nothing, like a hopeless variant
    assert all(0.0 <= x <= 1.0 for x in s)


def test_near_miss_scores_between() -> None:
    near = make_metrics(sharpe=0.9)  # everything else met
    far = make_metrics(sharpe=0.2)
    met = make_metrics()
    s = SCORER.score([far, near, met])
    assert s[0] < s[1] < s[2]


def test_vectorised_equals_scalar() -> None:
    rng = np.random.default_rng(3)
    att = rng.uniform(-0.5, 2.5, (12, N))  # includes out-of-universe values: clipped
    vec = SCORER.score_attainments(att)
    scalar = np.array([SCORER.score_attainments(row)[0] for row in att])
    np.testing.assert_allclose(vec, scalar, atol=1e-12)


@pytest.mark.parametrize("value", [0.0, 0.5, 0.74, 0.75, 0.9, 1.0, 2.0, -5.0, 99.0])
def test_some_rule_always_fires(value: float) -> None:
    s = SCORER.score_attainments(np.full((1, N), value))
    assert np.isfinite(s).all()


def test_rule_base_is_data() -> None:
    assert {out for _, out in RULE_BASE} == {"low", "medium", "high"}
    assert all(isinstance(conds, list) for conds, _ in RULE_BASE)


def test_no_deprecation_warning_escapes() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FuzzyScorer(CRITERIA).score([make_metrics(), None])
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_empty_list() -> None:
    assert SCORER.score([]).shape == (0,)


@settings(max_examples=60, deadline=None)
@given(
    base=st.lists(st.floats(0.0, 2.0), min_size=N, max_size=N),
    index=st.integers(0, N - 1),
    step=st.floats(0.0, 2.0),
)
def test_monotonic_in_each_attainment(base: list[float], index: int, step: float) -> None:
    better = list(base)
    better[index] = min(2.0, base[index] + step)
    before, after = SCORER.score_attainments(np.array([base, better]))
    assert after >= before - 1e-9


@settings(max_examples=30, deadline=None)
@given(
    sharpe=st.floats(-2, 4),
    dd=st.floats(0, 60),
    d_sharpe=st.floats(0, 3),
    d_dd=st.floats(0, 60),
)
def test_improving_a_metric_never_lowers_score(
    sharpe: float, dd: float, d_sharpe: float, d_dd: float
) -> None:
    m0 = make_metrics(sharpe=sharpe, max_drawdown_pct=dd)
    m1 = make_metrics(sharpe=sharpe + d_sharpe, max_drawdown_pct=max(0.0, dd - d_dd))
    s0, s1 = SCORER.score([m0, m1])
    assert s1 >= s0 - 1e-9


def test_default_criteria_score_the_alpha_too() -> None:
    from gate.alpha import AlphaStats

    scorer = FuzzyScorer(parse_criteria(None))
    m = make_metrics()  # every absolute criterion met
    exposure = AlphaStats(benchmark="buy-and-hold", n_obs=750, beta=0.9, t_stat=0.2)
    alpha = AlphaStats(benchmark="buy-and-hold", n_obs=750, beta=0.2, t_stat=2.6)
    low, high = scorer.score([m, m], [exposure, alpha])
    assert low < 0.35 < scorer.criteria.score_threshold < high
