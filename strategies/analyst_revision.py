"""Analyst-revision drift: specs, proposals, the event table and the strategy source.

After an analyst upgrade (or a price-target raise) a stock tends to drift the revision's way
for days to weeks; after a downgrade, the other way. The family goes long after an upgrade
(long/short: short after a downgrade; long only: a downgrade closes the long), optionally only
when at least ``min_actions`` distinct firms revised the same way within ``lookback_days``
calendar days (a consensus of revisions), and with ``count_targets`` price-target raises and
cuts count as revisions too. It enters ``entry_delay`` bars after the first bar that may know
the triggering action and leaves ``hold_bars`` bars later.

The sandboxed child reads no file, so the trusted side embeds the actions: ticker ->
((first tradable yyyymmdd, its day number, side, kind, firm id), ...). An action's first
tradable day is the first NYSE session whose close is at or after its timestamp (before the
open or during the session: that day; after the close: the next session), the rule
``strategies.earnings_drift.first_tradable`` applies; the order it triggers fills at the next
bar's open. ``events`` cuts the table at a day exactly as ``AltTable.as_of_day`` does: the
search's code carries the actions known by the in-sample end only, the holdout's through the
holdout end. Firms are embedded as integer ids (no third-party text reaches the code).

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from datetime import date
from typing import NamedTuple

from altdata.pit import KNOWN_AT, TICKER, AltTable
from strategies.earnings_drift import date_key, first_tradable
from strategies.family_api import Proposal
from strategies.param_grid import nearest, neighbour_params, new_spec, settled
from strategies.spec import ParamValue, StrategySpec

KIND = "analyst_revision"
CLASS_NAME = "AnalystRevision"
APPROACH = (
    "Analyst-revision drift: after an upgrade (or a price-target raise), optionally confirmed "
    "by other firms revising the same way, hold the stock the revision's way for a fixed "
    "number of bars."
)
FRACTION = 0.95  # of the account's value in the position
RATING, TARGET = 0, 1  # an event's kind: a rating change, or a price-target change only

# The parameter grid (every value snapped to it) and the defaults.
GRID: dict[str, tuple[int, ...]] = {
    "min_actions": (1, 2, 3),
    "lookback_days": (5, 10, 20, 40, 60),
    "hold_bars": (5, 10, 20, 40, 60),
    "entry_delay": (0, 1, 2, 5),
    "count_targets": (0, 1),
}
DEFAULTS: dict[str, ParamValue] = {
    "min_actions": 1,
    "lookback_days": 20,
    "hold_bars": 20,
    "entry_delay": 0,
    "count_targets": 0,
}
# First-iteration (and research-round) diversity: (parameters, long_short, note).
IDEAS: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, False, "defaults: upgrades, hold 20"),
    ({"count_targets": 1}, False, "upgrades and target raises"),
    ({"min_actions": 2, "count_targets": 1}, False, "two firms within 20 days"),
    ({}, True, "long/short"),
    ({"hold_bars": 60}, False, "hold 60"),
    ({"hold_bars": 5, "count_targets": 1}, False, "any raise, hold 5"),
    ({"entry_delay": 1, "hold_bars": 40}, False, "delay 1, hold 40"),
    ({"min_actions": 2, "lookback_days": 40, "count_targets": 1}, True, "consensus both ways"),
)


class Event(NamedTuple):
    """One rating action as the strategy reads it."""

    day: int  # yyyymmdd of the first bar that may decide on it
    ordinal: int  # that day's number (``date.toordinal``): the lookback in calendar days
    side: int  # +1 an upgrade or a target raise, -1 a downgrade or a target cut
    kind: int  # RATING (the rating changed) or TARGET (only the price target moved)
    firm: int  # the firm's id within the table (order of first appearance)


EventTable = dict[str, tuple[Event, ...]]
Trigger = tuple[int, int]  # (yyyymmdd, side)


# --------------------------------------------------------------------------- the events


def action_side(action: object, pt_change: object) -> tuple[int, int] | None:
    """(side, kind) of one row: a rating change decides (an upgrade that also cuts the target
    is an upgrade); else a price-target raise or cut; None for anything else (maintained,
    reiterated, initiated, a first target)."""
    verb = str(action).strip().lower() if isinstance(action, str) else ""
    if verb.startswith("upgrade"):
        return 1, RATING
    if verb.startswith("downgrade"):
        return -1, RATING
    move = str(pt_change).strip().lower() if isinstance(pt_change, str) else ""
    if move == "raises":
        return 1, TARGET
    if move == "lowers":
        return -1, TARGET
    return None


# A firm's name compared loosely: trailing words that vary between headlines of one firm
# ("Nomura Instinet", "Cowen & Co.", "BMO Capital Markets") and a few known aliases.
_FIRM_TAIL = frozenset(
    (
        "securities",
        "capital",
        "markets",
        "company",
        "co",
        "partners",
        "group",
        "research",
        "instinet",
        "isi",
        "crowd",
        "genuity",
        "nicolaus",
    )
)
_FIRM_ALIAS = {
    "bankofamerica": "bofa",
    "citigroup": "citi",
    "goldmansachs": "goldman",
    "brileyfbr": "briley",
}
ROUNDUP = "benzinga"  # "Benzinga's Top Upgrades": a roundup repeating named firms' actions


def firm_key(firm: object) -> str:
    """A firm's name compared loosely ("B of A Securities" is "BofA Securities" is "Bank of
    America"); "" for no name."""
    words = re.sub(r"[^a-z0-9 ]", "", str(firm).lower()).split() if isinstance(firm, str) else []
    while len(words) > 1 and words[-1] in _FIRM_TAIL:
        words.pop()
    key = "".join(words)
    return _FIRM_ALIAS.get(key, key)


