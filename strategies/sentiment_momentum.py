"""Sentiment momentum: specs, proposals, the daily tone series and the strategy source.

When the tone of a stock's messages (cashtag tweets, news headlines) rises against its own
trailing history, the price tends to drift the same way for a few days. The family reads one
number a session per ticker: the mean tone of the distinct items known by that session's
close (a day with fewer than ``min_items`` is no reading), smooths it over ``smooth`` bars
(pooled over the items when ``weighted``, else each day alike), and takes its z-score against
the previous ``lookback`` bars. A fresh rise above ``entry_z`` goes long (long/short: a fresh
fall below minus that goes short); the position is closed when the z-score falls back below
``exit_z`` (short: above minus that) or ``hold_bars`` bars after the entry decision.

The sandboxed child reads no file and gets no text: the trusted side scores each item
(``scored``, with the research swarm's scorer passed in), assigns it to the first NYSE
session whose close is at or after the moment it was known (``first_tradable``, as
``earnings_drift`` does; after the close: the next session), and embeds ticker ->
((session yyyymmdd, items, mean tone), ...). ``series`` cuts every table at a day exactly as
``AltTable.as_of_day`` does: the search's code carries the items known by the in-sample end
only, the holdout's through the holdout end.

The z-score and the entry/exit rule (``ToneZ``, ``decide``) are written once: the rendered
source embeds their code, and the trusted side's ``decisions`` replays them.

Pure: nothing here imports ``swarm`` (the scorer is an argument).
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from typing import NamedTuple

import pandas as pd

from altdata.pit import KNOWN_AT, TICKER, AltTable
from altdata.sessions import first_sessions, session_after, session_close, session_on_or_after
from strategies.earnings_drift import EXCHANGE_TZ, date_key
from strategies.family_api import Proposal
from strategies.param_grid import nearest, neighbour_params, new_spec, settled
from strategies.spec import ParamValue, StrategySpec

KIND = "sentiment_momentum"
CLASS_NAME = "SentimentMomentum"
APPROACH = (
    "Sentiment momentum: when the tone of a stock's tweets or headlines rises against its own "
    "trailing history (a z-score), hold it the tone's way for a few bars."
)
FRACTION = 0.95  # of the account's value in the position

# The tables a source reads (``series``' keys: the family's scored tables).
TWEETS, NEWS = "tweets", "news"
SOURCES: dict[int, str] = {1: TWEETS, 2: NEWS, 3: "both"}
PARTS: dict[str, tuple[str, ...]] = {TWEETS: (TWEETS,), NEWS: (NEWS,), "both": (TWEETS, NEWS)}

# The parameter grid (every value snapped to it) and the defaults. ``source``: 1 tweets,
# 2 news, 3 both; ``weighted``: 1 pools the smoothing window's items, 0 weighs its days alike.
GRID: dict[str, tuple[float, ...]] = {
    "source": (1, 2, 3),
    "lookback": (20, 40, 60, 120),
    "smooth": (1, 3, 5, 10),
    "entry_z": (0.5, 1.0, 1.5, 2.0),
    "exit_z": (-0.5, 0.0, 0.5),
    "hold_bars": (3, 5, 10, 20),
    "min_items": (1, 2, 3, 5),
    "weighted": (0, 1),
}
FLOATS = frozenset({"entry_z", "exit_z"})
DEFAULTS: dict[str, ParamValue] = {
    "source": 1,
    "lookback": 60,
    "smooth": 3,
    "entry_z": 1.0,
    "exit_z": 0.0,
    "hold_bars": 5,
    "min_items": 2,
    "weighted": 1,
}
# First-iteration (and research-round) diversity: (parameters, long_short, note).
IDEAS: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, False, "defaults"),
    ({}, True, "long/short"),
    ({"source": 3}, False, "tweets and headlines"),
    ({"entry_z": 1.5, "hold_bars": 10}, False, "strong rise, hold 10"),
    ({"lookback": 20, "smooth": 1, "hold_bars": 3}, False, "fast: daily tone, 20 bars"),
    ({"lookback": 120, "smooth": 5, "hold_bars": 20}, False, "slow: 5-bar tone, 120 bars"),
    ({"source": 2, "min_items": 1, "smooth": 5}, False, "headlines only"),
    ({"entry_z": 0.5, "min_items": 5}, True, "busy days only, both ways"),
)

TONE = "tone"  # the item's score in [-1, 1]
STORY = "story"  # the item's normalised text: copies in one session count once
SESSION = "session"  # yyyymmdd of the first session whose close may decide on it


class Day(NamedTuple):
    """One session's reading as the strategy gets it."""

    day: int  # yyyymmdd
    # the field shadows tuple.count (mypy): distinct items known by its close (and after the
    # previous one's)
    count: int  # type: ignore[assignment]
    tone: float  # their mean tone


