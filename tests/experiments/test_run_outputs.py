"""Charts, report and export pieces of the run folder, on small hand-made inputs."""

from __future__ import annotations

import json

import pytest

from backtest.contracts import Metrics
from experiments.charts import plot_trajectory, plot_trial_sharpes, trajectory_panels
from experiments.export import export_from_run, variant_figures
from experiments.records import DataSummary, Figures, VariantEntry, Verdict
from experiments.report import render_report
from experiments.runfolder import build_manifest
from gate.contracts import GateDecision, VariantEvaluation
from gate.criteria import criteria_from_text
from swarm.config import RunConfig
from swarm.research.models import ResearchSynthesis

pytestmark = pytest.mark.unit

PNG = b"\x89PNG\r\n\x1a\n"
METRICS = {
    "sharpe": 1.1,
    "sortino": 1.5,
    "cagr_pct": 9.0,
    "max_drawdown_pct": 12.0,
    "win_rate_pct": 51.0,
    "profit_factor": 1.4,
    "n_trades": 40,
    "exposure_pct": 60.0,
    "final_value": 120_000.0,
    "sharpe_per_period": 0.07,
    "total_return_pct": 20.0,
    "n_obs": 500,
    "skew": 0.0,
    "kurtosis": 3.0,
}


FOLD = {"index": 0, "warmup_start": "2013-01-01", "start": "2013-01-02", "end": "2014-01-01"}


def _render(
    *,
    config,
    verdict,
    decisions,
    synthesis,
    data,
    best_variant,
    best_eval,
    figures,
    criteria_text,
    holdout_per_symbol=None,
    **kw,
):
    """``render_report`` on hand-made JSON-like inputs, read through the run's models as
    the run would hand them over (the criteria as a config without them reads its text)."""
    evaluation = {"family": "momentum", "trial_key": "k", "metrics": None}
    return render_report(
        run_id="r1",
        config=RunConfig.model_validate({"preferred_families": []} | config),
        criteria=criteria_from_text(criteria_text, replace=config.get("criteria_replace", True)),
        verdict=Verdict.model_validate(verdict),
        decisions=[
            GateDecision.model_validate(
                d | {"evaluations": [evaluation | e for e in d["evaluations"]]}
            )
            for d in decisions
        ],
        synthesis=ResearchSynthesis.model_validate({"fact_sheets": []} | synthesis)
        if synthesis
        else None,
        data=DataSummary.model_validate(data | {"folds": [FOLD for _ in data["folds"]]}),
        best_variant=VariantEntry.model_validate(best_variant) if best_variant else None,
        best_eval=VariantEvaluation.model_validate(evaluation | best_eval) if best_eval else None,
        figures={w: Figures.model_validate(f) for w, f in figures.items()},
        holdout_per_symbol={s: Metrics.model_validate(m) for s, m in holdout_per_symbol.items()}
        if holdout_per_symbol
        else None,
        **kw,
    )


def _history():
    return [
        {
            "iteration": 1,
            "route": "TUNE",
            "best_score": 0.4,
            "best_metrics": {"sharpe": 0.7, "max_drawdown_pct": 25.0, "dsr": 0.5, "n_trades": 35},
        },
        {
            "iteration": 2,
            "route": "SUCCESS",
            "best_score": 0.7,
            "best_metrics": {
                "sharpe": 1.1,
                "max_drawdown_pct": 12.0,
                "dsr": 0.97,
                "n_trades": None,
            },
        },
    ]


def test_trajectory_has_score_every_gate_metric_dsr_and_trades_against_thresholds(tmp_path):
    panels = trajectory_panels(
        {"sharpe": 1.0, "cagr_pct": 5.0}, 0.6, dsr_threshold=0.95, min_trades=30
    )
    names = [n for n, _ in panels]
    assert names[:3] == ["score", "sharpe", "cagr_pct"] and names[-2:] == ["dsr", "n_trades"]
    assert dict(panels)["cagr_pct"] == 5.0 and dict(panels)["n_trades"] == 30
    path = plot_trajectory(
        _history(),
        {"sharpe": 1.0},
        0.6,
        tmp_path / "c" / "t.png",
        dsr_threshold=0.95,
        min_trades=30,
    )
    assert path.read_bytes().startswith(PNG)
    assert not list(tmp_path.glob("c/*.tmp*"))  # written atomically


