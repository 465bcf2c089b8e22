from __future__ import annotations

import pytest
from conftest import read_real_bars

from swarm.research.data_extractor import brief_symbol, build_data_brief
from swarm.research.features import compute_features
from swarm.research.models import (
    DataBrief,
    Domain,
    FactSheet,
    Finding,
    Regime,
    SuggestedParameters,
    SymbolBrief,
)
from swarm.research.subagents import ResearchContext, run_swarm
from swarm.research.synthesis import FAMILIES, lead, render_research_md, synthesize_domain


def f(
    spec: str,
    signal: float,
    conf: float,
    domain: Domain = Domain.TECHNICAL,
    abstained: bool = False,
    sym: str = "AAA",
) -> Finding:
    return Finding(
        symbol=sym,
        type=domain,
        specialization=spec,
        indicator=spec,
        value=signal,
        interpretation=f"{spec} reads {signal:+.2f}",
        signal=0.0 if abstained else signal,
        confidence=0.0 if abstained else conf,
        evidence={} if abstained else {"X_1": signal},
        as_of="2020-01-02",
        abstained=abstained,
        reason=f"no {spec} source" if abstained else None,
    )


def sheet(domain: Domain, signal: float, conf: float, n_abst: int = 0) -> FactSheet:
    specs = ["a", "b", "c", "d", "e"]
    return FactSheet(
        domain=domain,
        key_insights=["x"],
        confidence=conf,
        signal=signal,
        recommended_approach="x",
        n_findings=5,
        n_abstained=n_abst,
        subagents_ok=specs,
    )


def brief(regime: Regime = Regime.TRENDING_UP, family: str = "momentum") -> DataBrief:
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
        regime=regime,
        regime_confidence=0.8,
        coverage_pct=100,
        sha256="0" * 64,
    )
    sp = SuggestedParameters(
        family=family,
        lookback=50,
        bollinger_width=2.0,
        stop_loss_pct=4,
        take_profit_pct=8,
        max_hold_bars=20,
        reasoning="r",
    )
    return DataBrief(symbols=[sb], regime=regime, regime_confidence=0.8, suggested=sp)


@pytest.mark.unit
def test_confidence_weighted_vote_math() -> None:
    findings = [
        f("trend", 0.8, 0.5),
        f("momentum", -0.4, 0.25),
        f("volume", 0.0, 0.0, abstained=True),
        f("news", -1.0, 0.9, domain=Domain.SENTIMENT),  # other domain: ignored
    ]
    fs = synthesize_domain(Domain.TECHNICAL, findings)
    assert fs.signal == pytest.approx((0.5 * 0.8 - 0.25 * 0.4) / 0.75)  # 0.4
    consensus = (0.5 * 0.8 - 0.25 * 0.4) / (0.5 * 0.8 + 0.25 * 0.4)
    # The abstaining finding lowers the coverage, not the confidence in what was seen.
    assert fs.confidence == pytest.approx(0.375 * (0.5 + 0.5 * consensus))
    assert fs.coverage == pytest.approx(2 / 3)
    assert (fs.n_findings, fs.n_abstained) == (3, 1)
    assert len(fs.conflicting_evidence) == 1 and "momentum" in fs.conflicting_evidence[0]
    assert len(fs.supporting_evidence) == 1 and "trend" in fs.supporting_evidence[0]
    assert "+0.40" in fs.key_insights[0] and 2 <= len(fs.key_insights) <= 5
    assert fs.gaps == ["technical.volume abstained for 1 symbol(s): no volume source"]


@pytest.mark.unit
def test_all_abstained_domain() -> None:
    findings = [f(s, 0, 0, Domain.FUNDAMENTAL, abstained=True) for s in ("val", "cash")]
    fs = synthesize_domain(Domain.FUNDAMENTAL, findings)
    assert fs.confidence == 0 and fs.signal == 0
    assert any("no val source" in i for i in fs.key_insights)
    assert "2 of 2 findings abstained" in fs.recommended_approach