SeriesTable = dict[str, tuple[Day, ...]]  # ticker -> days with items, in time order
DailyTable = dict[str, SeriesTable]  # source name -> its series


# --------------------------------------------------------------------------- the series


def sessions(known_at: pd.Series) -> pd.Series:
    """Each moment's first tradable session (``earnings_drift.first_tradable``) as yyyymmdd:
    the first NYSE session whose close is at or after it. Computed once per New York day."""
    if known_at.empty:
        return pd.Series([], index=known_at.index, dtype="int64")
    local = known_at.dt.tz_convert(EXCHANGE_TZ).dt.tz_localize(None).dt.normalize()
    closes, same, after = {}, {}, {}
    days = pd.DatetimeIndex(local.unique())
    found = first_sessions(days)  # every day's sessions at once (4,500 days: ~3 s one by one)
    if found is None:  # a day outside the calendar: the one-day functions say which
        firsts = [session_on_or_after(day) for day in days]
        first_closes = [session_close(first) for first in firsts]
        nexts = [session_after(first) for first in firsts]
    else:
        firsts, first_closes, nexts = found
    for day, first, close, nxt in zip(days, firsts, first_closes, nexts, strict=True):
        closes[day] = close
        same[day] = date_key(first.date())
        after[day] = date_key(nxt.date())
    close = pd.Series([closes[d] for d in local], index=known_at.index, dtype=known_at.dtype)
    return local.map(same).where(known_at <= close, local.map(after)).astype("int64")


def scored(
    table: AltTable,
    *,
    text: str,
    score: Callable[[str], float] | None = None,
    key: Callable[[str], str] | None = None,
    name: str | None = None,
    tones: Callable[[list[str]], Sequence[float]] | None = None,
) -> AltTable:
    """``table`` reduced to what the series needs: when each item was known, its ticker,
    its tone (``score`` of its ``text``; or ``tones`` of all the texts at once, in order: a
    cache, say), its story key (``key``: copies share one; default the text itself) and its
    first tradable session. The text itself is dropped here."""
    if (score is None) == (tones is None):
        raise ValueError("scored: give exactly one of score (a text's tone) or tones (all at once)")
    frame = table.frame
    texts = frame[text].fillna("").astype(str)
    if tones is not None:
        tone = [float(t) for t in tones(texts.tolist())]
    else:
        assert score is not None
        tone = [float(score(t)) for t in texts]
    out = pd.DataFrame(
        {
            KNOWN_AT: frame[KNOWN_AT],
            TICKER: frame[TICKER].astype(str).str.upper(),
            TONE: tone,
            STORY: texts.map(key) if key is not None else texts,
            SESSION: sessions(frame[KNOWN_AT]),
        },
        index=frame.index,
    )
    return AltTable(name or table.name, table.source, out.reset_index(drop=True), True, table.rule)


def merged(name: str, tables: Sequence[AltTable]) -> AltTable:
    """Scored tables joined into one, still sorted by ``known_at`` (e.g. two headline files)."""
    frame = pd.concat([t.frame for t in tables], ignore_index=True)
    frame = frame.sort_values(KNOWN_AT, kind="stable").reset_index(drop=True)
    sources = ", ".join(t.source for t in tables)
    return AltTable(name, sources, frame, True, "; ".join(dict.fromkeys(t.rule for t in tables)))


def daily(rows: pd.DataFrame) -> tuple[Day, ...]:
    """One ticker's scored rows as sessions: the distinct stories of each, their number and
    mean tone (rounded: the values the strategy gets)."""
    if rows.empty:
        return ()
    rows = rows.sort_values(KNOWN_AT, kind="stable").drop_duplicates([SESSION, STORY])
    agg = rows.groupby(SESSION)[TONE].agg(["count", "mean"])
    return tuple(
        Day(int(day), int(n), round(float(mean), 6))
        for day, n, mean in zip(agg.index, agg["count"], agg["mean"], strict=True)
    )


def series(tables: Mapping[str, AltTable], symbols: Iterable[str], *, through: date) -> DailyTable:
    """Each source's daily series for ``symbols`` from the scored ``tables`` (``tweets``,
    ``news``), only the items known by the close of ``through`` (``AltTable.as_of_day``: the
    trusted side's cut). A missing table gives empty series."""
    symbols = list(symbols)
    cut = {name: table.as_of_day(through) for name, table in tables.items()}
    out: DailyTable = {}
    for source, parts in PARTS.items():
        frames = [cut[p] for p in parts if p in cut]
        rows = pd.concat(frames, ignore_index=True) if frames else None
        out[source] = {
            t: daily(rows[rows[TICKER] == t]) if rows is not None else () for t in symbols
        }
    return out