def test_trajectory_plots_the_alpha_figures_the_gate_uses(tmp_path, monkeypatch):
    """The alpha-t panel read ``best_metrics``, where alpha_t never is: it was empty."""
    import experiments.charts as charts

    panels = dict(
        trajectory_panels({"alpha_t": 2.0}, 0.6, deflated_alpha_threshold=0.95, spa_threshold=0.05)
    )
    assert panels["alpha_t"] == 2.0 and panels["deflated_alpha"] == 0.95
    assert panels["spa_p"] == 0.05
    history = [
        dict(h, best_alpha={"alpha_t": t, "deflated_alpha": d, "spa_p": p})
        for h, (t, d, p) in zip(_history(), [(1.2, 0.5, 0.2), (2.6, 0.97, 0.01)], strict=True)
    ]
    plotted: dict[str, list[float]] = {}
    real_subplots = charts.plt.subplots

    def spy_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        for ax in axes:
            real_plot = ax.plot

            def plot(xs, ys, *a, _ax=ax, _plot=real_plot, **kw):
                plotted.setdefault(str(id(_ax)), list(ys))
                return _plot(xs, ys, *a, **kw)

            ax.plot = plot
        plotted["order"] = [str(id(ax)) for ax in axes]
        return fig, axes

    monkeypatch.setattr(charts.plt, "subplots", spy_subplots)
    charts.plot_trajectory(
        history,
        {"alpha_t": 2.0},
        0.6,
        tmp_path / "t.png",
        deflated_alpha_threshold=0.95,
        spa_threshold=0.05,
    )
    names = [
        n
        for n, _ in trajectory_panels(
            {"alpha_t": 2.0}, 0.6, deflated_alpha_threshold=0.95, spa_threshold=0.05
        )
    ]
    by_name = {n: plotted[k] for n, k in zip(names, plotted["order"], strict=True)}
    assert by_name["alpha_t"] == [1.2, 2.6] and by_name["spa_p"] == [0.2, 0.01]
    assert by_name["sharpe"] == [0.7, 1.1]


def test_trial_sharpe_distribution_marks_the_deflation_threshold(tmp_path):
    path = plot_trial_sharpes(
        [0.1, -0.3, 0.5, 0.9, float("nan")],
        threshold=0.8,
        best=0.9,
        n_trials=6,
        path=tmp_path / "s.png",
    )
    assert path.read_bytes().startswith(PNG)
    empty = plot_trial_sharpes([], threshold=None, path=tmp_path / "e.png")
    assert empty.read_bytes().startswith(PNG)


def _verdict(**kw):
    return {
        "verdict": "ABANDON",
        "reason": "iteration limit reached",
        "iterations": 1,
        "best_variant": "i01-v01-momentum-abc123",
        "n_backtests": 6,
        "n_trials": 3,
        "best_dsr": 0.4,
        "best_score": 0.3,
        "best_dsr_all_trials": 0.35,
        "pbo": None,
        "score_threshold": 0.6,
        "dsr_threshold": 0.95,
        "route_history": ["ABANDON"],
        "figures": {},
        "buy_and_hold_in_sample": dict(METRICS, sharpe=0.9),
        "trial_sharpes": {"threshold": 0.74, "best": 0.6, "n_trials": 3, "n_with_sharpe": 3},
    } | kw


def _variant(vid="i01-v01-momentum-abc123", parent=None):
    return {
        "variant_id": vid,
        "parent_id": parent,
        "iteration": 1,
        "route": "INITIAL",
        "code": "import backtrader as bt\n\n\nclass S(bt.Strategy):\n    pass\n",
        "code_sha256": "x",
        "class_name": "S",
        "spec": {
            "name": "momentum-roc",
            "family": "momentum",
            "approach": "buy strength",
            "entry": "roc_momentum",
            "parameters": {"roc_period": 12},
        },
        "in_sample": {
            "iteration": 1,
            "metrics": METRICS,
            "score": 0.3,
            "dsr": 0.4,
            "passed": False,
        },
    }


