"""Post-earnings-announcement drift: specs, proposals, the event table and the strategy source.

After a large earnings surprise a stock keeps drifting the surprise's way for weeks. The
family goes long (and, long/short, short) after a report whose surprise against the consensus
is at least ``surprise_pct`` percent of it, enters ``entry_delay`` bars after the first bar
that may know the report, and leaves ``hold_bars`` bars later.

The sandboxed child reads no file, so the trusted side embeds the events: ticker ->
((first tradable yyyymmdd, surprise %), ...). A report's first tradable day is the first NYSE
session whose close (when a daily bar decides) is at or after the moment it became known
(``altdata.corpus``'s rule: before the open when released pre-market, after the close
otherwise); the order it triggers fills at the next bar's open. ``events`` cuts the table at a
day exactly as ``AltTable.as_of_day`` does: the search's code carries the reports known by the
in-sample end only, the holdout's through the holdout end.

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from datetime import date
from typing import NamedTuple

import pandas as pd

from altdata.pit import KNOWN_AT, TICKER, AltTable
from altdata.sessions import session_after, session_close, session_on_or_after
from strategies.family_api import Proposal
from strategies.param_grid import nearest, neighbour_params, new_spec, settled
from strategies.spec import ParamValue, StrategySpec

KIND = "earnings_drift"
CLASS_NAME = "EarningsDrift"
APPROACH = (
    "Post-earnings-announcement drift: after a report that beats (or misses) the consensus EPS "
    "by at least a threshold, hold the stock the surprise's way for a fixed number of bars."
)
EXCHANGE_TZ = "America/New_York"
FRACTION = 0.95  # of the account's value in the position

# The parameter grid (every value snapped to it) and the defaults.
GRID: dict[str, tuple[float, ...]] = {
    "surprise_pct": (1.0, 2.5, 5.0, 10.0, 20.0),
    "hold_bars": (5, 10, 20, 40, 60),
    "entry_delay": (0, 1, 2, 5),
}
DEFAULTS: dict[str, ParamValue] = {"surprise_pct": 5.0, "hold_bars": 20, "entry_delay": 0}
# First-iteration (and research-round) diversity: (parameters, long_short, note).
IDEAS: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, False, "defaults"),
    ({"hold_bars": 60}, False, "hold 60"),
    ({"surprise_pct": 2.5, "hold_bars": 40}, False, "small beats, hold 40"),
    ({}, True, "long/short"),
    ({"surprise_pct": 10.0, "hold_bars": 10}, False, "large beats, hold 10"),
    ({"entry_delay": 2, "hold_bars": 40}, False, "delay 2, hold 40"),
    ({"surprise_pct": 20.0, "hold_bars": 60}, True, "large surprises both ways, hold 60"),
    ({"surprise_pct": 1.0, "hold_bars": 5}, False, "any beat, hold 5"),
)


class Event(NamedTuple):
    """One report as the strategy reads it."""

    day: int  # yyyymmdd of the first bar that may decide on it
    surprise_pct: float  # (reported - consensus) / |consensus|, in percent


EventTable = dict[str, tuple[Event, ...]]


# --------------------------------------------------------------------------- the events


def date_key(day: date) -> int:
    """``day`` as the integer yyyymmdd, the form the strategy compares."""
    return day.year * 10000 + day.month * 100 + day.day


def first_tradable(known_at: object) -> date:
    """The first NYSE session whose close is at or after ``known_at`` (UTC): the first daily
    bar that may decide on a row known then. A pre-open report: its own session; one after
    the close: the next session."""
    moment = pd.Timestamp(known_at)
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
    session = session_on_or_after(moment.tz_convert(EXCHANGE_TZ).tz_localize(None).normalize())
    if session_close(session) < moment:
        session = session_after(session)
    return session.date()


def surprise_pct(reported: float, consensus: float) -> float | None:
    """The surprise in percent of the consensus; None when there is no consensus to scale by."""
    if not (math.isfinite(reported) and math.isfinite(consensus)) or consensus == 0:
        return None
    return 100.0 * (reported - consensus) / abs(consensus)


def events(table: AltTable, tickers: Iterable[str], *, through: date) -> EventTable:
    """Each ticker's reports known by the close of ``through`` (``AltTable.as_of_day``: the
    trusted side's cut), as (first tradable day, surprise %) in time order. A report with no
    consensus is left out."""
    known = table.as_of_day(through)
    out: EventTable = {}
    for ticker in tickers:
        rows = known[known[TICKER] == ticker]
        found = []
        for known_at, reported, consensus in zip(
            rows[KNOWN_AT], rows["eps_reported"], rows["eps_consensus_est"], strict=True
        ):
            pct = surprise_pct(float(reported), float(consensus))
            if pct is not None:
                found.append(Event(date_key(first_tradable(known_at)), round(pct, 4)))
        out[ticker] = tuple(sorted(found))
    return out


def since(table: EventTable, day: date) -> EventTable:
    """``table`` without the reports first tradable before ``day``."""
    key = date_key(day)
    return {ticker: tuple(e for e in rows if e.day >= key) for ticker, rows in table.items()}


# --------------------------------------------------------------------------- specs


def snap(name: str, value: ParamValue) -> ParamValue:
    """``value`` moved to the nearest grid point of ``name`` (ties: the lower one)."""
    best = nearest(GRID[name], value)
    return int(best) if name != "surprise_pct" else float(best)


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the code reads, snapped to the grid; no blocks."""
    params = {k: snap(k, spec.parameters.get(k, d)) for k, d in DEFAULTS.items()}
    return settled(spec, KIND, params)


