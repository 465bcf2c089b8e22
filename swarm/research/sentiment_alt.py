"""The sentiment subagents' reading of the point-in-time alternative data (``context.alt``).

A daily bundle dated ``as_of`` decides at that session's close, so every table is cut at
``decision_time(as_of)``: a row known one minute later is invisible. A finding's evidence is
the reading's numbers; its interpretation cites the rows (file and dates), never their text.
A missing file abstains with the folder to add; a ticker without rows in the window abstains
saying so.
"""

from __future__ import annotations

import pandas as pd

from altdata import sentiment as alt_sentiment
from altdata.corpus import AltData
from altdata.pit import KNOWN_AT, AltTable
from altdata.sessions import decision_time
from swarm.research.context import ResearchContext, abstain
from swarm.research.features import FeatureBundle
from swarm.research.models import Domain, Finding

NEWS_TABLES = ("headlines", "headlines_subset")
ANALYST_TABLES = ("ratings", "surprises")


def _finding(
    bundle: FeatureBundle, spec: str, indicator: str, reading: alt_sentiment.Reading, text: str
) -> Finding:
    notes = "".join(f" {n.capitalize()}." for n in reading.notes)
    return Finding(
        symbol=bundle.symbol,
        type=Domain.SENTIMENT,
        specialization=spec,
        indicator=indicator,
        value=reading.signal,
        signal=reading.signal,
        confidence=reading.confidence,
        evidence=reading.evidence,
        as_of=bundle.as_of,
        interpretation=f"{text}{notes} Rows used (point in time): {reading.cite()}.",
    )


def _tables(alt: AltData, names: tuple[str, ...]) -> tuple[list[AltTable], list[str]]:
    found, missing = [], []
    for name in names:
        table = alt.table(name)
        (found.append(table) if table is not None else missing.append(alt.missing(name)))
    return found, missing


def _no_rows(symbol: str, tables: list[AltTable], t: pd.Timestamp, days: int, what: str) -> str:
    """Why ``symbol`` has nothing in the window: the latest row known before, or none at all."""
    latest = [tb.for_ticker(symbol, t)[KNOWN_AT].max() for tb in tables]
    latest = [x for x in latest if pd.notna(x)]
    files = ", ".join(tb.source for tb in tables)
    if latest:
        when = max(latest)
        return (
            f"no {symbol} {what} known in the {days} days to {t:%Y-%m-%d} ({files}); the "
            f"latest known is dated {when:%Y-%m-%d}, {(t - when).days} days earlier"
        )
    return f"no {symbol} {what} known by {t:%Y-%m-%d} in {files}"


def news(bundle: FeatureBundle, context: ResearchContext) -> Finding | None:
    """Headlines for the symbol from the alt-data files; None when neither file is there and
    the run has other headlines (the caller's path)."""
    assert context.alt is not None
    symbol, t = bundle.symbol, decision_time(bundle.as_of)
    tables, missing = _tables(context.alt, NEWS_TABLES)
    if not tables:
        if context.news_items:
            return None
        return abstain(
            symbol, Domain.SENTIMENT, "news", "headlines", "; ".join(missing), bundle.as_of
        )
    rows = pd.concat(
        [tb.for_ticker(symbol, t).assign(**{alt_sentiment.SOURCE: tb.source}) for tb in tables]
    ).sort_values(KNOWN_AT, kind="stable")
    days = context.news_window_days
    reading = alt_sentiment.news_reading(rows, source="", as_of=t, window_days=days)
    if reading is None:
        reason = _no_rows(symbol, tables, t, days, "headlines")
        return abstain(symbol, Domain.SENTIMENT, "news", "headlines", reason, bundle.as_of)
    ev = reading.evidence
    kinds = ", ".join(
        f"{k.removeprefix('news_events_')} {v:.0f}"
        for k, v in ev.items()
        if k.startswith("news_events_")
    )
    text = (
        f"{ev[f'news_rows_{days}d']:.0f} {symbol} headlines known in the {days} days to "
        f"{bundle.as_of}'s close, {ev[f'news_distinct_{days}d']:.0f} distinct stories "
        f"(events: {kinds}); recency-weighted finance-VADER compound "
        f"{ev['news_weighted_compound']:+.3f} (half-life {ev['news_half_life_days']:.0f} days), "
        f"{ev['news_share_positive'] * 100:.0f}% positive, "
        f"{ev['news_share_negative'] * 100:.0f}% negative."
    )
    return _finding(
        bundle,
        "news",
        "headline sentiment, de-duplicated and recency-weighted (VADER + finance lexicon)",
        reading,
        text,
    )