def test_report_states_verdict_routes_research_best_variant_statistics_and_caveats():
    data = {
        "split": {
            "insample_start": "2013-01-02",
            "insample_end": "2017-10-01",
            "holdout_start": "2017-10-02",
            "holdout_end": "2018-12-31",
        },
        "folds": [{}, {}],
        "symbols": {"AAPL": {"source": "csv", "sha256": "f" * 64}},
    }
    decision = {
        "iteration": 1,
        "best_variant_id": "i01-v01-momentum-abc123",
        "decision": "ABANDON",
        "reasoning": "iteration limit reached",
        "failure": {"failure_type": "PARAMETER_ISSUE", "root_cause": "r", "confidence": 0.5},
        "evaluations": [
            {"variant_id": "i01-v01-momentum-abc123", "passed": False, "score": 0.3, "dsr": 0.4}
        ],
    }
    config = {
        "directive": "momentum",
        "tickers": ["AAPL"],
        "universe_source": "--tickers",
        "timeframe": "1d",
        "start": "2013-01-01",
        "end": "2018-12-31",
        "seed": 4,
        "costs": {"commission_pct": 0.1, "slippage_pct": 0.05},
    }
    synthesis = {
        "regime": "trending-up",
        "signal": 0.2,
        "confidence": 0.4,
        "quality": "medium",
        "coverage": 1 / 3,
        "recommended_families": ["momentum"],
        "summary": "Momentum leads.",
        "gaps": ["no news"],
    }
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.3,
        "dsr": 0.4,
        "fold_sharpes": [0.5, 0.7],
        "metrics": METRICS,
    }
    text = _render(
        config=config,
        verdict=_verdict(),
        decisions=[decision],
        synthesis=synthesis,
        data=data,
        best_variant=_variant(),
        best_eval=best_eval,
        figures={},
        criteria_text="sharpe>=1",
        charts=["charts/trajectory.png"],
        n_records=4,
    )
    for needle in (
        "**Verdict:** ABANDON",
        "**Reason:** iteration limit reached",
        "## Route history",
        "PARAMETER_ISSUE",
        "## Research summary",
        "trending-up",
        "coverage 0.33 of domains",
        "## Best variant",
        "(strategies/i01-v01-momentum-abc123.py)",
        "roc_period=12",
        "in-sample (buy-and-hold)",
        "Reality check",
        "deflated alpha",
        "holdout stays sealed",
        "Trials counted",
        "Deflated Sharpe",
        "PBO",
        "0.74",
        "![trajectory](charts/trajectory.png)",
        "Survivorship",
        "Costs are assumptions",
        "AAPL from csv",
        "Seed 4",
        "--resume",
    ):
        assert needle in text, needle


def _report(config_extra=None, metrics=None, figures=None) -> str:
    data = {
        "split": {
            "insample_start": "2013-01-01",
            "insample_end": "2017-01-01",
            "holdout_start": "2017-01-02",
            "holdout_end": "2018-12-31",
        },
        "folds": [{}],
        "symbols": {"AAPL": {"source": "csv", "sha256": "f" * 64}},
    }
    config = {
        "directive": "momentum",
        "tickers": ["AAPL"],
        "universe_source": "--tickers",
        "timeframe": "1d",
        "start": "2013-01-01",
        "end": "2018-12-31",
        "seed": 4,
        "costs": {"commission_pct": 0.1, "slippage_pct": 0.05},
        **(config_extra or {}),
    }
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.3,
        "dsr": 0.4,
        "fold_sharpes": [0.5],
        "metrics": metrics or METRICS,
    }
    return _render(
        config=config,
        verdict=_verdict(),
        decisions=[],
        synthesis=None,
        data=data,
        best_variant=_variant(),
        best_eval=best_eval,
        figures=figures or {},
        criteria_text="sharpe>=1",
    )


def test_report_warns_about_orders_the_broker_refused():
    assert "broker refused" not in _report()
    refused = {**METRICS, "orders_rejected": 29}
    text = _report(
        metrics=refused, figures={"holdout": {"metrics": {**METRICS, "orders_rejected": 3}}}
    )
    assert "**Warning: the broker refused orders** (29 in-sample, 3 holdout" in text
    assert "win rate" in text and "100% of equity" in text