def drift_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = False
) -> StrategySpec:
    """An earnings-drift spec with ``parameters``, reconciled and named."""
    return named(reconcile(new_spec(KIND, APPROACH, parameters, long_short=long_short)))


def named(spec: StrategySpec) -> StrategySpec:
    """Named by its side and every parameter, so two specs never share a name."""
    p = spec.parameters
    side = "ls" if spec.long_short else "long"
    name = (
        f"{KIND}-{side} | surprise {float(p['surprise_pct']):g}%, hold {p['hold_bars']}, "
        f"delay {p['entry_delay']}"
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


def signature(spec: StrategySpec, table: EventTable) -> tuple:
    """What ``spec`` trades on ``table``: the reports it acts on (with their side), its delay
    and its holding. Two specs with one signature place the same orders."""
    p = spec.parameters
    thr = float(p["surprise_pct"])
    acted = tuple(
        (ticker, e.day, 1 if e.surprise_pct >= thr else -1)
        for ticker in sorted(table)
        for e in table[ticker]
        if e.surprise_pct >= thr or (spec.long_short and e.surprise_pct <= -thr)
    )
    return acted, int(p["hold_bars"]), int(p["entry_delay"])


def propose(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    table: EventTable | None = None,
    tried: Iterable[StrategySpec] = (),
) -> list[Proposal]:
    """Up to ``n`` fresh specs (no trial key in ``seen``), deterministic for ``rng``.

    INITIAL and RESEARCH (or no own best yet): the listed ideas, then random grid points.
    TUNE and FIX: grid steps around the best. REFINE: the other side first (long only <->
    long/short), then grid steps. With the search's ``table``, a spec that would trade exactly
    as one of ``tried``, the best or another proposal does (a threshold between two reports'
    surprises, long/short without a miss that large) is not proposed: the gate would count a
    trial that cannot differ."""
    taken = set(seen)
    out: list[Proposal] = []
    traded = set()
    if table is not None:
        known = [*tried, *([best[1]] if best is not None else [])]
        traded = {signature(reconcile(spec), table) for spec in known}

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) >= n or spec.trial_key() in taken:
            return
        if table is not None:
            sig = signature(spec, table)
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
            add(spec, best_id, "tune around the best so far")
    for params, long_short, note in IDEAS:
        add(drift_spec(params, long_short=long_short), None, f"new idea: {note}")
    for _ in range(200):  # every listed idea tried: random grid points
        if len(out) >= n:
            break
        params = {k: rng.choice(g) for k, g in GRID.items()}
        add(drift_spec(params, long_short=rng.random() < 0.5), None, "random grid point")
    return out