def analyst(bundle: FeatureBundle, context: ResearchContext) -> Finding | None:
    """Rating actions and earnings surprises; None when neither file is there and the run
    reads analyst actions from its headlines (the caller's path)."""
    assert context.alt is not None
    symbol, t = bundle.symbol, decision_time(bundle.as_of)
    tables, missing = _tables(context.alt, ANALYST_TABLES)
    if not tables:
        if context.analyst_from_headlines and context.news_items:
            return None
        return abstain(
            symbol, Domain.SENTIMENT, "analyst", "rating actions", "; ".join(missing), bundle.as_of
        )
    by_name = {tb.name: tb for tb in tables}
    ratings, surprises = by_name.get("ratings"), by_name.get("surprises")
    days = context.analyst_window_days
    reading = alt_sentiment.analyst_reading(
        ratings.for_ticker(symbol, t) if ratings else None,
        surprises.for_ticker(symbol, t) if surprises else None,
        as_of=t,
        window_days=days,
        ratings_source=ratings.source if ratings else "",
        surprises_source=surprises.source if surprises else "",
    )
    if reading is None:
        reason = _no_rows(symbol, tables, t, days, "rating actions or earnings surprises")
        if missing:
            reason += "; " + "; ".join(missing)
        return abstain(symbol, Domain.SENTIMENT, "analyst", "rating actions", reason, bundle.as_of)
    ev, parts = reading.evidence, []
    if f"analyst_actions_{days}d" in ev:
        parts.append(
            f"{ev[f'analyst_actions_{days}d']:.0f} rating actions in the {days} days to "
            f"{bundle.as_of}: {ev[f'analyst_upgrades_{days}d']:.0f} upgrades vs "
            f"{ev[f'analyst_downgrades_{days}d']:.0f} downgrades, "
            f"{ev[f'analyst_pt_raises_{days}d']:.0f} price-target raises vs "
            f"{ev[f'analyst_pt_cuts_{days}d']:.0f} cuts (score {ev['analyst_rating_score']:+.2f})"
        )
    else:
        parts.append(f"no rating actions in the {days} days to {bundle.as_of}")
    if "surprises_count" in ev:
        parts.append(
            f"the last {ev['surprises_count']:.0f} earnings reports: "
            f"{ev['surprises_beats']:.0f} beats, {ev['surprises_misses']:.0f} misses, mean "
            f"surprise {ev['surprises_mean_pct'] * 100:+.1f}% of consensus (score "
            f"{ev['surprises_score']:+.2f})"
        )
    text = f"{symbol}: " + "; ".join(parts) + f" -> net {reading.signal:+.2f}."
    if missing:
        text += " Not available: " + "; ".join(missing) + "."
    return _finding(
        bundle, "analyst", "analyst rating actions and earnings surprises", reading, text
    )


def options_flow(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The market-wide equity put/call ratio, contrarian: a MARKET-level finding."""
    assert context.alt is not None
    symbol, t = bundle.symbol, decision_time(bundle.as_of)
    table = context.alt.table("put_call")
    if table is None:
        return abstain(
            symbol,
            Domain.SENTIMENT,
            "options_flow",
            "put/call ratio",
            context.alt.missing("put_call"),
            bundle.as_of,
        )
    reading = alt_sentiment.put_call_reading(table.as_of(t), source=table.source, as_of=t)
    if isinstance(reading, str):
        return abstain(
            symbol, Domain.SENTIMENT, "options_flow", "put/call ratio", reading, bundle.as_of
        )
    col = alt_sentiment.PUT_CALL_COLUMN
    ev = reading.evidence
    z = ev[f"putcall_{col}_z"]
    mood = "fear" if z > 0 else "complacency"
    text = (
        f"MARKET-level finding (CBOE, all equities; the same for every symbol, no "
        f"{symbol}-specific option flow): the equity put/call ratio known at {bundle.as_of}'s "
        f"close is {ev[f'putcall_{col}']:.2f}, z {z:+.2f} against its previous year "
        f"(percentile {ev[f'putcall_{col}_pctile'] * 100:.0f}); read contrarian, {mood} -> "
        f"{reading.signal:+.2f}, confidence capped at {alt_sentiment.PUT_CALL_MAX_CONFIDENCE}."
    )
    return _finding(
        bundle,
        "options_flow",
        "market-wide equity put/call ratio (CBOE), contrarian",
        reading,
        text,
    )


def social(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """Cashtag tweet volume and tone for the symbol."""
    assert context.alt is not None
    symbol, t = bundle.symbol, decision_time(bundle.as_of)
    table = context.alt.table("tweets")
    if table is None:
        return abstain(
            symbol,
            Domain.SENTIMENT,
            "social",
            "tweets",
            context.alt.missing("tweets"),
            bundle.as_of,
        )
    rows = table.for_ticker(symbol, t)
    reading = alt_sentiment.social_reading(rows, source=table.source, as_of=t)
    if reading is None:
        days = alt_sentiment.SOCIAL_TONE_DAYS
        reason = _no_rows(symbol, [table], t, days, "tweets")
        return abstain(symbol, Domain.SENTIMENT, "social", "tweets", reason, bundle.as_of)
    ev = reading.evidence
    days = alt_sentiment.SOCIAL_TONE_DAYS
    volume = (
        f"volume z {ev['social_volume_z_7d']:+.2f} (7 days), {ev['social_volume_z_30d']:+.2f} "
        f"(30 days) against its own year"
        if "social_volume_z_7d" in ev
        else "too little history for a volume z-score"
    )
    text = (
        f"{ev[f'social_tweets_{days}d']:.0f} ${symbol} tweets in the {days} days to "
        f"{bundle.as_of}'s close ({ev[f'social_distinct_{days}d']:.0f} distinct), "
        f"{ev['social_tweets_30d']:.0f} in 30 days; {volume}; finance-VADER tone "
        f"{ev['social_compound_mean']:+.3f}, {ev['social_share_positive'] * 100:.0f}% positive, "
        f"{ev['social_share_negative'] * 100:.0f}% negative."
    )
    return _finding(bundle, "social", "cashtag tweet volume and tone", reading, text)
