"""What each source contributes to the news researcher's archive, point in time.

One ``ArchiveEntry`` per headline, rating action, earnings report and ticker-day of cashtag
tweets, and one per day of the market-wide CBOE put/call ratios (a table row, no body). Each
alt-data table is cut with ``AltTable.for_ticker`` at the decision time of the symbol's
``as_of`` (market-wide rows at the earliest ``as_of``), so nothing known after it is here.

Summaries and key facts are built from the parsed fields only. Third-party text (headlines,
tweets, a firm name parsed from a headline) stays in ``untrusted`` for a fence, or passes
``plain`` (a short run of letters, digits and punctuation) before it reaches a sentence.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

import pandas as pd

from altdata.corpus import AFTER_CLOSE, AltData
from altdata.pit import KNOWN_AT, AltTable
from altdata.sessions import decision_time, session_close, session_on_or_after
from swarm.research.news import (
    NEGATIVE_THRESHOLD,
    POSITIVE_THRESHOLD,
    NewsItem,
    rating_actions,
    score_headline,
    to_utc,
)

HEADLINE_TABLES = ("headlines", "headlines_subset", "business_news")
SURPRISE_WINDOW_DAYS = 400  # the last four quarterly reports, which the analyst subagent reads
TOP_TWEETS = 3  # most-followed tweets quoted in a ticker-day body


class SourceKind(StrEnum):
    HEADLINE = "headline"
    RATING = "rating action"
    SURPRISE = "earnings surprise"
    TWEETS = "cashtag tweets"
    PUT_CALL = "put/call (market-wide)"


@dataclass(frozen=True)
class ArchiveEntry:
    """One archived item. ``cell``: the day table's description (derived, or a headline shown
    as a literal when ``cell_is_untrusted``); ``slug`` None: a table row without a body."""

    kind: SourceKind
    day: dt.date  # the source's own date column: the day table the item is listed in
    known_at: pd.Timestamp  # UTC, the moment the item became known
    ticker: str | None  # None: market-wide
    source: str
    cell: str
    slug: str | None
    summary: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    unknown: tuple[str, ...] = ()
    untrusted: str | None = None
    cell_is_untrusted: bool = False


def plain(text: object, limit: int = 60) -> str:
    """A parsed field (a firm, a rating) safe for a sentence: letters, digits, spaces and
    ``&.,'()/_-`` only, at most ``limit`` characters; '' for a missing value."""
    if text is None or (isinstance(text, float) and pd.isna(text)):
        return ""
    kept = re.sub(r"[^A-Za-z0-9 &.,'()/_-]+", " ", str(text))
    return " ".join(kept.split())[:limit].strip()


def _number(x: object) -> float | None:
    try:
        value = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if pd.isna(value) else value


def _money(x: float) -> str:
    return f"${x:,.0f}" if float(x).is_integer() else f"${x:,.2f}"


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8]


def _words(text: str, n: int = 6) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return "-".join(words.split("-")[:n])[:48].strip("-")