def test_report_states_prices_and_memory():
    text = _report()
    assert "- Prices: raw (the default; `--prices adjusted` for total return)" in text
    assert "leave out dividends" in text
    assert "- Research memory: the user cache dir (default, shared by runs)" in text
    text = _report({"prices": "adjusted", "memory_dir": "/tmp/mem"})
    assert "- Prices: adjusted (`--prices adjusted`)" in text
    assert "- Research memory: `/tmp/mem`" in text and "research/recalled.json" in text
    assert "nothing recalled" in _report({"memory_dir": "off"})


def test_a_non_winner_exports_with_its_own_in_sample_figures(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    winner, other = _variant("i02-v01-w", parent="i01-v01-momentum-abc123"), _variant()
    winner_figs = {"in-sample": {"metrics": METRICS}, "holdout": {"metrics": METRICS}}
    verdict = _verdict(verdict="SUCCESS", best_variant="i02-v01-w", figures=winner_figs)
    variants = {winner["variant_id"]: winner, other["variant_id"]: other}
    (run / "variants.json").write_text(json.dumps(variants))
    (run / "verdict.json").write_text(json.dumps(verdict))
    manifest = build_manifest(
        run_id="run", config={"costs": {"commission_pct": 0.1}}, data={}, seed=0, argv=[]
    )
    (run / "manifest.json").write_text(json.dumps(manifest))

    typed = Verdict.model_validate(verdict)
    assert variant_figures(VariantEntry.model_validate(winner), typed) == typed.figures
    figs = variant_figures(VariantEntry.model_validate(other), typed)
    assert set(figs) == {"in-sample"} and figs["in-sample"].buy_and_hold.sharpe == 0.9

    dest = export_from_run(run, tmp_path / "x", other["variant_id"])
    readme = (dest / "README.md").read_text()
    assert "| in-sample | 1.10 |" in readme and "Only in-sample figures" in readme
    assert "opened once for this strategy" not in readme
    assert json.loads((dest / "params.json").read_text()) == {"roc_period": 12}
    lineage = (export_from_run(run, tmp_path / "w") / "README.md").read_text()
    assert "i01-v01-momentum-abc123 -> i02-v01-w" in lineage


def test_report_and_chart_show_the_graded_progress_next_to_the_fuzzy_score(tmp_path, monkeypatch):
    import experiments.charts as charts

    history = [dict(h, best_progress=p) for h, p in zip(_history(), [0.45, 0.8], strict=True)]
    drawn: list[list[float]] = []
    real_subplots = charts.plt.subplots

    def spy_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        real_plot = axes[0].plot

        def plot(xs, ys, *a, **kw):
            drawn.append([float(y) for y in ys])
            return real_plot(xs, ys, *a, **kw)

        axes[0].plot = plot
        return fig, axes

    monkeypatch.setattr(charts.plt, "subplots", spy_subplots)
    path = plot_trajectory(history, {"sharpe": 1.0}, 0.6, tmp_path / "t.png")
    assert path.read_bytes().startswith(PNG)
    assert drawn == [[0.4, 0.7], [0.45, 0.8]]  # the fuzzy score, then the graded measure

    decision = {
        "iteration": 1,
        "best_variant_id": "v",
        "decision": "TUNE",
        "reasoning": "r",
        "evaluations": [
            {"variant_id": "v", "passed": False, "score": 0.147, "progress": 0.612, "dsr": 0.4}
        ],
    }
    best_eval = {
        "variant_id": "v",
        "score": 0.147,
        "progress": 0.612,
        "dsr": 0.4,
        "fold_sharpes": [0.5],
        "metrics": METRICS,
    }
    data = {
        "split": {
            "insample_start": "2013-01-01",
            "insample_end": "2017-01-01",
            "holdout_start": "2017-01-02",
            "holdout_end": "2018-12-31",
        },
        "folds": [{}],
        "symbols": {"AAPL": {"source": "csv", "sha256": "f" * 64}},
    }
    config = {
        "directive": "momentum",
        "tickers": ["AAPL"],
        "universe_source": "--tickers",
        "timeframe": "1d",
        "start": "2013-01-01",
        "end": "2018-12-31",
        "seed": 4,
        "costs": {"commission_pct": 0.1, "slippage_pct": 0.05},
    }
    text = _render(
        config=config,
        verdict=_verdict(),
        decisions=[decision],
        synthesis=None,
        data=data,
        best_variant=_variant(),
        best_eval=best_eval,
        figures={},
        criteria_text="sharpe>=1",
    )
    assert "| best score | progress |" in text and "| 0.147 | 0.612 |" in text
    assert "Fuzzy score 0.147 (graded progress 0.612)" in text


def _scored_report(verdict, best_eval, *, spec_extra=None, tickers=("AAPL",), per_symbol=None):
    data = {
        "split": {
            "insample_start": "2013-01-01",
            "insample_end": "2017-01-01",
            "holdout_start": "2017-01-02",
            "holdout_end": "2018-12-31",
        },
        "folds": [{}],
        "symbols": {"AAPL": {"source": "csv", "sha256": "f" * 64}},
    }
    config = {
        "directive": "momentum",
        "tickers": list(tickers),
        "universe_source": "--tickers",
        "timeframe": "1d",
        "start": "2013-01-01",
        "end": "2018-12-31",
        "seed": 4,
        "costs": {"commission_pct": 0.1, "slippage_pct": 0.05},
    }
    variant = _variant()
    variant["spec"] = {**variant["spec"], **(spec_extra or {})}
    return _render(
        config=config,
        verdict=verdict,
        decisions=[],
        synthesis=None,
        data=data,
        best_variant=variant,
        best_eval=best_eval,
        figures={},
        criteria_text="sharpe>=1,max_drawdown_pct<=20,alpha_t>=2,min_trades>=30",
        holdout_per_symbol=per_symbol,
    )


ALPHA = {
    "t_stat": 2.95,
    "deflated_alpha": 0.924,
    "alpha_annual_pct": 26.5,
    "beta": 0.8,
    "benchmark": "buy-and-hold",
    "n_obs": 500,
}


def test_report_opens_with_the_verdict_line_and_tables_every_bar_for_the_best():
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.85,
        "dsr": 0.99,
        "spa_pvalue": 0.006,
        "fold_sharpes": [0.5],
        "metrics": METRICS,
        "alpha": ALPHA,
    }
    text = _scored_report(_verdict(spa_pvalue=0.02), best_eval)
    first = text.splitlines()[2]
    assert first == (
        "**ABANDON: no strategy passed. The closest, i01-v01-momentum-abc123 (momentum), met 7 "
        "of 8 criteria; it failed deflated alpha (0.924 < 0.95).**  "
    )
    assert "| criterion | value | threshold | pass | margin | attainment |" in text
    assert "| sharpe>=1 | 1.1 | >= 1 | pass | +0.1 | 1.10 |" in text
    assert "| min trades (round trips) | 40 | >= 30 | pass | +10 | 1.33 |" in text
    # the SPA p the gate saw when it chose the variant, not the run's last one
    assert "| SPA p-value | 0.006 | <= 0.05 | pass |" in text
    assert "| deflated alpha | 0.924 | >= 0.95 | **FAIL** | -0.026 |" in text
    assert "| trades (round trips: entry to flat) |" in text
    assert "Holdout:" not in text


