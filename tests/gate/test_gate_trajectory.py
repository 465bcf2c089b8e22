from __future__ import annotations

import pytest
from gate_builders import make_eval, make_metrics

from gate.contracts import IterationSummary, Route, TrajectoryStatus
from gate.summary import summarise_iteration
from gate.trajectory import analyse_trajectory

pytestmark = pytest.mark.unit


def _hist(scores, params=None, dds=None) -> list[IterationSummary]:
    out = []
    for i, s in enumerate(scores):
        metrics = {"sharpe": s * 2}
        if dds is not None:
            metrics["max_drawdown_pct"] = dds[i]
        out.append(
            IterationSummary(
                iteration=i + 1,
                route=Route.TUNE,
                best_variant_id=f"v{i}",
                best_score=s,
                best_metrics=metrics,
                best_parameters=(params or [{}] * len(scores))[i],
            )
        )
    return out


def test_none_below_two_iterations() -> None:
    assert analyse_trajectory([]) is None
    assert analyse_trajectory(_hist([0.3])) is None


@pytest.mark.parametrize(
    ("scores", "status"),
    [
        ([0.2, 0.3, 0.4], TrajectoryStatus.CONVERGING),
        ([0.2, 0.3], TrajectoryStatus.CONVERGING),
        ([0.5, 0.4, 0.3], TrajectoryStatus.DIVERGING),
        ([0.3, 0.5, 0.3, 0.5], TrajectoryStatus.OSCILLATING),
        ([0.4, 0.405, 0.40, 0.402], TrajectoryStatus.STAGNANT),
    ],
)
def test_statuses(scores, status) -> None:
    t = analyse_trajectory(_hist(scores))
    assert t is not None and t.status == status, t.reasoning
    assert set(t.improvement_rate) >= {"score", "sharpe"} and "score" in t.variance


def test_rates_are_relative_and_direction_aware() -> None:
    t = analyse_trajectory(_hist([0.2, 0.3, 0.45], dds=[30.0, 24.0, 20.0]))
    assert t.improvement_rate["score"] == pytest.approx((0.5 + 0.5) / 2)
    assert t.improvement_rate["max_drawdown_pct"] == pytest.approx((0.2 + 4 / 24) / 2, abs=1e-6)
    assert t.direction["max_drawdown_pct"] == "improving"


def test_iterations_to_convergence() -> None:
    t = analyse_trajectory(_hist([0.2, 0.3, 0.4]), score_threshold=0.6)
    assert t.iterations_to_convergence == pytest.approx(2.0)
    assert analyse_trajectory(_hist([0.5, 0.4, 0.3])).iterations_to_convergence is None
    assert analyse_trajectory(_hist([0.5, 0.7])).iterations_to_convergence == 0.0


def test_parameter_impact() -> None:
    params = [{"fast": 10, "slow": 50}, {"fast": 12, "slow": 50}, {"fast": 12, "slow": 80}]
    t = analyse_trajectory(_hist([0.2, 0.3, 0.25], params=params))
    assert t.parameter_impact == {"fast": pytest.approx(0.1), "slow": pytest.approx(-0.05)}


def test_summarise_iteration_feeds_trajectory() -> None:
    evals = [
        make_eval("a", metrics=make_metrics(sharpe=0.8), score=0.4, dsr=0.3),
        make_eval("b", metrics=make_metrics(sharpe=1.1), score=0.5, dsr=0.6),
    ]
    s = summarise_iteration(2, evals, route=Route.TUNE, parameters={"b": {"fast": 10}})
    assert s.best_variant_id == "b" and s.best_score == 0.5 and s.best_parameters == {"fast": 10}
    assert s.best_metrics["sharpe"] == 1.1 and s.best_metrics["dsr"] == 0.6 and s.n_passed == 0
    empty = summarise_iteration(1, [], route=Route.ABANDON)
    assert empty.best_variant_id is None and empty.best_score == 0.0


def test_summary_carries_the_best_alpha_for_the_chart_not_the_trajectory() -> None:
    from gate.alpha import AlphaStats

    best = make_eval("b", metrics=make_metrics(sharpe=1.1), score=0.5, dsr=0.6, spa_pvalue=0.03)
    best.alpha = AlphaStats(
        benchmark="buy-and-hold",
        n_obs=750,
        alpha_annual_pct=4.0,
        beta=0.2,
        t_stat=2.4,
        deflated_alpha=0.9,
    )
    s = summarise_iteration(1, [best], route=Route.TUNE)
    assert s.best_alpha["alpha_t"] == 2.4 and s.best_alpha["beta"] == 0.2
    assert s.best_alpha["deflated_alpha"] == 0.9 and s.best_alpha["spa_p"] == 0.03
    assert "alpha_t" not in s.best_metrics  # the trajectory analysis reads the metrics only
