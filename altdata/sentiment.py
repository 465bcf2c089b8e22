"""Sentiment readings from point-in-time alternative data: pure functions over frames that
``AltTable.as_of`` has already cut, so nothing here can see a row after its ``known_at``.

Each reading carries the rows it used (``Citation``: the file and the moment each row became
known), so a finding can cite them. Headline and tweet text is scored and counted here and
never leaves this module: readings hold numbers, counts and citations only.

* news: an event class per headline (keyword rules), a recency weight (exponential
  half-life), de-duplication (the same normalised story on the same day counts once, so
  five copies of one headline do not raise confidence), the finance-VADER score per item;
* analyst: rating actions (upgrades, downgrades, initiations, price-target moves) in a window,
  and the last four earnings surprises against consensus;
* options_flow: the market-wide equity put/call ratio against its own trailing year, read
  contrarian (fear is bullish), labelled market-level;
* social: cashtag tweet volume against its own history and the tone of the distinct tweets.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from altdata.pit import KNOWN_AT, utc
from swarm.research.news import NEGATIVE_THRESHOLD, POSITIVE_THRESHOLD, score_headline

TICKER_LEVEL = "ticker"
MARKET_LEVEL = "market"


@dataclass(frozen=True)
class Citation:
    """One row a reading used: the file (relative to the alt-data root) and when it was known."""

    source: str
    known_at: pd.Timestamp

    def __str__(self) -> str:
        return f"{self.source} @ {self.known_at.strftime('%Y-%m-%d %H:%M')}Z"


@dataclass(frozen=True)
class Reading:
    """A signal in [-1, 1] (bullish positive), a confidence in [0, 1] from coverage and
    agreement, the numbers it rests on and the rows it used. ``level``: ``ticker`` or
    ``market`` (a market-wide series says the same about every stock)."""

    signal: float
    confidence: float
    evidence: dict[str, float]
    citations: tuple[Citation, ...]
    level: str = TICKER_LEVEL
    notes: tuple[str, ...] = field(default_factory=tuple)

    def cite(self, limit: int = 6) -> str:
        """The rows used, for an interpretation: the files, the range of dates, the latest."""
        if not self.citations:
            return "no rows"
        by_file: dict[str, list[pd.Timestamp]] = {}
        for c in self.citations:
            by_file.setdefault(c.source, []).append(c.known_at)
        parts = []
        for source, when in by_file.items():
            days = sorted({w.strftime("%Y-%m-%d") for w in when})
            shown = ", ".join(days[-limit:])
            more = f" (+{len(days) - limit} earlier days)" if len(days) > limit else ""
            parts.append(f"{source}: {len(when)} rows dated {shown}{more}")
        return "; ".join(parts)


def _clip(x: float, lo: float = -1.0, hi: float = 1.0) -> float:
    return float(min(hi, max(lo, x)))


SOURCE = "source_file"  # optional per-row file, for frames joined from several files


def _citations(rows: pd.DataFrame, source: str) -> tuple[Citation, ...]:
    if SOURCE in rows.columns:
        return tuple(Citation(f, ts) for f, ts in zip(rows[SOURCE], rows[KNOWN_AT], strict=True))
    return tuple(Citation(source, ts) for ts in rows[KNOWN_AT])


def _window(rows: pd.DataFrame, as_of: pd.Timestamp, days: float) -> pd.DataFrame:
    """Rows known in (as_of - days, as_of]; rows after ``as_of`` are dropped too, so a frame
    that was not cut cannot leak."""
    known = rows[KNOWN_AT]
    return rows[(known <= as_of) & (known > as_of - pd.Timedelta(days=days))]


# --------------------------------------------------------------------------- news

# First match wins: a rating action that mentions earnings is an analyst rating.
EVENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.I))
    for name, pattern in (
        (
            "analyst_rating",
            r"\b(upgrade[sd]?|downgrade[sd]?|price target|initiates? coverage"
            r"|maintains|reiterates|outperform|underperform|overweight"
            r"|underweight)\b",
        ),
        (
            "earnings",
            r"\b(earnings|eps|revenue|guidance|quarter(ly)?|q[1-4]|results|profit"
            r"|sales|beats?|miss(es|ed)?)\b",
        ),
        (
            "m_and_a",
            r"\b(acquir\w*|acquisition|merger|merge[sd]?|buyout|takeover|deal to buy"
            r"|stake)\b",
        ),
        (
            "legal_regulatory",
            r"\b(lawsuit|sue[sd]?|court|probe|investigation|sec|ftc|doj"
            r"|antitrust|regulat\w*|fine[sd]?|settle\w*|recall\w*|patent)\b",
        ),
        (
            "management",
            r"\b(ceo|cfo|coo|chief|executive|resign\w*|appoint\w*|names|hires"
            r"|steps down|board|chairman)\b",
        ),
        (
            "product",
            r"\b(launch\w*|unveil\w*|release[sd]?|product|chip|gpu|model|iphone"
            r"|platform|partner\w*|announces)\b",
        ),
        (
            "macro_market",
            r"\b(market|stocks|fed|rates?|inflation|economy|jobs|sector|s&p"
            r"|nasdaq|dow|futures|week ahead|movers|mid-day|pre-market)\b",
        ),
    )
)
OTHER_EVENT = "other"
EVENT_CLASSES = (*(name for name, _ in EVENT_RULES), OTHER_EVENT)

NEWS_WINDOW_DAYS = 30
NEWS_HALF_LIFE_DAYS = 7.0
NEWS_MAX_CONFIDENCE = 0.7
NEWS_FULL_COVERAGE = 20  # distinct items at which coverage stops adding confidence


def event_class(headline: str) -> str:
    """The class of the first rule matching ``headline``, else ``OTHER_EVENT``."""
    for name, pattern in EVENT_RULES:
        if pattern.search(headline):
            return name
    return OTHER_EVENT


_URL = re.compile(r"https?://\S+")
_NON_WORD = re.compile(r"[^a-z0-9$]+")


def normalise(text: str) -> str:
    """Lower case, links dropped, punctuation and spacing collapsed: near-identical copies
    of one story (a re-post, a trailing space, different quotes) become one key."""
    return _NON_WORD.sub(" ", _URL.sub(" ", str(text).lower())).strip()


def dedupe(rows: pd.DataFrame, text: str, *, day: str | None = None) -> pd.DataFrame:
    """The first row of each (normalised text, day) group: the same story on the same day
    counts once. ``day``: the column holding the day; default the UTC date of ``known_at``."""
    if rows.empty:
        return rows
    days = rows[day].astype(str) if day else rows[KNOWN_AT].dt.strftime("%Y-%m-%d")
    key = rows[text].map(normalise) + "|" + days
    return rows[~key.duplicated(keep="first")]


def recency_weight(age_days: float, half_life_days: float = NEWS_HALF_LIFE_DAYS) -> float:
    """1 now, 0.5 one half-life ago."""
    return float(0.5 ** (max(age_days, 0.0) / half_life_days))


def _tone(scores: list[float], weights: list[float]) -> tuple[float, float, float]:
    """(weighted mean, weighted share positive, weighted share negative)."""
    total = sum(weights)
    mean = sum(s * w for s, w in zip(scores, weights, strict=True)) / total
    pos = sum(w for s, w in zip(scores, weights, strict=True) if s > POSITIVE_THRESHOLD) / total
    neg = sum(w for s, w in zip(scores, weights, strict=True) if s < NEGATIVE_THRESHOLD) / total
    return mean, pos, neg


def news_reading(
    rows: pd.DataFrame,
    *,
    source: str,
    as_of: object,
    window_days: int = NEWS_WINDOW_DAYS,
    half_life_days: float = NEWS_HALF_LIFE_DAYS,
    text: str = "headline",
) -> Reading | None:
    """Headlines known in the ``window_days`` to ``as_of``, one per story and day, scored and
    weighted by recency; None when there is none. Confidence grows with the number of
    distinct items and with their agreement (one-sided tone), never with copies."""
    t = utc(as_of)
    used = dedupe(_window(rows, t, window_days), text)
    if used.empty:
        return None
    scores = [score_headline(h) for h in used[text]]
    ages = ((t - used[KNOWN_AT]).dt.total_seconds() / 86400).tolist()
    weights = [recency_weight(a, half_life_days) for a in ages]
    mean, pos, neg = _tone(scores, weights)
    n = len(scores)
    coverage = min(n, NEWS_FULL_COVERAGE) / NEWS_FULL_COVERAGE
    confidence = _clip(
        (0.15 + 0.45 * coverage) * (0.5 + 0.5 * abs(pos - neg)), 0, NEWS_MAX_CONFIDENCE
    )
    classes = [event_class(h) for h in used[text]]
    ev = {
        f"news_rows_{window_days}d": float(len(_window(rows, t, window_days))),
        f"news_distinct_{window_days}d": float(n),
        "news_weighted_compound": mean,
        "news_share_positive": pos,
        "news_share_negative": neg,
        "news_half_life_days": float(half_life_days),
        "news_days_since_latest": float(min(ages)),
    }
    for name in EVENT_CLASSES:
        k = classes.count(name)
        if k:
            ev[f"news_events_{name}"] = float(k)
    return Reading(_clip(mean), confidence, ev, _citations(used, source))


# --------------------------------------------------------------------------- phrasebank

PHRASEBANK = "news/financial_phrasebank_all.csv"
LABELS = ("negative", "neutral", "positive")


def label(score: float) -> str:
    """The 3-class reading of a compound score, with news.py's neutral band."""
    if score > POSITIVE_THRESHOLD:
        return "positive"
    if score < NEGATIVE_THRESHOLD:
        return "negative"
    return "neutral"