# --------------------------------------------------------------------------- the source


def _table(table: EventTable) -> list[str]:
    lines = ["EVENTS = {"]
    for ticker in sorted(table):
        name = '"' + ticker.replace("\\", "").replace('"', "") + '"'
        rows = table[ticker]
        if not rows:
            lines.append(f"    {name}: (),")
            continue
        lines.append(f"    {name}: (")
        lines += [f"        ({int(e.day)}, {float(e.surprise_pct)!r})," for e in rows]
        lines.append("    ),")
    lines.append("}")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: earnings_drift ({side}). {n} reports embedded for {tickers}.
    A report whose surprise is at least surprise_pct percent of the consensus (or, long/short,
    at most minus that) opens a position entry_delay bars after the first bar that may know
    it (its day in EVENTS); the order fills at the next open and the position is closed
    hold_bars bars after the entry bar. A later report the same way extends the holding.
    """

    params = (
        ("surprise_pct", {surprise_pct!r}),
        ("hold_bars", {hold_bars}),
        ("entry_delay", {entry_delay}),
        ("allow_short", {allow_short}),
        ("fraction", {fraction!r}),
        ("ticker", ""),  # which reports to trade; default: the feed's name
    )

    def __init__(self):
        self.events = self._events()
        self.cursor = 0
        self.order = None
        self.side = 0  # the side of the report waiting to be entered
        self.enter_at = None  # bar number of that entry
        self.exit_at = None  # bar number of the open position's exit

    def _events(self):
        name = self.p.ticker or self.data._name
        if name in EVENTS:
            return EVENTS[name]
        if len(EVENTS) == 1:
            return list(EVENTS.values())[0]
        source = self.data.p.dataname
        if isinstance(source, str):  # a CSV path under plain backtrader: its stem is the ticker
            stem = source.replace("\\\\", "/").split("/")[-1].split(".")[0].upper()
            return EVENTS.get(stem, ())
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
        while self.cursor < len(self.events) and self.events[self.cursor][0] <= today:
            known, surprise = self.events[self.cursor]
            self.cursor += 1
            if now == 1 and known < today:
                continue  # reported before the first bar: its entry bar is not in this run
            if surprise >= self.p.surprise_pct:
                self.side, self.enter_at = 1, now + self.p.entry_delay
            elif self.p.allow_short and surprise <= -self.p.surprise_pct:
                self.side, self.enter_at = -1, now + self.p.entry_delay
        if self.order is not None:
            return  # wait for the working order
        held = self.position.size
        if self.enter_at is not None and now >= self.enter_at:
            side, self.enter_at = self.side, None
            self.exit_at = now + self.p.hold_bars
            if held * side <= 0:
                self.order = self.order_target_percent(target=side * self.p.fraction)
            return
        if held != 0 and self.exit_at is not None and now >= self.exit_at:
            self.exit_at = None
            self.order = self.close()
'''


def render(spec: StrategySpec, table: EventTable) -> str:
    """The complete module for ``spec`` trading ``table``'s reports; passes ``validate_code``."""
    if spec.family.value != KIND:
        raise ValueError(f"spec {spec.name!r} is not an {KIND} spec")
    p = reconcile(spec).parameters
    title = "".join(ch if ch.isprintable() else " " for ch in spec.name)
    title = title.replace("\\", "/").replace('"', "'")
    body = _CLASS.format(
        class_name=CLASS_NAME,
        title=title,
        side="long and short" if spec.long_short else "long only",
        n=sum(len(v) for v in table.values()),
        tickers=", ".join(sorted(table)) or "no ticker",
        surprise_pct=float(p["surprise_pct"]),
        hold_bars=int(p["hold_bars"]),
        entry_delay=int(p["entry_delay"]),
        allow_short=bool(spec.long_short),
        fraction=FRACTION,
    )
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import backtrader as bt",
        "",
        "# ticker -> ((first tradable yyyymmdd, EPS surprise in % of the consensus), ...),",
        "# computed on the trusted side from the reports known by the window's end.",
        *_table(table),
    ]
    return "\n".join(head) + body
