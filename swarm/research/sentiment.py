"""Rules brains of the five sentiment subagents.

With point-in-time alternative data (``context.alt``), news, analyst, social and options_flow
read it (``swarm.research.sentiment_alt``: only rows known by the close of ``as_of``);
without it they read the run's news items and provider hooks. Only items dated on or before
``as_of`` are ever read. Headline text never leaves this
module: findings carry counts and scores.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from swarm.research import sentiment_alt
from swarm.research.context import ResearchContext, abstain, clip
from swarm.research.features import FeatureBundle
from swarm.research.models import Domain, Finding
from swarm.research.news import (
    NEGATIVE_THRESHOLD,
    POSITIVE_THRESHOLD,
    headlines_for,
    rating_actions,
    score_headline,
)

# What a real source for each hook would be; used in abstention reasons.
SOURCE_NEEDED = {
    "social": "social-media mention/sentiment feed (e.g. StockTwits, Reddit)",
    "analyst": "analyst rating-action feed",
    "options_flow": "option chains for put/call volume and open interest",
    "insider": "insider-transaction filings (SEC Form 4)",
}
# Form 4 filings are public only online (SEC EDGAR); the offline corpus has none.
INSIDER_OFFLINE = (
    "no insider-transaction filings (SEC Form 4) available offline: Form 4 is an online "
    "source (SEC EDGAR), not in the offline corpus"
)
ALT_READERS = {
    "analyst": sentiment_alt.analyst,
    "social": sentiment_alt.social,
    "options_flow": sentiment_alt.options_flow,
}


def _latest_before(context: ResearchContext, symbol: str, as_of: dt.date) -> dt.date | None:
    dates = [it.date for it in headlines_for(context.news_items, symbol, as_of=as_of)]
    return max(dates) if dates else None


def _no_news_reason(context: ResearchContext, symbol: str, as_of: dt.date, days: int) -> str:
    latest = _latest_before(context, symbol, as_of)
    if latest is not None:
        return (
            f"no {symbol} headlines in the {days} days to {as_of}; the latest available "
            f"is dated {latest} ({(as_of - latest).days} days earlier)"
        )
    n = len(context.news_items)
    if n == 0:
        return "no news source loaded (no headlines available offline)"
    return f"none of the {n} loaded headlines is about {symbol} and dated on or before {as_of}"


def news(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The news subagent: the tone of the symbol's headlines in the window (market-wide news when it
    has none), abstaining without any."""
    if context.alt is not None:
        found = sentiment_alt.news(bundle, context)
        if found is not None:
            return found
    symbol, as_of = bundle.symbol, dt.date.fromisoformat(bundle.as_of)
    days = context.news_window_days
    start = as_of - dt.timedelta(days=days)
    items = headlines_for(context.news_items, symbol, as_of=as_of, start=start)
    if not items:
        reason = _no_news_reason(context, symbol, as_of, days)
        market = _market_wide(context, as_of=as_of, start=start)
        if market:
            return _market_news(bundle, market, start=start, days=days, why=reason)
        return abstain(symbol, Domain.SENTIMENT, "news", "headlines", reason, bundle.as_of)
    scores = [score_headline(it.headline) for it in items]
    n = len(scores)
    mean = sum(scores) / n
    pos = sum(s > POSITIVE_THRESHOLD for s in scores) / n
    neg = sum(s < NEGATIVE_THRESHOLD for s in scores) / n
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    # More headlines and a one-sided tone make the read more reliable.
    confidence = clip((0.15 + 0.45 * min(n, 20) / 20) * (0.5 + 0.5 * abs(pos - neg)), 0, 0.7)
    sources = sorted({it.source for it in items})
    ev = {
        f"news_count_{days}d": float(n),
        "news_compound_mean": mean,
        "news_compound_sd": sd,
        "news_share_positive": pos,
        "news_share_negative": neg,
        "news_days_since_latest": float((as_of - max(it.date for it in items)).days),
    }
    interp = (
        f"{n} {symbol} headlines from {start} to {as_of} ({', '.join(sources)}) scored a mean "
        f"finance-VADER compound of {mean:+.3f} (sd {sd:.3f}); {pos * 100:.0f}% positive, "
        f"{neg * 100:.0f}% negative."
    )
    return Finding(
        symbol=symbol,
        type=Domain.SENTIMENT,
        specialization="news",
        indicator="headline sentiment (VADER + finance lexicon)",
        value=mean,
        interpretation=interp,
        signal=clip(mean),
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


MARKET_MAX_CONFIDENCE = 0.2  # market-wide tone says little about one stock


def _market_wide(context: ResearchContext, *, as_of: dt.date, start: dt.date) -> list:
    """Items without a ticker (e.g. an RSS business feed) dated in [start, as_of]."""
    return [it for it in context.news_items if it.ticker is None and start <= it.date <= as_of]


def _market_news(
    bundle: FeatureBundle, items: list, *, start: dt.date, days: int, why: str
) -> Finding:
    """No headline about the symbol, but market-wide ones: a weak, capped read of the tape."""
    scores = [score_headline(it.headline) for it in items]
    n = len(scores)
    mean = sum(scores) / n
    pos = sum(s > POSITIVE_THRESHOLD for s in scores) / n
    neg = sum(s < NEGATIVE_THRESHOLD for s in scores) / n
    as_of = dt.date.fromisoformat(bundle.as_of)
    confidence = clip(
        (0.05 + 0.15 * min(n, 30) / 30) * (0.5 + 0.5 * abs(pos - neg)), 0, MARKET_MAX_CONFIDENCE
    )
    ev = {
        f"news_market_count_{days}d": float(n),
        "news_market_compound_mean": mean,
        "news_market_share_positive": pos,
        "news_market_share_negative": neg,
    }
    sources = sorted({it.source for it in items})
    interp = (
        f"No {bundle.symbol}-specific headlines ({why}); {n} market-wide headlines from "
        f"{start} to {as_of} ({', '.join(sources)}) scored a mean finance-VADER compound of "
        f"{mean:+.3f}, {pos * 100:.0f}% positive, {neg * 100:.0f}% negative: market tone "
        f"only, confidence capped at {MARKET_MAX_CONFIDENCE}."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.SENTIMENT,
        specialization="news",
        indicator="market-wide headline sentiment (VADER + finance lexicon)",
        value=mean,
        interpretation=interp,
        signal=clip(mean * 0.5),
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def _analyst_from_headlines(bundle: FeatureBundle, context: ResearchContext) -> Finding | None:
    symbol, as_of = bundle.symbol, dt.date.fromisoformat(bundle.as_of)
    days = context.analyst_window_days
    start = as_of - dt.timedelta(days=days)
    items = headlines_for(context.news_items, symbol, as_of=as_of, start=start)
    totals: dict[str, int] = {}
    for it in items:
        for k, v in rating_actions(it.headline).items():
            totals[k] = totals.get(k, 0) + v
    n_actions = sum(totals.values())
    if n_actions == 0:
        return None
    # Rating changes weigh most, target moves half, reiterations a quarter.
    net = (
        (totals["upgrades"] - totals["downgrades"])
        + 0.5 * (totals["pt_raises"] - totals["pt_cuts"])
        + 0.25 * (totals["positive_ratings"] - totals["negative_ratings"])
    )
    weight = (
        totals["upgrades"]
        + totals["downgrades"]
        + 0.5 * (totals["pt_raises"] + totals["pt_cuts"])
        + 0.25 * (totals["positive_ratings"] + totals["negative_ratings"])
    )
    signal = clip(net / weight) if weight else 0.0
    confidence = clip(0.1 + 0.4 * min(n_actions, 15) / 15, 0, 0.5)
    ev = {f"analyst_{k}_{days}d": float(v) for k, v in totals.items()}
    ev["analyst_net_score"] = signal
    interp = (
        f"{n_actions} rating actions in {len(items)} {symbol} headlines from {start} to "
        f"{as_of}: {totals['upgrades']} upgrades vs {totals['downgrades']} downgrades, "
        f"{totals['pt_raises']} price-target raises vs {totals['pt_cuts']} cuts, "
        f"{totals['positive_ratings']} positive vs {totals['negative_ratings']} negative "
        f"rating reiterations -> net {signal:+.2f}."
    )
    return Finding(
        symbol=symbol,
        type=Domain.SENTIMENT,
        specialization="analyst",
        indicator="analyst rating actions in headlines",
        value=signal,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def _from_provider(spec: str, reading: dict[str, Any], bundle: FeatureBundle) -> Finding | str:
    """A provider reading as a Finding, or the reason to abstain."""
    when = reading.get("as_of")
    if when is not None and str(when)[:10] > bundle.as_of:
        return f"{spec} reading dated {str(when)[:10]} is after as_of {bundle.as_of} (lookahead)"
    ev = {
        str(k): float(v)
        for k, v in (reading.get("evidence") or {}).items()
        if isinstance(v, int | float) and math.isfinite(v)
    }
    try:
        signal = clip(float(reading["signal"]))
        confidence = clip(float(reading.get("confidence", 0.3)), 0, 1)
    except (KeyError, TypeError, ValueError):
        return f"{spec} provider reading has no numeric signal"
    value = reading.get("value")
    value = float(value) if isinstance(value, int | float) else None
    source = str(reading.get("source", spec))
    cited = ", ".join(f"{k}={v:.4g}" for k, v in list(ev.items())[:6])
    interp = (
        f"{source}: signal {signal:+.2f} at confidence {confidence:.2f}"
        + (f" from {cited}" if cited else "")
        + "."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.SENTIMENT,
        specialization=spec,
        indicator=source,
        value=value,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def run_hooked(spec: str, bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """social / analyst / options_flow / insider: a provider hook, else abstain."""
    symbol, as_of = bundle.symbol, bundle.as_of
    provider = context.providers.get(spec)
    if provider is not None:
        try:
            reading = provider(symbol, as_of)
        except Exception as exc:  # a data source failing is a gap, not a subagent crash
            reason = f"{spec} provider failed for {symbol} ({type(exc).__name__})"
            return abstain(symbol, Domain.SENTIMENT, spec, spec, reason, as_of)
        if reading:
            out = _from_provider(spec, reading, bundle)
            if isinstance(out, Finding):
                return out
            return abstain(symbol, Domain.SENTIMENT, spec, spec, out, as_of)
    if context.alt is not None and spec in ALT_READERS:
        alt_found = ALT_READERS[spec](bundle, context)
        if alt_found is not None:
            return alt_found
    if spec == "analyst" and context.analyst_from_headlines and context.news_items:
        found = _analyst_from_headlines(bundle, context)
        if found is not None:
            return found
        days = context.analyst_window_days
        reason = (
            f"no analyst rating actions in {symbol} headlines in the {days} days to {as_of} "
            f"and no {SOURCE_NEEDED[spec]} configured"
        )
        return abstain(symbol, Domain.SENTIMENT, spec, "rating actions", reason, as_of)
    where = "offline" if context.offline else "in this run"
    reason = f"no {SOURCE_NEEDED[spec]} available {where}"
    if spec == "insider" and context.offline:
        reason = INSIDER_OFFLINE
    return abstain(symbol, Domain.SENTIMENT, spec, spec, reason, as_of)
