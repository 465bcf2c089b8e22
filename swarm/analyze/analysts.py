"""The analyst team's rules brains: market, sentiment, news and fundamentals, and the quorum.

Each analyst reads the TA-Lib feature bundle (and, for sentiment and news, headlines dated
on or before the date) through the research swarm's own subagents, and writes one note whose
``evidence`` holds every number its text cites. An analyst without data abstains with the
reason instead of guessing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from swarm.analyze.contracts import (
    ABSTAIN_CONFIDENCE,
    ABSTAIN_MODEL,
    RULES,
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    Point,
    Quorum,
    TimeHorizon,
)
from swarm.research import fundamental, sentiment, technical
from swarm.research.context import ResearchContext, clip, sign
from swarm.research.features import FeatureBundle
from swarm.research.models import Finding

QUORUM_REQUIRED = 3
EXPECTED_ANALYSTS = len(AnalystRole)
# The market analyst's components: the five technical specialists of the research swarm.
TECHNICAL = {
    "trend": technical.trend,
    "momentum": technical.momentum,
    "volatility": technical.volatility,
    "volume": technical.volume,
    "pattern": technical.pattern,
}
STRUCTURE_CONFIDENCE = 0.4  # price vs EMA20 and the last swings: one more, modest, vote
STRUCTURE_KEYS = ("CLOSE", "EMA_20", "SWING_HIGH_5", "SWING_LOW_5", "GAP_PCT")
FORECAST_KEYS = ("FORECAST_MID_60_10", "FORECAST_UPPER_60_10", "FORECAST_LOWER_60_10")
FORECAST_MID, FORECAST_BARS = "FORECAST_MID_60_10", 10  # the band's mid, forecast 10 bars ahead
EPS_SURPRISE = "surprises_latest_pct"  # the last EPS surprise, a fraction of consensus
SIDE_DEADBAND = 0.05  # a stance within +/-0.05 of zero took no side (the debate's dead band)

AnalystBrain = Callable[[FeatureBundle, ResearchContext, AnalysisConfig], AnalystNote]


def _abstain(role: AnalystRole, bundle: FeatureBundle, reason: str) -> AnalystNote:
    return AnalystNote(
        role=role,
        ticker=bundle.symbol,
        as_of=bundle.as_of,
        summary=f"Abstained: {reason}.",
        confidence=ABSTAIN_CONFIDENCE,
        abstained=True,
        reason=reason,
        model_used=ABSTAIN_MODEL,
    )


def expectation_gap(evidence: dict[str, float]) -> float | None:
    """The last EPS surprise vs consensus (a fraction), when the evidence holds one."""
    return evidence.get(EPS_SURPRISE)


def forecast_gap(bundle: FeatureBundle) -> float | None:
    """The close vs the band's mid forecast for today, made ``FORECAST_BARS`` bars ago: how
    far the price came in from what the naive drift expected (a fraction). None before the
    band has a forecast that old."""
    pos = bundle.n_bars - 1 - FORECAST_BARS
    if pos < 0 or FORECAST_MID not in bundle.data:
        return None
    expected = float(bundle.data[FORECAST_MID][pos])
    close = bundle.value("CLOSE")
    if not (math.isfinite(expected) and expected > 0 and math.isfinite(close)):
        return None
    return round(close / expected - 1.0, 6)


def _pool(findings: Sequence[Finding]) -> tuple[float, float]:
    """Confidence-weighted stance and mean confidence of the findings that did not abstain."""
    live = [f for f in findings if not f.abstained and f.confidence > 0]
    if not live:
        return 0.0, 0.0
    weight = sum(f.confidence for f in live)
    return clip(sum(f.signal * f.confidence for f in live) / weight), weight / len(live)


def _structure(bundle: FeatureBundle) -> tuple[float, dict[str, float], list[str]]:
    """Close vs EMA20 and vs the last confirmed swing high and low; the opening gap."""
    ev = bundle.snapshot(STRUCTURE_KEYS)
    close = ev["CLOSE"]
    points: list[str] = []
    votes: list[float] = []
    if "EMA_20" in ev:
        above = close > ev["EMA_20"]
        votes.append(1.0 if above else -1.0)
        points.append(
            f"Close {close:.2f} is {'above' if above else 'below'} EMA20 {ev['EMA_20']:.2f}."
        )
    hi, lo = ev.get("SWING_HIGH_5"), ev.get("SWING_LOW_5")
    if hi is not None and close > hi:
        votes.append(1.0)
        points.append(f"Close {close:.2f} broke above the last swing high {hi:.2f}.")
    elif lo is not None and close < lo:
        votes.append(-1.0)
        points.append(f"Close {close:.2f} broke below the last swing low {lo:.2f}.")
    elif hi is not None and lo is not None:
        votes.append(0.0)
        points.append(
            f"Close {close:.2f} sits between the last swing low {lo:.2f} and high {hi:.2f}."
        )
    if "GAP_PCT" in ev and abs(ev["GAP_PCT"]) >= 1.0:
        points.append(f"The last bar opened with a gap of {ev['GAP_PCT']:+.2f}%.")
    return (sum(votes) / len(votes) if votes else 0.0), ev, points


def _forecast(bundle: FeatureBundle) -> tuple[dict[str, float], str | None]:
    ev = bundle.snapshot(FORECAST_KEYS)
    if len(ev) < 3:
        return {}, None
    text = (
        f"Drift-plus-volatility band (60-bar estimate, 10 bars ahead): mid "
        f"{ev['FORECAST_MID_60_10']:.2f}, 95% band {ev['FORECAST_LOWER_60_10']:.2f} to "
        f"{ev['FORECAST_UPPER_60_10']:.2f} (a naive baseline, evidence only)."
    )
    return ev, text


def market(bundle: FeatureBundle, rctx: ResearchContext, cfg: AnalysisConfig) -> AnalystNote:
    """The five technical specialists pooled by confidence, plus price structure."""
    findings = {name: brain(bundle, rctx) for name, brain in TECHNICAL.items()}
    tech_stance, tech_conf = _pool(list(findings.values()))
    struct, struct_ev, struct_points = _structure(bundle)
    fc_ev, fc_text = _forecast(bundle)
    n_live = sum(not f.abstained for f in findings.values())
    if n_live == 0:
        return _abstain(
            AnalystRole.MARKET,
            bundle,
            "every technical specialist abstained: "
            + "; ".join(f.reason or "" for f in findings.values()),
        )
    weight = tech_conf * n_live + STRUCTURE_CONFIDENCE
    stance = clip((tech_stance * tech_conf * n_live + struct * STRUCTURE_CONFIDENCE) / weight)
    coverage = n_live / len(findings)
    agree = sum(sign(f.signal) == sign(stance) for f in findings.values() if not f.abstained)
    confidence = clip(tech_conf * coverage * (0.6 + 0.4 * agree / n_live), 0, 0.9)
    evidence: dict[str, float] = {}
    for f in findings.values():
        evidence.update(f.evidence)
    evidence.update(struct_ev)
    evidence.update(fc_ev)
    subscores = {name: round(f.signal, 4) for name, f in findings.items() if not f.abstained}
    subscores["structure"] = round(struct, 4)
    ranked = sorted(
        (f for f in findings.values() if not f.abstained),
        key=lambda f: -abs(f.signal) * f.confidence,
    )
    points = [_point(f) for f in ranked]
    if struct_points:
        points.append(
            Point(
                name="structure",
                stance=clip(struct),
                confidence=STRUCTURE_CONFIDENCE,
                text=" ".join(struct_points),
                cited=struct_ev,
            )
        )
    if fc_text:
        drift = fc_ev["FORECAST_MID_60_10"] / struct_ev["CLOSE"] - 1.0
        points.append(
            Point(
                name="forecast", stance=clip(10 * drift), confidence=0.2, text=fc_text, cited=fc_ev
            )
        )
    key_points = [f"{p.name}: {p.text}" for p in points]
    lean = "bullish" if stance > 0.05 else "bearish" if stance < -0.05 else "neutral"
    summary = (
        f"Technical picture {lean} ({stance:+.2f}) from {n_live} of {len(findings)} "
        f"specialists; strongest: {ranked[0].specialization} ({ranked[0].signal:+.2f})."
    )
    return AnalystNote(
        role=AnalystRole.MARKET,
        ticker=bundle.symbol,
        as_of=bundle.as_of,
        stance=stance,
        confidence=confidence,
        summary=summary,
        key_points=key_points,
        subscores=subscores,
        evidence=evidence,
        points=points,
        time_horizon=TimeHorizon.WEEKS,
        model_used=RULES,
        expectation_gap=forecast_gap(bundle),
    )


def _point(f: Finding) -> Point:
    return Point(
        name=f.specialization,
        stance=f.signal,
        confidence=f.confidence,
        text=f.interpretation,
        cited=dict(f.evidence),
    )


def _note_from_findings(
    role: AnalystRole, bundle: FeatureBundle, findings: Sequence[Finding], horizon: TimeHorizon
) -> AnalystNote:
    live = [f for f in findings if not f.abstained]
    if not live:
        reasons = "; ".join(f"{f.specialization}: {f.reason}" for f in findings)
        return _abstain(role, bundle, reasons)
    stance, conf = _pool(live)
    evidence: dict[str, float] = {}
    for f in live:
        evidence.update(f.evidence)
    gaps = [f"{f.specialization} abstained: {f.reason}" for f in findings if f.abstained]
    return AnalystNote(
        role=role,
        ticker=bundle.symbol,
        as_of=bundle.as_of,
        stance=stance,
        confidence=clip(conf * len(live) / len(findings), 0, 0.8),
        summary=f"{role.value.capitalize()} read {stance:+.2f} from {len(live)} source(s).",
        key_points=[f.interpretation for f in live] + gaps,
        subscores={f.specialization: round(f.signal, 4) for f in live},
        evidence=evidence,
        points=[_point(f) for f in live],
        time_horizon=horizon,
        model_used=RULES,
        expectation_gap=expectation_gap(evidence),
    )


def sentiment_social(
    bundle: FeatureBundle, rctx: ResearchContext, cfg: AnalysisConfig
) -> AnalystNote:
    """Social feeds (a provider hook; none offline) and analyst rating actions found in the
    headlines of the last ``sentiment_window_days``."""
    findings = [
        sentiment.run_hooked("social", bundle, rctx),
        sentiment.run_hooked("analyst", bundle, rctx),
    ]
    return _note_from_findings(AnalystRole.SENTIMENT, bundle, findings, TimeHorizon.WEEKS)


def news(bundle: FeatureBundle, rctx: ResearchContext, cfg: AnalysisConfig) -> AnalystNote:
    """Headline tone over the last ``news_window_days`` (finance-VADER), never after the date."""
    return _note_from_findings(
        AnalystRole.NEWS, bundle, [sentiment.news(bundle, rctx)], TimeHorizon.DAYS
    )


def fundamentals(bundle: FeatureBundle, rctx: ResearchContext, cfg: AnalysisConfig) -> AnalystNote:
    """The research swarm's five fundamental subagents on point-in-time alternative data
    (``rctx.alt``: rows known at the date's close). Without it, abstains: no point-in-time
    fundamentals exist offline, and today's figures (what yfinance serves) would leak the
    future into a past date."""
    if rctx.alt is not None:
        findings = [
            fundamental.run_fundamental_pit(s, bundle, rctx.alt, rctx.price_basis)
            for s in fundamental.PIT_FACTS
        ]
        return _note_from_findings(AnalystRole.FUNDAMENTALS, bundle, findings, TimeHorizon.MONTHS)
    reason = (
        f"no point-in-time fundamentals for {bundle.symbol} as of {bundle.as_of} offline; "
        "current figures (yfinance) would be lookahead for a past date"
    )
    return _abstain(AnalystRole.FUNDAMENTALS, bundle, reason)


RULES_ANALYSTS: dict[AnalystRole, AnalystBrain] = {
    AnalystRole.MARKET: market,
    AnalystRole.SENTIMENT: sentiment_social,
    AnalystRole.NEWS: news,
    AnalystRole.FUNDAMENTALS: fundamentals,
}


def quorum(
    notes: Sequence[AnalystNote],
    *,
    failed: Sequence[AnalystRole] = (),
    required: int = QUORUM_REQUIRED,
    expected: int = EXPECTED_ANALYSTS,
) -> Quorum:
    """At least ``required`` of ``expected`` analysts handed in a note. An abstention is a
    note (the analyst looked and said why it cannot tell); a failure is not."""
    roles = {n.role for n in notes}
    return Quorum(
        required=required,
        expected=expected,
        notes=len(roles),
        abstained=sum(n.abstained for n in notes),
        sided=sum(took_side(n) for n in notes),
        failed=sorted(set(failed)),
        met=len(roles) >= required,
    )


def took_side(note: AnalystNote) -> bool:
    """Not abstaining, some confidence, a stance beyond the dead band: a side was taken."""
    return not note.abstained and note.confidence > 0 and abs(note.stance) > SIDE_DEADBAND