def test_report_labels_a_portfolio_trade_count_as_fills():
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.85,
        "dsr": 0.99,
        "fold_sharpes": [0.5],
        "metrics": METRICS,
        "alpha": ALPHA,
    }
    text = _scored_report(
        _verdict(), best_eval, spec_extra={"scope": "portfolio"}, tickers=("AAPL", "MSFT")
    )
    assert "| trades (fills that reduce a position; round trips not recorded) |" in text
    assert "| min trades (fills) | 40 |" in text


def test_a_successful_report_says_whether_the_holdout_confirmed_alpha_and_warns_of_concentration():
    passed = dict(ALPHA, deflated_alpha=0.97)
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.85,
        "dsr": 0.99,
        "fold_sharpes": [0.5],
        "metrics": METRICS,
        "alpha": passed,
    }
    verdict = _verdict(
        verdict="SUCCESS",
        benchmark={"name": "buy-and-hold", "description": "b&h"},
        holdout_alpha={"t_stat": 1.2, "alpha_annual_pct": 4.0, "benchmark": "b", "n_obs": 9},
    )
    per_symbol = {
        "AAPL": dict(METRICS, exposure_pct=80.0),
        "MSFT": dict(METRICS, exposure_pct=10.0),
    }
    text = _scored_report(verdict, best_eval, tickers=("AAPL", "MSFT"), per_symbol=per_symbol)
    head = text.splitlines()[2:5]
    assert head[0].startswith("**SUCCESS: i01-v01-momentum-abc123 (momentum) passed every")
    assert head[1].startswith(
        "Holdout: alpha NOT confirmed (alpha 4% a year over buy-and-hold, HAC t 1.2"
    )
    assert head[2].startswith("**Concentration warning:** AAPL holds 89%")