def events(table: AltTable, tickers: Iterable[str], *, through: date) -> EventTable:
    """Each ticker's revisions known by the close of ``through`` (``AltTable.as_of_day``: the
    trusted side's cut) in time order; one firm's repeated headline for one revision (same
    day, side and kind) is kept once, and a news roundup ("Benzinga's Top Upgrades"), which
    repeats named firms' actions, not at all."""
    known = table.as_of_day(through)
    firms: dict[str, int] = {}
    for key in map(firm_key, known["firm"]):  # ids by first appearance: stable as the cut grows
        firms.setdefault(key, len(firms))
    out: EventTable = {}
    for ticker in tickers:
        rows = known[known[TICKER] == ticker]
        found: set[Event] = set()
        for known_at, action, pt_change, firm in zip(
            rows[KNOWN_AT], rows["action"], rows["pt_change"], rows["firm"], strict=True
        ):
            move = action_side(action, pt_change)
            if move is None or firm_key(firm).startswith(ROUNDUP):
                continue
            day = first_tradable(known_at)
            found.add(
                Event(date_key(day), day.toordinal(), move[0], move[1], firms[firm_key(firm)])
            )
        out[ticker] = tuple(sorted(found))
    return out


def triggers(
    rows: Sequence[Event],
    *,
    min_actions: int,
    lookback_days: int,
    count_targets: bool,
) -> list[Trigger]:
    """The (day, side) of each bar a revision triggers, in order: a counted revision (a rating
    change, or with ``count_targets`` a target move) when, counting it, at least
    ``min_actions`` distinct firms revised that way within the last ``lookback_days`` calendar
    days. A day with triggers both ways triggers nothing. The strategy's ``next`` applies the
    same rule; ``signature`` reads it."""
    counted = [e for e in rows if e.kind == RATING or count_targets]
    by_day: dict[int, set[int]] = {}
    first = 0  # the first counted revision inside the lookback (rows are in day order)
    for i, e in enumerate(counted):
        while counted[first].ordinal <= e.ordinal - lookback_days:
            first += 1
        firms = {o.firm for o in counted[first : i + 1] if o.side == e.side}
        if len(firms) >= min_actions:
            by_day.setdefault(e.day, set()).add(e.side)
    return [(day, sides.pop()) for day, sides in sorted(by_day.items()) if len(sides) == 1]


