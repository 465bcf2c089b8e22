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


def _graded(progress, *, score=0.147, sharpes=None, alpha_t=None) -> list[IterationSummary]:
    """A line whose fuzzy score sits on its floor while the graded measure moves."""
    return [
        IterationSummary(
            iteration=i + 1,
            route=Route.TUNE,
            best_variant_id=f"v{i}",
            best_score=score,
            best_progress=p,
            best_metrics={"sharpe": (sharpes or [0.5] * len(progress))[i], "n_trades": 40.0},
            best_alpha={} if alpha_t is None else {"alpha_t": alpha_t[i]},
        )
        for i, p in enumerate(progress)
    ]


def test_a_floored_fuzzy_score_with_rising_progress_converges() -> None:
    # The ETF run: the fuzzy score on its floor at 0.147, progress and Sharpe rising.
    t = analyse_trajectory(_graded([0.40, 0.46, 0.52], sharpes=[0.4, 0.55, 0.7]))
    assert t.status == TrajectoryStatus.CONVERGING, t.reasoning
    assert t.improvement_rate["score"] > 0.05  # routing reads the graded measure's rate
    assert t.improvement_rate["fuzzy_score"] == 0.0 and t.direction["sharpe"] == "improving"
    assert "progress" in t.reasoning and "fuzzy scores" in t.reasoning


def test_falling_progress_diverges() -> None:
    t = analyse_trajectory(_graded([0.6, 0.5, 0.4], sharpes=[0.8, 0.7, 0.6]))
    assert t.status == TrajectoryStatus.DIVERGING, t.reasoning
    assert t.improvement_rate["score"] < -0.05


def test_flat_progress_but_moving_criteria_is_not_stagnant() -> None:
    # Every far criterion clipped at attainment 0: progress flat, the raw figures are not.
    rising = _graded([0.3, 0.3, 0.3], sharpes=[-0.5, -0.3, -0.1], alpha_t=[-1.8, -1.0, -0.2])
    t = analyse_trajectory(rising)
    assert t.status == TrajectoryStatus.CONVERGING and "criteria improve" in t.reasoning
    assert t.iterations_to_convergence is None  # no ETA from a flat measure
    falling = _graded([0.3, 0.3, 0.3], sharpes=[-0.1, -0.3, -0.5])
    assert analyse_trajectory(falling).status == TrajectoryStatus.DIVERGING
    traded = _graded([0.3, 0.3, 0.3], sharpes=[0.2, 0.3, 0.4], alpha_t=[-0.2, -1.0, -1.8])
    assert analyse_trajectory(traded).status == TrajectoryStatus.OSCILLATING


def test_stagnant_only_when_neither_moves() -> None:
    t = analyse_trajectory(_graded([0.3, 0.301, 0.3], sharpes=[0.5, 0.505, 0.5]))
    assert t.status == TrajectoryStatus.STAGNANT, t.reasoning


def test_every_criterion_met_throughout_is_not_a_slide() -> None:
    # Calibration XS #9: progress 1.0 at every step while the Sharpe drifts down above its
    # bar; the deflation bars block the pass, the line is not sliding away (no ABANDON).
    met = _graded([1.0, 1.0, 1.0], score=0.853, sharpes=[1.4, 1.25, 1.1])
    t = analyse_trajectory(met)
    assert t.status == TrajectoryStatus.STAGNANT and "every criterion met throughout" in t.reasoning
    # The same drift below the bar (progress under 1) still diverges.
    assert analyse_trajectory(_graded([0.9, 0.9, 0.9], sharpes=[1.4, 1.25, 1.1])).status == (
        TrajectoryStatus.DIVERGING
    )


def test_progress_eta_is_to_every_criterion_met() -> None:
    t = analyse_trajectory(_graded([0.6, 0.7, 0.8]))
    assert t.iterations_to_convergence == pytest.approx(2.0)
    done = analyse_trajectory(_graded([0.9, 1.0]))
    assert done.iterations_to_convergence == 0.0 and "every criterion met" in done.reasoning


def test_old_records_fall_back_to_the_fuzzy_score() -> None:
    # best_progress 0 beside a positive fuzzy score: recorded before the graded measure.
    old = _hist([0.2, 0.3, 0.4])
    assert all(h.best_progress == 0.0 for h in old)
    t = analyse_trajectory(old)
    assert t.status == TrajectoryStatus.CONVERGING and "fuzzy_score" not in t.improvement_rate
    record = {"iteration": 1, "route": "TUNE", "best_variant_id": None, "best_score": 0.2}
    assert IterationSummary.model_validate(record).best_progress == 0.0  # old records load


def test_summary_carries_the_best_progress() -> None:
    evals = [
        make_eval("a", metrics=make_metrics(sharpe=0.8), score=0.4, progress=0.7),
        make_eval("b", metrics=make_metrics(sharpe=1.1), score=0.5, progress=0.6),
    ]
    s = summarise_iteration(1, evals, route=Route.TUNE)
    assert s.best_variant_id == "a" and s.best_progress == 0.7 and s.best_score == 0.4
