"""The research half writes its own models into the graph state (issue 16): they survive the
checkpoint as models, the fan-in reducers still reset per round, and readers outside the
research half not yet moved to attributes still read them by key."""

from __future__ import annotations

import math

import pytest

from swarm.research.leader import lead
from swarm.research.models import (
    DataBrief,
    Domain,
    FactSheet,
    Finding,
    Regime,
    ResearchSynthesis,
    SuggestedParameters,
    SymbolBrief,
    SymbolRank,
)
from swarm.research.rounds import plan_round
from swarm.research.synthesis import synthesize_domain
from swarm.state import RESET, extend_or_reset

pytestmark = pytest.mark.unit


def _finding(symbol: str, domain: Domain, signal: float) -> Finding:
    return Finding(
        symbol=symbol,
        type=domain,
        specialization="trend",
        indicator="ADX_14",
        value=25.0,
        interpretation="x",
        signal=signal,
        confidence=0.6,
        evidence={"ADX_14": 25.0},
        as_of="2020-01-02",
    )


def _brief() -> DataBrief:
    sb = SymbolBrief(
        symbol="AAA",
        start="2019-01-02",
        end="2020-01-02",
        n_bars=252,
        price_high=2,
        price_low=1,
        price_median=1.5,
        price_p5=1.1,
        price_p95=1.9,
        total_return_pct=20,
        annual_volatility_pct=25,
        max_drawdown_pct=10,
        regime=Regime.TRENDING_UP,
        regime_confidence=0.8,
        coverage_pct=100,
        sha256="0" * 64,
    )
    sp = SuggestedParameters(
        family="momentum",
        lookback=50,
        bollinger_width=2.0,
        stop_loss_pct=4,
        take_profit_pct=8,
        max_hold_bars=20,
        reasoning="r",
        bb_period=30,
    )  # a study's extra
    study = plan_round(
        research_round=1,
        failure=None,
        done=[],
        symbols=["AAA"],
        window="2019-01-02..2020-01-02",
        current_lookback=None,
    )
    return DataBrief(
        symbols=[sb],
        regime=Regime.TRENDING_UP,
        regime_confidence=0.8,
        suggested=sp,
        study=study,
        studies=[study],
    )


def _research_values() -> dict:
    findings = [_finding("AAA", Domain.TECHNICAL, 0.5), _finding("AAA", Domain.SENTIMENT, -0.2)]
    sheets = [synthesize_domain(d, findings) for d in Domain]
    brief = _brief()
    synthesis = lead(sheets, brief)
    synthesis.universe_ranking = [SymbolRank(symbol="AAA", score=-0.2, n_views=1, basis="b")]
    return {
        "data_brief": brief,
        "findings": findings,
        "fact_sheets": sheets,
        "synthesis": synthesis,
        "failed_subagents": ["fundamental.cash_flow"],
    }


def test_research_models_come_back_from_the_checkpoint_as_models(
    caplog, checkpoint_round_trip
) -> None:
    values = _research_values()
    back = checkpoint_round_trip(values)
    assert "unregistered type" not in caplog.text and "Blocked" not in caplog.text
    for key in ("data_brief", "findings", "fact_sheets", "synthesis"):
        assert back[key] == values[key], key
    assert isinstance(back["data_brief"], DataBrief)
    assert back["data_brief"].suggested.bb_period == 30  # a study's extra parameter survives
    assert isinstance(back["synthesis"], ResearchSynthesis)
    assert all(isinstance(s, FactSheet) for s in back["synthesis"].fact_sheets)
    assert all(isinstance(f, Finding) for f in back["findings"])
    assert back["synthesis"].regime is Regime.TRENDING_UP


def test_the_fan_in_reducers_reset_per_round_and_keep_models() -> None:
    first = [_finding("AAA", Domain.TECHNICAL, 0.5)]
    second = [_finding("BBB", Domain.TECHNICAL, -0.5)]
    merged = extend_or_reset(extend_or_reset(None, first), second)
    assert merged == first + second and all(isinstance(f, Finding) for f in merged)
    assert extend_or_reset(merged, RESET) == []


def test_a_finding_without_a_finite_value_has_none() -> None:
    nan = _finding("AAA", Domain.FUNDAMENTAL, 0.1).model_copy(update={"value": None})
    assert nan.value is None
    assert Finding.model_validate({**nan.model_dump(), "value": math.nan}).value is None
    assert Finding.model_validate({**nan.model_dump(), "value": math.inf}).value is None
    assert Finding.model_validate({**nan.model_dump(), "value": 1.5}).value == 1.5


def test_both_run_contexts_provide_what_the_research_nodes_need() -> None:
    """swarm.research.runtime.ResearchRuntime is the one description: the develop loop's
    RunContext and the research command's ResearchRunContext both have every member."""
    import dataclasses

    from swarm.config import RunConfig
    from swarm.context import RunContext
    from swarm.research.__main__ import ResearchConfig, ResearchRunContext
    from swarm.research.runtime import ResearchRuntime, ResearchSettings

    needed = set(ResearchRuntime.__annotations__) | {"symbols", "insample_bars"}
    for cls in (RunContext, ResearchRunContext):
        have = {f.name for f in dataclasses.fields(cls)} | set(dir(cls))
        assert needed <= have, (cls.__name__, needed - have)
    settings = set(ResearchSettings.__annotations__)
    assert settings <= set(RunConfig.model_fields)
    assert settings <= {f.name for f in dataclasses.fields(ResearchConfig)}