def test_the_trial_chart_and_the_report_count_the_same_noise_trials(tmp_path):
    """The chart's threshold said 'expected max of 1041 noise trials' (the raw count) while
    the threshold was computed, and the report said, with the 17 effective ones."""
    from experiments.charts import trial_chart_counts, trial_sharpes_labels

    verdict = _verdict(
        n_trials=1041,
        n_trials_effective=17,
        deflated_by="effective",
        trial_sharpes={"threshold": 0.73, "best": 1.68, "n_trials": 17, "n_with_sharpe": 1041},
    )
    counts = trial_chart_counts(verdict)
    labels = trial_sharpes_labels(
        1041,
        threshold=counts["threshold"],
        n_trials=counts["n_trials"],
        n_deflation=counts["n_deflation"],
    )
    assert labels["threshold"] == "expected max of 17 noise trials: 0.73"
    assert labels["title"].startswith("Trial Sharpe ratios (1041 of 1041 counted)")
    best_eval = {
        "variant_id": "i01-v01-momentum-abc123",
        "score": 0.3,
        "dsr": 0.4,
        "fold_sharpes": [0.5],
        "metrics": METRICS,
    }
    text = _scored_report(verdict, best_eval)
    assert "the best of 17 pure-noise trials" in text
    path = plot_trial_sharpes([0.1, 0.5], **counts, path=tmp_path / "s.png")
    assert path.read_bytes().startswith(PNG)


def test_an_export_of_a_non_winner_carries_the_banner_and_what_it_failed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    winner, other = _variant("i02-v01-w", parent="i01-v01-momentum-abc123"), _variant()
    other["in_sample"] = {
        **other["in_sample"],
        "score": 0.85,
        "dsr": 0.99,
        "alpha": dict(ALPHA, deflated_alpha=0.9),
    }
    winner["in_sample"] = {
        **winner["in_sample"],
        "score": 0.9,
        "dsr": 0.99,
        "alpha": dict(ALPHA, deflated_alpha=0.97),
    }
    verdict = _verdict(
        verdict="SUCCESS",
        best_variant="i02-v01-w",
        spa_pvalue=0.01,
        figures={"in-sample": {"metrics": METRICS}},
    )
    (run / "variants.json").write_text(
        json.dumps({"i02-v01-w": winner, other["variant_id"]: other})
    )
    (run / "verdict.json").write_text(json.dumps(verdict))
    config = {
        "costs": {"commission_pct": 0.1},
        "tickers": ["AAPL"],
        "criteria": {"rules": [{"metric": "sharpe", "op": ">=", "threshold": 1.0}]},
    }
    manifest = build_manifest(run_id="run", config=config, data={}, seed=0, argv=[])
    (run / "manifest.json").write_text(json.dumps(manifest))

    dest = export_from_run(run, tmp_path / "x", other["variant_id"])
    readme = (dest / "README.md").read_text()
    banner = (
        "NOT A WINNER: run verdict SUCCESS; i01-v01-momentum-abc123 did not pass the gate: "
        "it failed deflated alpha (0.9 < 0.95)."
    )
    assert f"> **{banner}**" in readme.splitlines()
    assert (dest / "strategy.py").read_text().startswith(f"# {banner}\n")
    assert "| trades (round trips: entry to flat) |" in readme
    won = export_from_run(run, tmp_path / "w")
    assert "NOT A WINNER" not in (won / "README.md").read_text()
    assert "NOT A WINNER" not in (won / "strategy.py").read_text()
    # an ABANDON run's best is not a winner either
    (run / "verdict.json").write_text(json.dumps(dict(verdict, verdict="ABANDON")))
    best = export_from_run(run, tmp_path / "b")
    assert "NOT A WINNER: run verdict ABANDON; i02-v01-w" in (best / "README.md").read_text()