def window(table: SeriesTable, start: date, end: date) -> SeriesTable:
    """``table``'s days from ``start`` to ``end`` (both inclusive)."""
    lo, hi = date_key(start), date_key(end)
    return {t: tuple(d for d in rows if lo <= d.day <= hi) for t, rows in table.items()}


# --------------------------------------------------------------------------- the signal
# ToneZ and decide are embedded verbatim in the rendered source: plain Python, ``math`` only.


class ToneZ:
    """The z-score of a bar's smoothed tone against the previous ``lookback`` bars' values.

    ``update(count, tone_sum)`` once per bar, with the bar's items and the sum of their
    tones; it returns the z-score, or None while there is no reading (no day with at least
    ``min_items`` items in the last ``smooth`` bars), fewer than half the lookback (at least
    3) earlier readings, or no spread among them.
    """

    def __init__(self, lookback, smooth, min_items, weighted):
        self.lookback = int(lookback)
        self.smooth = int(smooth)
        self.min_items = max(1, int(min_items))
        self.weighted = bool(weighted)
        self.need = max(3, self.lookback // 2)
        self.recent = []  # the last ``smooth`` bars: (count, tone_sum), or None
        self.levels = []  # the last ``lookback`` smoothed tones, or None

    def level(self):
        """The smoothed tone of the recent days with enough items, or None."""
        days = [d for d in self.recent if d is not None]
        if not days:
            return None
        if self.weighted:  # pooled: every item alike
            return sum(s for _, s in days) / sum(c for c, _ in days)
        return sum(s / c for c, s in days) / len(days)  # every day alike

    def update(self, count, tone_sum):
        """Take one session's (item count, tone sum); return the tone's z-score, or None."""
        self.recent.append((count, tone_sum) if count >= self.min_items else None)
        if len(self.recent) > self.smooth:
            self.recent.pop(0)
        level = self.level()
        known = [x for x in self.levels if x is not None]
        z = None
        if level is not None and len(known) >= self.need:
            mean = sum(known) / len(known)
            var = sum((x - mean) ** 2 for x in known) / (len(known) - 1)
            if var > 1e-12:
                z = (level - mean) / math.sqrt(var)
        self.levels.append(level)
        if len(self.levels) > self.lookback:
            self.levels.pop(0)
        return z


def decide(z, prev_z, side, age, entry_z, exit_z, hold_bars, allow_short):
    """(side to hold after this bar, whether it is a fresh entry). A fresh cross of the
    entry z-score enters (or, already that side, restarts the holding); a held position
    leaves ``hold_bars`` bars after its entry decision (``age``) or when the z-score is
    back below ``exit_z`` (short: above minus it)."""
    if z is not None:
        if z >= entry_z and (prev_z is None or prev_z < entry_z):
            return 1, True
        if allow_short and z <= -entry_z and (prev_z is None or prev_z > -entry_z):
            return -1, True
    if side != 0:
        if age >= hold_bars:
            return 0, False
        if z is not None and side * z < exit_z:
            return 0, False
    return side, False


def decisions(spec: StrategySpec, rows: Sequence[Day], days: Sequence[int]) -> tuple:
    """The trusted replay of the strategy on bars dated ``days`` (yyyymmdd): (bar day, new
    side) for every order it places, each filled at the next bar's open."""
    p = reconcile(spec).parameters
    tz = ToneZ(p["lookback"], p["smooth"], p["min_items"], p["weighted"])
    cursor, side, entered, prev, out = 0, 0, 0, None, []
    for now, today in enumerate(days, start=1):
        count, tone_sum = 0, 0.0
        while cursor < len(rows) and rows[cursor].day <= today:
            d = rows[cursor]
            cursor += 1
            if now == 1 and d.day < today:
                continue
            count, tone_sum = count + d.count, tone_sum + d.count * d.tone
        z = tz.update(count, tone_sum)
        target, fresh = decide(
            z, prev, side, now - entered, p["entry_z"], p["exit_z"], p["hold_bars"], spec.long_short
        )
        prev = z
        if fresh:
            entered = now
        if target != side:
            out.append((today, target))
            side = target
    return tuple(out)


# --------------------------------------------------------------------------- specs


def snap(name: str, value: ParamValue) -> ParamValue:
    """``value`` moved to the nearest grid point of ``name`` (ties: the lower one)."""
    best = nearest(GRID[name], value)
    return float(best) if name in FLOATS else int(best)


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the code reads, snapped to the grid; no blocks."""
    params = {k: snap(k, spec.parameters.get(k, d)) for k, d in DEFAULTS.items()}
    return settled(spec, KIND, params)


def source_of(spec: StrategySpec) -> str:
    """The text source a spec reads: tweets, news or both."""
    return SOURCES[int(snap("source", spec.parameters.get("source", DEFAULTS["source"])))]


def momentum_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = False
) -> StrategySpec:
    """The family's spec with ``parameters`` over the defaults, snapped to the grid."""
    return named(reconcile(new_spec(KIND, APPROACH, parameters, long_short=long_short)))


def named(spec: StrategySpec) -> StrategySpec:
    """Named by its side and every parameter, so two specs never share a name."""
    p = spec.parameters
    side = "ls" if spec.long_short else "long"
    weights = "items pooled" if p["weighted"] else "days alike"
    name = (
        f"{KIND}-{side} | {SOURCES[int(p['source'])]}, z in {float(p['entry_z']):g} out "
        f"{float(p['exit_z']):g}, lookback {p['lookback']}, smooth {p['smooth']} "
        f"({weights}), min {p['min_items']} items, hold {p['hold_bars']}"
    )
    return spec.model_copy(update={"name": name})


# --------------------------------------------------------------------------- proposals


def neighbours(base: StrategySpec, rng: random.Random) -> list[StrategySpec]:
    """Every spec one or two grid steps from ``base``, single moves first, each group in the
    order ``rng`` shuffles it."""
    return [
        named(reconcile(base.model_copy(update={"parameters": p})))
        for p in neighbour_params(GRID, snap, base.parameters, rng)
    ]


def signature(spec: StrategySpec, table: DailyTable, days: Sequence[int]) -> tuple:
    """What ``spec`` does on ``table`` over bars dated ``days``: every ticker's orders. Two
    specs with one signature trade alike (e.g. pooled and day-weighted tone with no
    smoothing, or both sources where there are no headlines)."""
    rows = table[source_of(spec)]
    return tuple((t, decisions(spec, rows[t], days)) for t in sorted(rows))


def propose(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    table: DailyTable | None = None,
    days: Sequence[int] = (),
    sources: Iterable[str] | None = None,
    tried: Iterable[StrategySpec] = (),
) -> list[Proposal]:
    """Up to ``n`` fresh specs (no trial key in ``seen``), deterministic for ``rng``.

    INITIAL and RESEARCH (or no own best yet): the listed ideas, then random grid points.
    TUNE and FIX: grid steps around the best. REFINE: the other side first (long only <->
    long/short), then grid steps. ``sources``: the source names with coverage (None: all);
    no spec reads another. With the search's ``table`` and bar ``days``, a spec that would
    trade exactly as one of ``tried``, the best or another proposal does is not proposed:
    the gate would count a trial that cannot differ."""
    allowed = set(SOURCES.values() if sources is None else sources)
    taken = set(seen)
    out: list[Proposal] = []
    traded = set()
    if table is not None:
        known = [*tried, *([best[1]] if best is not None else [])]
        traded = {signature(reconcile(spec), table, days) for spec in known}

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) >= n or spec.trial_key() in taken or source_of(spec) not in allowed:
            return
        if table is not None:
            sig = signature(spec, table, days)
            if sig in traded:
                return
            traded.add(sig)
        taken.add(spec.trial_key())
        out.append(Proposal(spec, parent, why))

    around = best is not None and route in ("TUNE", "FIX", "REFINE")
    if around and best is not None:
        best_id, base = best
        if route == "REFINE":
            flipped = named(reconcile(base.model_copy(update={"long_short": not base.long_short})))
            add(flipped, best_id, f"refine: {'long/short' if flipped.long_short else 'long only'}")
        for spec in neighbours(base, rng):
            if len(out) >= n:
                break
            add(spec, best_id, "tune around the best so far")
    for params, long_short, note in IDEAS:
        add(momentum_spec(params, long_short=long_short), None, f"new idea: {note}")
    for _ in range(200):  # every listed idea tried: random grid points
        if len(out) >= n:
            break
        params = {k: rng.choice(g) for k, g in GRID.items()}
        add(momentum_spec(params, long_short=rng.random() < 0.5), None, "random grid point")
    return out