def _when(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def tone_label(score: float) -> str:
    """ "positive", "negative" or "neutral" for a finance-VADER score."""
    if score >= POSITIVE_THRESHOLD:
        return "positive"
    return "negative" if score <= NEGATIVE_THRESHOLD else "neutral"


# --------------------------------------------------------------------------- the cut


def cutoffs(as_of: dict[str, dt.date]) -> dict[str, pd.Timestamp]:
    """Each symbol's decision moment (its ``as_of`` session's close)."""
    return {s: decision_time(d) for s, d in as_of.items()}


def _rows(table: AltTable, symbol: str, t: pd.Timestamp, window_days: int | None) -> pd.DataFrame:
    rows = table.for_ticker(symbol, t)
    if window_days is not None:
        rows = rows[rows[KNOWN_AT] >= t - pd.Timedelta(days=window_days)]
    return rows


# --------------------------------------------------------------------------- headlines


def headline_slug(item: NewsItem) -> str:
    """Stable, unique file name: date, ticker (or 'market'), first words, content hash."""
    words = re.sub(r"[^a-z0-9]+", "-", item.headline.lower()).strip("-")
    words = "-".join(words.split("-")[:8])[:60].strip("-") or "headline"
    key = f"{item.date}|{item.datetime_utc}|{item.ticker}|{item.source}|{item.headline}"
    return f"{item.date}-{(item.ticker or 'market').lower()}-{words}-{_digest(key)}"


def headline_known_at(item: NewsItem) -> pd.Timestamp:
    """The item's timestamp; a date alone is read as known after that day's close."""
    if item.datetime_utc:
        return pd.Timestamp(item.datetime_utc, tz="UTC")
    return session_close(session_on_or_after(item.date)) + AFTER_CLOSE


def alt_headline_items(alt: AltData, tickers: set[str]) -> list[NewsItem]:
    """The alt-data headline files as news items, for ``tickers`` and market-wide only."""
    items: list[NewsItem] = []
    for name in HEADLINE_TABLES:
        table = alt.table(name)
        if table is None:
            continue
        frame = table.frame
        if table.per_ticker:
            frame = frame[frame["ticker"].isin(tickers)]
        stem = table.path.stem
        for row in frame.to_dict("records"):
            headline = plain_text(row.get("headline"))
            if not headline:
                continue
            stamp = row.get("datetime_utc") if "datetime_utc" in row else row.get("datetime")
            items.append(
                NewsItem(
                    date=dt.date.fromisoformat(str(row["date"])[:10]),
                    datetime_utc=to_utc(plain_text(stamp) or None),
                    ticker=plain_text(row.get("ticker")).upper() or None,
                    headline=headline,
                    source=stem,
                    description=plain_text(row.get("description")) or None,
                    url=plain_text(row.get("url")) or None,
                )
            )
    return items


def plain_text(x: object) -> str:
    """A CSV cell as text ('' when missing); the text itself is not altered."""
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return ""
    return str(x).strip()


def select_headlines(
    items: list[NewsItem], as_of: dict[str, dt.date], *, window_days: int | None = None
) -> list[NewsItem]:
    """Headlines about one of the symbols known by that symbol's decision time, or
    market-wide ones known by the earliest, inside ``window_days`` before it; de-duplicated."""
    if not as_of:
        return []
    limits = cutoffs(as_of)
    earliest_sym = min(as_of, key=lambda s: as_of[s])
    chosen: dict[str, NewsItem] = {}
    for it in items:
        sym = it.ticker or earliest_sym
        if it.ticker and it.ticker not in as_of:
            continue
        day_limit = as_of[sym]
        if it.date > day_limit or headline_known_at(it) > limits[sym]:
            continue
        if window_days is not None and it.date < day_limit - dt.timedelta(days=window_days):
            continue
        chosen.setdefault(headline_slug(it), it)
    out = list(chosen.values())
    out.sort(key=lambda it: (it.date, it.datetime_utc or "", it.ticker or "", it.headline))
    return out


def headline_entry(item: NewsItem) -> ArchiveEntry:
    """A headline as an archive entry: its tone, rating-action words, when it was known, and what
    the source cannot say."""
    score = score_headline(item.headline)
    actions = [k.replace("_", " ") for k, v in rating_actions(item.headline).items() if v]
    about = item.ticker or "the market (no ticker)"
    summary = (
        f"A headline about {about} (source: {plain(item.source)}), scored "
        f"{tone_label(score)} ({score:+.2f}) by finance-VADER"
        + (f"; rating-action words: {', '.join(actions)}." if actions else ".")
    )
    known = headline_known_at(item)
    unknown = ["the source carries headlines only; no article body"]
    if item.description:
        unknown[0] = "the source carries a headline and a short RSS description; no article body"
    if not item.datetime_utc:
        unknown.append("the publication time: the date alone is read as after that day's close")
    if item.ticker is None:
        unknown.append("which stocks the item concerns: it has no ticker")
    unknown.append("whether the story repeats one published earlier is not checked here")
    body = f"headline: {item.headline}"
    if item.description:
        body += f"\ndescription: {item.description}"
    if item.url:
        body += f"\nurl: {item.url}"
    facts = (
        ("date", item.date.isoformat()),
        ("known at", _when(known) if item.datetime_utc else f"{_when(known)} (date only)"),
        ("ticker", item.ticker or "market-wide (no ticker)"),
        ("source", plain(item.source)),
        ("finance-VADER compound", f"{score:+.4f}"),
        ("rating-action words", ", ".join(actions) or "none"),
    )
    return ArchiveEntry(
        SourceKind.HEADLINE,
        item.date,
        known,
        item.ticker,
        item.source,
        item.headline,
        headline_slug(item),
        summary,
        facts,
        tuple(unknown),
        body,
        cell_is_untrusted=True,
    )


# --------------------------------------------------------------------------- analysts

_ACTION_VERB = {
    "upgrades": "upgraded",
    "downgrades": "downgraded",
    "maintains": "maintained",
    "reiterates": "reiterated",
    "initiates": "initiated coverage of",
    "assumes": "assumed coverage of",
    "resumes": "resumed coverage of",
}
_PT_VERB = {"raises": "raised", "lowers": "lowered", "announces": "set", "maintains": "kept"}


def rating_summary(ticker: str, row: dict) -> str:
    """E.g. 'UBS upgraded NVDA to Buy; price target raised to $335.'"""
    firm = plain(row.get("firm")) or "An unnamed firm"
    action = plain(row.get("action")).lower()
    rating = plain(row.get("rating"), 30)
    verb = _ACTION_VERB.get(action, "acted on")
    if action in ("upgrades", "downgrades"):
        text = f"{firm} {verb} {ticker}" + (f" to {rating}" if rating else "")
    elif action in ("maintains", "reiterates"):
        text = f"{firm} {verb} {rating} on {ticker}" if rating else f"{firm} {verb} {ticker}"
    else:
        text = f"{firm} {verb} {ticker}" + (f" at {rating}" if rating else "")
    target = _number(row.get("price_target"))
    change = _PT_VERB.get(plain(row.get("pt_change")).lower())
    if target is not None:
        text += f"; price target {change + ' to' if change else 'given as'} {_money(target)}"
    elif change:
        text += f"; price target {change} (level not parsed)"
    return text + "."


def rating_entries(
    table: AltTable, as_of: dict[str, dt.date], *, window_days: int | None
) -> list[ArchiveEntry]:
    """The analyst rating actions known by each symbol's cutoff, as archive entries."""
    out = []
    for sym, t in cutoffs(as_of).items():
        for row in _rows(table, sym, t, window_days).to_dict("records"):
            known = row[KNOWN_AT]
            action = plain(row.get("action")).lower()
            unknown = ["the research note itself: the source is a parsed headline"]
            if action in ("upgrades", "downgrades"):
                unknown.append("the rating before the change: the source gives only the new one")
            if _number(row.get("price_target")) is not None:
                unknown.append("the previous price target (only the new one is parsed)")
            unknown.append(
                "no consensus for price targets: the target cannot be set against other analysts'"
            )
            facts = (
                ("firm", plain(row.get("firm")) or "not parsed"),
                ("action", plain(row.get("action")) or "not parsed"),
                ("rating", plain(row.get("rating"), 30) or "not parsed"),
                ("price-target change", plain(row.get("pt_change")) or "none parsed"),
                ("price target", plain(row.get("price_target")) or "none parsed"),
                ("known at", _when(known)),
                ("source", table.source),
            )
            summary = rating_summary(sym, row)
            day = dt.date.fromisoformat(str(row["date"])[:10])
            slug = f"{day}-{sym.lower()}-rating-{_words(plain(row.get('firm')))}-" + _digest(
                table.source, known, sym, row.get("headline")
            )
            out.append(
                ArchiveEntry(
                    SourceKind.RATING,
                    day,
                    known,
                    sym,
                    table.source,
                    summary,
                    slug,
                    summary,
                    facts,
                    tuple(unknown),
                    f"headline: {plain_text(row.get('headline'))}",
                )
            )
    return out


def surprise_summary(ticker: str, row: dict) -> str:
    """An earnings release in one sentence: EPS against consensus, beat or miss, and when it came
    out."""
    est, rep = _number(row.get("eps_consensus_est")), _number(row.get("eps_reported"))
    qtr = plain(row.get("fiscal_qtr"), 20)
    when = {"pre": "before the open", "post": "after the close"}.get(
        plain(row.get("release_time")).lower(), "at an unrecorded time (read as after the close)"
    )
    if est is None or rep is None:
        return f"{ticker} reported for fiscal quarter {qtr} {when}; EPS or consensus missing."
    diff = rep - est
    word = "beat" if diff > 0 else "miss" if diff < 0 else "in line"
    pct = f", {diff / abs(est):+.1%} of consensus" if est else ""
    return (
        f"{ticker} reported EPS {rep:g} against a consensus of {est:g} for fiscal quarter "
        f"{qtr} {when}: {word} by {abs(diff):g}{pct}."
    )


def surprise_entries(table: AltTable, as_of: dict[str, dt.date]) -> list[ArchiveEntry]:
    """The earnings releases known by each symbol's cutoff (within SURPRISE_WINDOW_DAYS), as archive
    entries."""
    out = []
    for sym, t in cutoffs(as_of).items():
        for row in _rows(table, sym, t, SURPRISE_WINDOW_DAYS).to_dict("records"):
            known = row[KNOWN_AT]
            day = dt.date.fromisoformat(str(row["report_date"])[:10])
            facts = tuple(
                (k.replace("_", " "), plain(row.get(k), 20) or "missing")
                for k in (
                    "fiscal_qtr",
                    "eps_consensus_est",
                    "eps_reported",
                    "surprise",
                    "release_time",
                )
            ) + (("known at", _when(known)), ("source", table.source))
            unknown = (
                "revenue, guidance and the earnings call: the source has EPS only",
                "how many analysts make the consensus, and their spread",
                "the EPS basis: street EPS as reported then, before later splits",
            )
            slug = f"{day}-{sym.lower()}-earnings-{_digest(table.source, known, sym)}"
            summary = surprise_summary(sym, row)
            out.append(
                ArchiveEntry(
                    SourceKind.SURPRISE,
                    day,
                    known,
                    sym,
                    table.source,
                    summary,
                    slug,
                    summary,
                    facts,
                    unknown,
                )
            )
    return out


# --------------------------------------------------------------------------- market-wide


def put_call_entries(
    table: AltTable, as_of: dict[str, dt.date], *, window_days: int | None
) -> list[ArchiveEntry]:
    """One row per day, no body: the ratios say the same about every stock."""
    if not as_of:
        return []
    t = min(cutoffs(as_of).values())
    out = []
    for row in _rows(table, None, t, window_days).to_dict("records"):
        parts = []
        for leg in ("equity", "index", "total", "vix"):
            ratio = _number(row.get(f"{leg}_pc"))
            if ratio is not None:
                parts.append(f"{leg} {ratio:.2f}")
        calls, puts = _number(row.get("equity_calls")), _number(row.get("equity_puts"))
        cell = "market-wide put/call: " + ", ".join(parts)
        if calls is not None and puts is not None:
            cell += f" (equity calls {calls:,.0f}, puts {puts:,.0f})"
        day = dt.date.fromisoformat(str(row["date"])[:10])
        out.append(
            ArchiveEntry(SourceKind.PUT_CALL, day, row[KNOWN_AT], None, table.source, cell, None)
        )
    return out


# --------------------------------------------------------------------------- social


def tweet_entries(
    table: AltTable, as_of: dict[str, dt.date], *, window_days: int | None
) -> list[ArchiveEntry]:
    """One entry per ticker and UTC day: count, tone, followers-weighted tone, and the most
    followed tweets quoted as untrusted text."""
    out = []
    for sym, t in cutoffs(as_of).items():
        rows = _rows(table, sym, t, window_days)
        if rows.empty:
            continue
        rows = rows.assign(
            _tone=[score_headline(plain_text(x)) for x in rows["text"]],
            _w=pd.to_numeric(rows["followers"], errors="coerce").fillna(0).clip(lower=0) + 1,
        )
        for day_key, g in rows.groupby(rows["date_utc"].astype(str).str[:10], sort=True):
            day = dt.date.fromisoformat(day_key)
            tone = float(g["_tone"].mean())
            weighted = float((g["_tone"] * g["_w"]).sum() / g["_w"].sum())
            pos = int((g["_tone"] >= POSITIVE_THRESHOLD).sum())
            neg = int((g["_tone"] <= NEGATIVE_THRESHOLD).sum())
            known = g[KNOWN_AT].max()
            n, users = len(g), g["user_id"].nunique()
            cell = (
                f"{n} tweets from {users} users; tone {tone:+.2f}, followers-weighted "
                f"{weighted:+.2f}; {pos} positive, {neg} negative"
            )
            summary = (
                f"{n} ${sym} cashtag tweets on {day} (UTC) from {users} users, tone "
                f"{tone_label(weighted)} when weighted by followers ({weighted:+.2f})."
            )
            top = g.sort_values("_w", ascending=False, kind="stable").head(TOP_TWEETS)
            quoted = "\n".join(
                f"[{r[KNOWN_AT]:%H:%M} UTC, {int(r['_w']) - 1:,} followers] {plain_text(r['text'])}"
                for r in top.to_dict("records")
            )
            facts = (
                ("tweets", str(n)),
                ("distinct users", str(users)),
                ("mean finance-VADER", f"{tone:+.4f}"),
                ("followers-weighted finance-VADER", f"{weighted:+.4f}"),
                ("positive / negative / neutral", f"{pos} / {neg} / {n - pos - neg}"),
                ("first tweet", _when(g[KNOWN_AT].min())),
                ("known at (last tweet)", _when(known)),
                ("source", table.source),
            )
            unknown = (
                "retweets, replies and likes: retweets were removed and engagement is not in "
                "the source",
                "whether accounts are bots, or hold the stock",
                "followers as the collector recorded them, not checked",
                "tone is a lexicon score of short text (0.543 accuracy on FinancialPhraseBank)",
            )
            slug = f"{day}-{sym.lower()}-tweets"
            out.append(
                ArchiveEntry(
                    SourceKind.TWEETS,
                    day,
                    known,
                    sym,
                    table.source,
                    cell,
                    slug,
                    summary,
                    facts,
                    unknown,
                    quoted,
                )
            )
    return out


# --------------------------------------------------------------------------- all of it


def all_entries(
    news_items: list[NewsItem],
    alt: AltData | None,
    as_of: dict[str, dt.date],
    *,
    window_days: int | None = None,
) -> list[ArchiveEntry]:
    """Every source there is, cut at each symbol's ``as_of``."""
    items = list(news_items)
    if alt is not None:
        items += alt_headline_items(alt, set(as_of))
    entries = [headline_entry(it) for it in select_headlines(items, as_of, window_days=window_days)]
    if alt is None:
        return entries
    if (table := alt.table("ratings")) is not None:
        entries += rating_entries(table, as_of, window_days=window_days)
    if (table := alt.table("surprises")) is not None:
        entries += surprise_entries(table, as_of)
    if (table := alt.table("put_call")) is not None:
        entries += put_call_entries(table, as_of, window_days=window_days)
    if (table := alt.table("tweets")) is not None:
        entries += tweet_entries(table, as_of, window_days=window_days)
    return entries