# --------------------------------------------------------------------------- specs


def snap(name: str, value: ParamValue) -> int:
    """``value`` moved to the nearest grid point of ``name`` (ties: the lower one)."""
    return int(nearest(GRID[name], value))


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the code reads, snapped to the grid; no blocks."""
    params = {k: snap(k, spec.parameters.get(k, d)) for k, d in DEFAULTS.items()}
    return settled(spec, KIND, params)


def revision_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = False
) -> StrategySpec:
    """The family's spec with ``parameters`` over the defaults, snapped to the grid."""
    return named(reconcile(new_spec(KIND, APPROACH, parameters, long_short=long_short)))


def named(spec: StrategySpec) -> StrategySpec:
    """Named by its side and every parameter, so two specs never share a name."""
    p = spec.parameters
    side = "ls" if spec.long_short else "long"
    what = "ratings+targets" if p["count_targets"] else "ratings"
    name = (
        f"{KIND}-{side} | {what}, {p['min_actions']} firm(s) in {p['lookback_days']}d, "
        f"hold {p['hold_bars']}, delay {p['entry_delay']}"
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


def signature(spec: StrategySpec, table: EventTable, *, start: int = 0) -> tuple:
    """What ``spec`` trades on ``table``: the triggers on or after ``start`` (yyyymmdd; the
    earlier revisions still count towards a consensus), its delay and its holding. Long only,
    a down trigger closes a long, so it is part of the signature too. Two specs with one
    signature place the same orders."""
    p = spec.parameters
    acted = tuple(
        (ticker, day, side)
        for ticker in sorted(table)
        for day, side in triggers(
            table[ticker],
            min_actions=int(p["min_actions"]),
            lookback_days=int(p["lookback_days"]),
            count_targets=bool(p["count_targets"]),
        )
        if day >= start
    )
    return acted, bool(spec.long_short), int(p["hold_bars"]), int(p["entry_delay"])


def propose(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    table: EventTable | None = None,
    start: int = 0,
    tried: Iterable[StrategySpec] = (),
) -> list[Proposal]:
    """Up to ``n`` fresh specs (no trial key in ``seen``), deterministic for ``rng``.

    INITIAL and RESEARCH (or no own best yet): the listed ideas, then random grid points.
    TUNE and FIX: grid steps around the best. REFINE: the other side first (long only <->
    long/short), then grid steps. With the search's ``table`` (triggers from ``start``), a
    spec that would trade exactly as one of ``tried``, the best or another proposal does (a
    lookback when one firm suffices, a consensus no two firms ever reach) is not proposed:
    the gate would count a trial that cannot differ."""
    taken = set(seen)
    out: list[Proposal] = []
    traded = set()
    if table is not None:
        known = [*tried, *([best[1]] if best is not None else [])]
        traded = {signature(reconcile(spec), table, start=start) for spec in known}

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) >= n or spec.trial_key() in taken:
            return
        if table is not None:
            sig = signature(spec, table, start=start)
            if sig in traded:
                return
            traded.add(sig)
        taken.add(spec.trial_key())
        out.append(Proposal(spec, parent, why))

    if best is not None and route in ("TUNE", "FIX", "REFINE"):
        best_id, base = best
        if route == "REFINE":
            flipped = named(reconcile(base.model_copy(update={"long_short": not base.long_short})))
            add(flipped, best_id, f"refine: {'long/short' if flipped.long_short else 'long only'}")
        for spec in neighbours(base, rng):
            add(spec, best_id, "tune around the best so far")
    for params, long_short, note in IDEAS:
        add(revision_spec(params, long_short=long_short), None, f"new idea: {note}")
    for _ in range(200):  # every listed idea tried: random grid points
        if len(out) >= n:
            break
        params = {k: rng.choice(g) for k, g in GRID.items()}
        add(revision_spec(params, long_short=rng.random() < 0.5), None, "random grid point")
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
        lines += [
            f"        ({int(e.day)}, {int(e.ordinal)}, {int(e.side)}, {int(e.kind)}, "
            f"{int(e.firm)}),"
            for e in rows
        ]
        lines.append("    ),")
    lines.append("}")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: analyst_revision ({side}). {n} revisions embedded for {tickers}.
    A counted revision (a rating change; with count_targets also a price-target move) for
    which at least min_actions distinct firms revised the same way within the last
    lookback_days calendar days triggers on its day in EVENTS (a day with triggers both
    ways: none). An up trigger (or, long/short, a down one) opens a position entry_delay bars
    later; the order fills at the next open and the position is closed hold_bars bars after
    the entry bar. Long only, a down trigger closes the long. A later trigger the same way
    extends the holding.
    """

    params = (
        ("min_actions", {min_actions}),
        ("lookback_days", {lookback_days}),
        ("hold_bars", {hold_bars}),
        ("entry_delay", {entry_delay}),
        ("count_targets", {count_targets}),
        ("allow_short", {allow_short}),
        ("fraction", {fraction!r}),
        ("ticker", ""),  # which revisions to trade; default: the feed's name
    )

    def __init__(self):
        self.events = self._events()
        self.cursor = 0
        self.counted = []  # (day number, side, firm) of the counted revisions seen so far
        self.order = None
        self.side = 0  # the side of the trigger waiting to be acted on
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

    def _agrees(self, ordinal, side):
        """How many distinct firms revised ``side``'s way in the lookback ending ``ordinal``."""
        since = ordinal - self.p.lookback_days
        return len(set(f for o, s, f in self.counted if s == side and o > since))

    def notify_order(self, order):
        if order.status in (order.Submitted, order.Accepted, order.Partial):
            return
        if self.order is not None and order.ref == self.order.ref:
            self.order = None

    def next(self):
        day = self.data.datetime.date(0)
        today = day.year * 10000 + day.month * 100 + day.day
        now = len(self)
        sides = set()
        while self.cursor < len(self.events) and self.events[self.cursor][0] <= today:
            known, ordinal, side, kind, firm = self.events[self.cursor]
            self.cursor += 1
            if kind != 0 and not self.p.count_targets:
                continue
            self.counted.append((ordinal, side, firm))
            if now == 1 and known < today:
                continue  # known before the first bar: a consensus input, not a trigger here
            if self._agrees(ordinal, side) >= self.p.min_actions:
                sides.add(side)
        if len(sides) == 1:
            self.side, self.enter_at = sides.pop(), now + self.p.entry_delay
        if self.order is not None:
            return  # wait for the working order
        held = self.position.size
        if self.enter_at is not None and now >= self.enter_at:
            side, self.enter_at = self.side, None
            if side < 0 and not self.p.allow_short:
                self.exit_at = None
                if held > 0:
                    self.order = self.close()
                return
            self.exit_at = now + self.p.hold_bars
            if held * side <= 0:
                self.order = self.order_target_percent(target=side * self.p.fraction)
            return
        if held != 0 and self.exit_at is not None and now >= self.exit_at:
            self.exit_at = None
            self.order = self.close()
'''


def render(spec: StrategySpec, table: EventTable) -> str:
    """The complete module for ``spec`` trading ``table``'s revisions; passes
    ``validate_code``."""
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
        min_actions=int(p["min_actions"]),
        lookback_days=int(p["lookback_days"]),
        hold_bars=int(p["hold_bars"]),
        entry_delay=int(p["entry_delay"]),
        count_targets=bool(p["count_targets"]),
        allow_short=bool(spec.long_short),
        fraction=FRACTION,
    )
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import backtrader as bt",
        "",
        "# ticker -> ((first tradable yyyymmdd, its day number, side +1/-1, kind 0 rating",
        "# change / 1 price-target move, firm id), ...), computed on the trusted side from the",
        "# rating actions known by the window's end.",
        *_table(table),
    ]
    return "\n".join(head) + body