@dataclass(frozen=True)
class Validation:
    """The headline scorer against labelled sentences. ``counts``: sentences per true class;
    ``correct``: those the scorer got right; ``predicted``: its labels' counts."""

    accuracy: float
    n: int
    counts: dict[str, int]
    correct: dict[str, int]
    predicted: dict[str, int]

    def recall(self, cls: str) -> float:
        """The share of ``cls``'s headlines classified right (NaN when there were none)."""
        return self.correct[cls] / self.counts[cls] if self.counts[cls] else float("nan")


def validate_scorer(pairs: Iterable[tuple[str, str]]) -> Validation:
    """Accuracy of ``score_headline`` (3-class, neutral band from news.py) on (label, text)."""
    counts = dict.fromkeys(LABELS, 0)
    correct = dict.fromkeys(LABELS, 0)
    predicted = dict.fromkeys(LABELS, 0)
    for truth, text in pairs:
        guess = label(score_headline(text))
        counts[truth] += 1
        predicted[guess] += 1
        correct[truth] += int(guess == truth)
    n = sum(counts.values())
    accuracy = sum(correct.values()) / n if n else float("nan")
    return Validation(accuracy, n, counts, correct, predicted)


def phrasebank_accuracy(path: Path) -> Validation:
    """``validate_scorer`` on FinancialPhraseBank (``sentiment,sentence``; all agreement
    levels)."""
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        pairs = [(r["sentiment"].strip(), r["sentence"]) for r in csv.DictReader(fh)]
    return validate_scorer(p for p in pairs if p[0] in LABELS)