@pytest.mark.unit
def test_leader_confidence_drops_on_disagreement_and_ignores_abstention() -> None:
    tech = sheet(Domain.TECHNICAL, 0.6, 0.6)
    alone = lead([tech], brief())
    abstaining = sheet(Domain.FUNDAMENTAL, 0.0, 0.0, n_abst=5)
    with_abstain = lead([tech, abstaining], brief())
    assert with_abstain.confidence == pytest.approx(alone.confidence) == pytest.approx(0.6)
    assert with_abstain.signal == pytest.approx(alone.signal)
    against = sheet(Domain.SENTIMENT, -0.5, 0.6)
    disagree = lead([tech, against, abstaining], brief())
    assert disagree.confidence < alone.confidence
    assert disagree.confidence == pytest.approx(0.6 * (1 - 0.5))
    agree = lead([tech, sheet(Domain.SENTIMENT, 0.5, 0.6)], brief())
    assert agree.confidence > disagree.confidence
    assert "fundamentals unavailable offline" in " ".join(with_abstain.gaps)
    assert not with_abstain.degraded  # abstention is not failure


@pytest.mark.unit
def test_confidence_over_domains_with_data_coverage_apart() -> None:
    """1 of 3 domains has data: the research confidence is that domain's, the coverage 1/3."""
    tech = synthesize_domain(Domain.TECHNICAL, [f("trend", 0.6, 0.5), f("momentum", 0.4, 0.5)])
    fund = synthesize_domain(
        Domain.FUNDAMENTAL, [f(s, 0, 0, Domain.FUNDAMENTAL, abstained=True) for s in "ab"]
    )
    sent = synthesize_domain(
        Domain.SENTIMENT, [f(s, 0, 0, Domain.SENTIMENT, abstained=True) for s in "ab"]
    )
    syn = lead([tech, fund, sent], brief())
    assert syn.confidence == pytest.approx(tech.confidence) == pytest.approx(0.5)
    assert syn.coverage == pytest.approx(1 / 3)
    assert syn.finding_coverage == pytest.approx(2 / 6)
    assert "coverage 0.33 (1 of 3 domains with data" in syn.summary
    assert "coverage **0.33**" in render_research_md(syn, [])


@pytest.mark.unit
def test_degraded_when_fewer_than_three_subagents_ran() -> None:
    findings = [f("trend", 0.5, 0.5), f("momentum", 0.5, 0.5)]
    fs = synthesize_domain(Domain.TECHNICAL, findings, failed=["volume", "pattern", "volatility"])
    assert fs.subagents_ok == ["momentum", "trend"]
    syn = lead([fs], brief())
    assert syn.degraded and any("degraded" in g for g in syn.gaps)
    ok = [f(s, 0, 0, abstained=True) for s in ("a", "b", "c", "d", "e")]
    assert not lead([synthesize_domain(Domain.TECHNICAL, ok)], brief()).degraded


@pytest.mark.unit
def test_families_follow_technical_then_data_brief() -> None:
    tech = sheet(Domain.TECHNICAL, 0.6, 0.6)
    tech.recommended_families = ["breakout", "volatility"]
    syn = lead([tech], brief(Regime.RANGE_BOUND, "mean_reversion"))
    assert syn.recommended_families == ["breakout", "volatility", "mean_reversion"]
    assert syn.regime == Regime.RANGE_BOUND
    assert set(syn.recommended_families) <= set(FAMILIES)


@pytest.mark.integration
def test_end_to_end_real_data(daily_dir) -> None:
    bars = {s: read_real_bars(s, "2012-01-01", "2018-12-31") for s in ("AAPL", "MSFT")}
    run = run_swarm({s: compute_features(s, b) for s, b in bars.items()}, ResearchContext())
    assert len(run.findings) == 30 and not run.failed
    sheets = [
        synthesize_domain(d, run.findings, failed=run.failed_specializations(d)) for d in Domain
    ]
    db = build_data_brief(
        [brief_symbol(s, b, quality=None, sha256="0" * 64) for s, b in bars.items()]
    )
    syn = lead(sheets, db)
    tech = sheets[0]
    assert tech.confidence > 0 and tech.recommended_families
    assert sheets[1].confidence == 0  # no fundamentals provider
    assert syn.quality in {"high", "medium", "low"} and not syn.degraded
    assert syn.recommended_families and set(syn.recommended_families) <= set(FAMILIES)
    assert f"{syn.signal:+.2f}" in syn.summary and f"{syn.confidence:.2f}" in syn.summary
    md = render_research_md(syn, run.findings)
    assert "## Technical" in md and "### AAPL" in md and "## Gaps" in md
    trend = next(x for x in run.findings if x.specialization == "trend" and x.symbol == "MSFT")
    assert f"{trend.evidence['ADX_14']:.10g}" in md