# --------------------------------------------------------------------------- the source


def _table(table: SeriesTable) -> list[str]:
    lines = ["DAYS = {"]
    for ticker in sorted(table):
        name = '"' + ticker.replace("\\", "").replace('"', "") + '"'
        rows = table[ticker]
        if not rows:
            lines.append(f"    {name}: (),")
            continue
        lines.append(f"    {name}: (")
        lines += [f"        ({int(d.day)}, {int(d.count)}, {float(d.tone)!r})," for d in rows]
        lines.append("    ),")
    lines.append("}")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: sentiment_momentum ({side}), source {source}. {n} session readings embedded for
    {tickers}. Each bar takes the items of the sessions since the previous bar (DAYS), feeds
    ToneZ and acts on decide(): a fresh rise of the tone z-score above entry_z orders a
    position (filled at the next open); it is closed when the z-score drops below exit_z or
    hold_bars bars after the entry decision.
    """

    params = (
        ("lookback", {lookback}),
        ("smooth", {smooth}),
        ("min_items", {min_items}),
        ("weighted", {weighted}),
        ("entry_z", {entry_z!r}),
        ("exit_z", {exit_z!r}),
        ("hold_bars", {hold_bars}),
        ("allow_short", {allow_short}),
        ("fraction", {fraction!r}),
        ("ticker", ""),  # whose readings to trade; default: the feed's name
    )

    def __init__(self):
        self.days = self._days()
        self.cursor = 0
        self.tone = ToneZ(self.p.lookback, self.p.smooth, self.p.min_items, self.p.weighted)
        self.prev_z = None
        self.entered = 0  # bar number of the open position's entry decision
        self.order = None

    def _days(self):
        name = self.p.ticker or self.data._name
        if name in DAYS:
            return DAYS[name]
        if len(DAYS) == 1:
            return list(DAYS.values())[0]
        source = self.data.p.dataname
        if isinstance(source, str):  # a CSV path under plain backtrader: its stem is the ticker
            stem = source.replace("\\\\", "/").split("/")[-1].split(".")[0].upper()
            return DAYS.get(stem, ())
        return ()

    def notify_order(self, order):
        if order.status in (order.Submitted, order.Accepted, order.Partial):
            return
        if self.order is not None and order.ref == self.order.ref:
            self.order = None

    def next(self):
        day = self.data.datetime.date(0)
        today = day.year * 10000 + day.month * 100 + day.day
        now = len(self)
        count, tone_sum = 0, 0.0
        while self.cursor < len(self.days) and self.days[self.cursor][0] <= today:
            known, items, tone = self.days[self.cursor]
            self.cursor += 1
            if now == 1 and known < today:
                continue  # a session before the first bar: not this run's reading
            count, tone_sum = count + items, tone_sum + items * tone
        z = self.tone.update(count, tone_sum)
        prev, self.prev_z = self.prev_z, z
        if self.order is not None:
            return  # wait for the working order
        held = self.position.size
        side = 1 if held > 0 else -1 if held < 0 else 0
        target, fresh = decide(z, prev, side, now - self.entered, self.p.entry_z,
                               self.p.exit_z, self.p.hold_bars, self.p.allow_short)
        if fresh:
            self.entered = now
        if target == side:
            return
        if target == 0:
            self.order = self.close()
        else:
            self.order = self.order_target_percent(target=target * self.p.fraction)
'''


def render(spec: StrategySpec, table: DailyTable) -> str:
    """The complete module for ``spec`` trading its source's readings in ``table``; passes
    ``validate_code``."""
    if spec.family.value != KIND:
        raise ValueError(f"spec {spec.name!r} is not a {KIND} spec")
    p = reconcile(spec).parameters
    source = source_of(spec)
    rows = table.get(source, {})
    title = "".join(ch if ch.isprintable() else " " for ch in spec.name)
    title = title.replace("\\", "/").replace('"', "'")
    body = _CLASS.format(
        class_name=CLASS_NAME,
        title=title,
        side="long and short" if spec.long_short else "long only",
        source=source,
        n=sum(len(v) for v in rows.values()),
        tickers=", ".join(sorted(rows)) or "no ticker",
        lookback=int(p["lookback"]),
        smooth=int(p["smooth"]),
        min_items=int(p["min_items"]),
        weighted=int(p["weighted"]),
        entry_z=float(p["entry_z"]),
        exit_z=float(p["exit_z"]),
        hold_bars=int(p["hold_bars"]),
        allow_short=bool(spec.long_short),
        fraction=FRACTION,
    )
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import math",
        "",
        "import backtrader as bt",
        "",
        f"# ticker -> ((session yyyymmdd, distinct {source} items, their mean tone), ...),",
        "# computed on the trusted side from the items known by the window's end.",
        *_table(rows),
        "",
        "",
        inspect.getsource(ToneZ).rstrip(),
        "",
        "",
        inspect.getsource(decide).rstrip(),
    ]
    return "\n".join(head) + body