# --------------------------------------------------------------------------- analyst

ANALYST_WINDOW_DAYS = 90
SURPRISES_KEPT = 4
SURPRISE_SCALE = 0.10  # a 10 % beat of consensus is a full-strength surprise
POSITIVE_RATINGS = re.compile(r"\b(buy|outperform|overweight|positive|accumulate|add)\b", re.I)
NEGATIVE_RATINGS = re.compile(r"\b(sell|underperform|underweight|negative|reduce)\b", re.I)
NEW_COVERAGE = re.compile(r"\b(initiates|reinstates|assumes|resumes)\b", re.I)


def _rating_tone(rating: object) -> int:
    text = "" if pd.isna(rating) else str(rating)
    return 1 if POSITIVE_RATINGS.search(text) else -1 if NEGATIVE_RATINGS.search(text) else 0


def rating_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Counts of upgrades, downgrades, initiations (by the rating's tone), price-target raises
    and cuts, and positive vs negative reiterations in ``benzinga_rating_actions`` rows."""
    out = dict.fromkeys(
        (
            "upgrades",
            "downgrades",
            "initiations_positive",
            "initiations_negative",
            "pt_raises",
            "pt_cuts",
            "reiterations_positive",
            "reiterations_negative",
        ),
        0,
    )
    for action, rating, pt in zip(rows["action"], rows["rating"], rows["pt_change"], strict=True):
        action = str(action)
        tone = _rating_tone(rating)
        if action.startswith("Upgrade"):
            out["upgrades"] += 1
        elif action.startswith("Downgrade"):
            out["downgrades"] += 1
        elif NEW_COVERAGE.search(action) and tone:
            out["initiations_positive" if tone > 0 else "initiations_negative"] += 1
        elif tone:
            out["reiterations_positive" if tone > 0 else "reiterations_negative"] += 1
        if str(pt) == "Raises":
            out["pt_raises"] += 1
        elif str(pt) == "Lowers":
            out["pt_cuts"] += 1
    return out


# Rating changes weigh most, new coverage and target moves half, reiterations a quarter.
_RATING_WEIGHTS = {
    "upgrades": 1.0,
    "downgrades": -1.0,
    "initiations_positive": 0.5,
    "initiations_negative": -0.5,
    "pt_raises": 0.5,
    "pt_cuts": -0.5,
    "reiterations_positive": 0.25,
    "reiterations_negative": -0.25,
}


def analyst_reading(
    ratings: pd.DataFrame | None,
    surprises: pd.DataFrame | None,
    *,
    as_of: object,
    ratings_source: str = "",
    surprises_source: str = "",
    window_days: int = ANALYST_WINDOW_DAYS,
) -> Reading | None:
    """Rating actions known in the ``window_days`` to ``as_of`` and the last four earnings
    surprises known by then (one ticker's rows), or None when neither has a row. Each part
    gives a net score in [-1, 1]; they are averaged by weight (actions by their number, up to
    10; surprises by their number of four), and confidence falls when they disagree."""
    t = utc(as_of)
    ev: dict[str, float] = {}
    parts: list[tuple[float, float]] = []  # (score, weight)
    cites: list[Citation] = []
    if ratings is not None:
        used = _window(ratings, t, window_days)
        if not used.empty:
            counts = rating_counts(used)
            net = sum(_RATING_WEIGHTS[k] * v for k, v in counts.items())
            gross = sum(abs(_RATING_WEIGHTS[k]) * v for k, v in counts.items())
            score = net / gross if gross else 0.0
            ev.update({f"analyst_{k}_{window_days}d": float(v) for k, v in counts.items()})
            ev[f"analyst_actions_{window_days}d"] = float(len(used))
            ev["analyst_rating_score"] = score
            parts.append((score, min(len(used), 10) / 10))
            cites += _citations(used, ratings_source)
    if surprises is not None:
        known = surprises[surprises[KNOWN_AT] <= t]
        last = known.tail(SURPRISES_KEPT)
        if not last.empty:
            est = last["eps_consensus_est"].astype(float)
            pct = last["surprise"].astype(float) / est.abs().where(est.abs() > 0.01, 0.01)
            sized = [_clip(p / SURPRISE_SCALE) for p in pct]
            score = sum(sized) / len(sized)
            ev.update(
                {
                    "surprises_count": float(len(last)),
                    "surprises_beats": float((last["surprise"] > 0).sum()),
                    "surprises_misses": float((last["surprise"] < 0).sum()),
                    "surprises_mean_pct": float(pct.mean()),
                    "surprises_latest_pct": float(pct.iloc[-1]),
                    "surprises_score": score,
                    "surprises_days_since_latest": float(
                        (t - last[KNOWN_AT].iloc[-1]).total_seconds() / 86400
                    ),
                }
            )
            parts.append((score, 0.6 * len(last) / SURPRISES_KEPT))
            cites += _citations(last, surprises_source)
    if not parts:
        return None
    weight = sum(w for _, w in parts)
    signal = _clip(sum(s * w for s, w in parts) / weight)
    agree = 1.0 if len(parts) == 1 else 1.0 - abs(parts[0][0] - parts[1][0]) / 2
    confidence = _clip((0.1 + 0.4 * min(weight, 1.0)) * (0.5 + 0.5 * agree), 0, 0.5)
    ev["analyst_net_score"] = signal
    return Reading(signal, confidence, ev, tuple(cites))


# --------------------------------------------------------------------------- options flow

PUT_CALL_COLUMN = "equity_pc"
PUT_CALL_LOOKBACK = 252  # sessions, about a year
PUT_CALL_MIN_HISTORY = 60
PUT_CALL_MAX_CONFIDENCE = 0.3  # a market-wide gauge says little about one stock
PUT_CALL_STALE_DAYS = 7


def put_call_reading(
    rows: pd.DataFrame,
    *,
    source: str,
    as_of: object,
    column: str = PUT_CALL_COLUMN,
    lookback: int = PUT_CALL_LOOKBACK,
) -> Reading | str:
    """The latest market-wide put/call ratio known at ``as_of`` against its previous
    ``lookback`` sessions (z-score), read contrarian: a high ratio is crowd fear, which
    tends to precede rebounds, so it is bullish. A ``MARKET_LEVEL`` reading, or the reason
    there is none (too little history, or the latest row is stale)."""
    t = utc(as_of)
    known = rows[rows[KNOWN_AT] <= t].dropna(subset=[column])
    if len(known) < PUT_CALL_MIN_HISTORY + 1:
        return (
            f"{len(known)} put/call days known by {t:%Y-%m-%d}; the z-score needs "
            f"{PUT_CALL_MIN_HISTORY + 1}"
        )
    latest = known.iloc[-1]
    stale = (t - latest[KNOWN_AT]).total_seconds() / 86400
    if stale > PUT_CALL_STALE_DAYS:
        return f"the latest put/call day known by {t:%Y-%m-%d} is {stale:.0f} days old"
    history = known.iloc[-lookback - 1 : -1][column].astype(float)
    mean, sd = float(history.mean()), float(history.std(ddof=1))
    value = float(latest[column])
    z = (value - mean) / sd if sd > 0 else 0.0
    signal = math.tanh(z / 2)  # contrarian: fear (high put/call) is bullish
    confidence = _clip(0.05 + 0.1 * min(abs(z), 2.5), 0, PUT_CALL_MAX_CONFIDENCE)
    ev = {
        f"putcall_{column}": value,
        f"putcall_{column}_mean_{len(history)}d": mean,
        f"putcall_{column}_sd_{len(history)}d": sd,
        f"putcall_{column}_z": z,
        f"putcall_{column}_pctile": float((history < value).mean()),
    }
    used = known.iloc[-lookback - 1 :]
    return Reading(signal, confidence, ev, _citations(used, source), level=MARKET_LEVEL)


# --------------------------------------------------------------------------- social

SOCIAL_HISTORY_DAYS = 365
SOCIAL_TONE_DAYS = 7
SOCIAL_MIN_HISTORY_DAYS = 60
SOCIAL_MAX_CONFIDENCE = 0.5
SOCIAL_FULL_COVERAGE = 50  # distinct tweets at which coverage stops adding confidence


def _volume_z(daily: pd.Series, days: int) -> float:
    """z of the last ``days``-day tweet count against the earlier rolling counts."""
    sums = daily.rolling(days).sum().dropna()
    if len(sums) <= days + 1:
        return float("nan")
    history = sums.iloc[:-days]
    sd = float(history.std(ddof=1))
    return float((sums.iloc[-1] - history.mean()) / sd) if sd > 0 else 0.0


def social_reading(
    rows: pd.DataFrame,
    *,
    source: str,
    as_of: object,
    text: str = "text",
    tone_days: int = SOCIAL_TONE_DAYS,
    history_days: int = SOCIAL_HISTORY_DAYS,
) -> Reading | None:
    """One ticker's tweets known by ``as_of``: volume over the last 7 and 30 days against its
    own year (z-scores of rolling counts) and the tone of the distinct tweets of the last
    ``tone_days`` (finance-VADER, copies counted once). None without a tweet in the tone
    window. Attention (volume z) scales confidence, not direction."""
    t = utc(as_of)
    recent = dedupe(_window(rows, t, tone_days), text)
    if recent.empty:
        return None
    year = _window(rows, t, history_days)
    end = t.floor("D")
    start = max(end - pd.Timedelta(days=history_days - 1), year[KNOWN_AT].min().floor("D"))
    days = pd.date_range(start, end, freq="D")
    daily = year[KNOWN_AT].dt.floor("D").value_counts().reindex(days, fill_value=0)
    z7, z30 = _volume_z(daily, 7), _volume_z(daily, 30)
    scores = [score_headline(s) for s in recent[text]]
    mean, pos, neg = _tone(scores, [1.0] * len(scores))
    n = len(scores)
    coverage = min(n, SOCIAL_FULL_COVERAGE) / SOCIAL_FULL_COVERAGE
    attention = 1.0 + 0.1 * _clip(z7 if math.isfinite(z7) else 0.0, 0, 2)
    confidence = _clip(
        (0.1 + 0.3 * coverage) * (0.5 + 0.5 * abs(pos - neg)) * attention, 0, SOCIAL_MAX_CONFIDENCE
    )
    ev = {
        f"social_tweets_{tone_days}d": float(len(_window(rows, t, tone_days))),
        f"social_distinct_{tone_days}d": float(n),
        "social_tweets_30d": float(len(_window(rows, t, 30))),
        "social_compound_mean": mean,
        "social_share_positive": pos,
        "social_share_negative": neg,
        "social_history_days": float(len(days)),
    }
    notes: tuple[str, ...] = ()
    if len(days) >= SOCIAL_MIN_HISTORY_DAYS and math.isfinite(z7) and math.isfinite(z30):
        ev["social_volume_z_7d"] = z7
        ev["social_volume_z_30d"] = z30
    else:
        notes = (f"volume z-scores need {SOCIAL_MIN_HISTORY_DAYS} days of history",)
    return Reading(_clip(mean), confidence, ev, _citations(recent, source), notes=notes)
