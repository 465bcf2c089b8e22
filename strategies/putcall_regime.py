"""A contrarian put/call regime: specs, proposals, the point-in-time series and the source.

The CBOE put/call ratio is market-wide fear: when traders buy many puts against calls (a
ratio high against its own trailing history) forward returns have tended to be above
normal, and when they buy few (complacency) weak. The family smooths the ratio (an EMA of
``span`` sessions), scores the smoothed value against its last ``lookback`` values (a
z-score), holds the stock long while the score is at least ``entry_z`` and leaves when it
falls below ``exit_z`` or after ``hold_bars`` bars; long/short also holds it short while the
score is at most ``-entry_z`` (leaving above ``-exit_z``).

The sandboxed child reads no file, so the trusted side embeds the ratio: ((first tradable
yyyymmdd, ratio), ...). A day's ratio is known after that day's close (``altdata.corpus``:
close + a publication delay), so its first tradable day is the next NYSE session: the first
daily bar whose close decision may use it; the order it triggers fills at the bar after.
The keys are shifted on the trusted side, so the strategy cannot look ahead: it reads an
entry only on a bar dated on or after its key. ``series`` cuts the table at a day exactly as
``AltTable.as_of_day`` does: the search's code carries the ratios known by the in-sample end
only, the holdout's through the holdout end.

The signal's arithmetic (``ema_step``, ``zscore``, ``regime_side``) is written once, here,
and its source is copied into the strategy: the tests of these functions test the code the
child runs.

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Iterable
from datetime import date
from typing import NamedTuple

from altdata.pit import KNOWN_AT, AltTable
from strategies.earnings_drift import date_key, first_tradable
from strategies.family_api import Proposal
from strategies.param_grid import nearest, neighbour_params, new_spec, settled
from strategies.spec import ParamValue, StrategySpec

KIND = "putcall_regime"
CLASS_NAME = "PutCallRegime"
TABLE = "put_call"  # altdata.corpus's name for options/cboe_putcall_daily_2006_2019.csv
APPROACH = (
    "Contrarian put/call regime: hold the stock while the market-wide put/call ratio is "
    "extremely high against its own trailing history (fear), and, long/short, short it while "
    "the ratio is extremely low (complacency)."
)
# The ratio columns the family trades: False -> equity options only, True -> all options.
COLUMNS = {False: "equity_pc", True: "total_pc"}
FRACTION = 0.95  # of the account's value in the position
# Calendar days without a new ratio after which the series counts as ended (the longest gap
# between two published days in 2006-2019 is 5 days): the strategy is flat from then on.
STALE_DAYS = 7

# The parameter grid (every value snapped to it) and the defaults.
GRID: dict[str, tuple[float, ...]] = {
    "total_ratio": (False, True),
    "span": (1, 3, 5, 10),
    "lookback": (20, 60, 120, 250),
    "entry_z": (1.0, 1.5, 2.0, 2.5),
    "exit_z": (-0.5, 0.0, 0.5, 1.0),
    "hold_bars": (5, 10, 20, 40, 60),
}
FLOATS = ("entry_z", "exit_z")
DEFAULTS: dict[str, ParamValue] = {
    "total_ratio": False,
    "span": 5,
    "lookback": 60,
    "entry_z": 1.5,
    "exit_z": 0.5,
    "hold_bars": 20,
}
# First-iteration (and research-round) diversity: (parameters, long_short, note).
IDEAS: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, False, "defaults"),
    ({"entry_z": 2.0, "hold_bars": 40}, False, "strong fear, hold 40"),
    ({}, True, "long/short"),
    ({"total_ratio": True}, False, "total put/call"),
    (
        {"span": 1, "lookback": 20, "entry_z": 1.0, "exit_z": 0.0, "hold_bars": 10},
        False,
        "raw ratio, short history, quick",
    ),
    (
        {"span": 10, "lookback": 250, "entry_z": 1.0, "exit_z": 0.0, "hold_bars": 60},
        False,
        "slow ratio against a year",
    ),
    ({"lookback": 120, "entry_z": 2.0, "exit_z": 0.0}, True, "long/short, strong extremes"),
    ({"span": 3, "entry_z": 2.5, "exit_z": 1.0, "hold_bars": 5}, False, "panic spikes, hold 5"),
)


class Point(NamedTuple):
    """One published ratio as the strategy reads it."""

    day: int  # yyyymmdd of the first bar that may decide on it
    ratio: float  # puts / calls


RatioSeries = dict[bool, tuple[Point, ...]]  # keyed like ``COLUMNS``


# --------------------------------------------------------------------------- the series


def series(table: AltTable, *, through: date) -> RatioSeries:
    """The ratios known by the close of ``through`` (``AltTable.as_of_day``: the trusted
    side's cut), each keyed by its first tradable day, in time order; one series per column
    of ``COLUMNS``. A row without a finite positive ratio is left out."""
    known = table.as_of_day(through)
    firsts = {moment: date_key(first_tradable(moment)) for moment in known[KNOWN_AT].unique()}
    out: RatioSeries = {}
    for total, column in COLUMNS.items():
        points = []
        for moment, value in zip(known[KNOWN_AT], known[column], strict=True):
            ratio = float(value)
            if math.isfinite(ratio) and ratio > 0:
                points.append(Point(firsts[moment], round(ratio, 6)))
        out[total] = tuple(sorted(points))
    return out


def last_day(points: tuple[Point, ...]) -> date | None:
    """The first tradable day of the series' last ratio (None: empty)."""
    if not points:
        return None
    key = points[-1].day
    return date(key // 10000, key // 100 % 100, key % 100)


def flat_after(points: tuple[Point, ...]) -> date | None:
    """The last day the strategy may hold a position on ``points``: ``STALE_DAYS`` after the
    last ratio's first tradable day (None: empty)."""
    last = last_day(points)
    return None if last is None else date.fromordinal(last.toordinal() + STALE_DAYS)


# --------------------------------------------------------------------------- the signal
# Copied verbatim into the strategy (only ``math`` and builtins; no annotations).


def ema_step(previous, value, span):
    """The exponential moving average of span ``span`` after ``value`` (the first value
    seeds it; span 1 is the raw value)."""
    if previous is None:
        return value
    return previous + 2.0 / (span + 1.0) * (value - previous)


def zscore(window):
    """The last value of ``window`` against the window's mean and sample standard deviation;
    None with fewer than two values or no spread."""
    n = len(window)
    if n < 2:
        return None
    mean = sum(window) / n
    var = sum((x - mean) * (x - mean) for x in window) / (n - 1)
    if var <= 1e-18:
        return None
    return (window[-1] - mean) / math.sqrt(var)


def regime_side(z, held, bars_held, blocked, entry_z, exit_z, hold_bars, allow_short):
    """(the side to hold after this bar, the side blocked from re-entry).

    ``held``: the side held now (1, -1 or 0) for ``bars_held`` bars. Long: entered at a score
    of at least ``entry_z``, left below ``exit_z``; short (``allow_short``): at most
    ``-entry_z``, left above ``-exit_z``. A position held ``hold_bars`` bars is closed and its
    side blocked until the score leaves that regime, so one regime makes one trade. No score
    (warming up, or the series ended): flat."""
    if z is None:
        return 0, 0
    if (blocked == 1 and z < exit_z) or (blocked == -1 and z > -exit_z):
        blocked = 0
    side = held
    if (held == 1 and z < exit_z) or (held == -1 and z > -exit_z):
        side = 0
    elif held != 0 and bars_held >= hold_bars:
        side, blocked = 0, held
    if side == 0:
        if z >= entry_z and blocked != 1:
            side = 1
        elif allow_short and z <= -entry_z and blocked != -1:
            side = -1
    return side, blocked


def scores(ratios: Iterable[float], span: int, lookback: int) -> list[float | None]:
    """The score after each ratio, as the strategy computes it (None while warming up)."""
    level = None
    window: list[float] = []
    out: list[float | None] = []
    for ratio in ratios:
        level = ema_step(level, ratio, span)
        window = [*window[-(lookback - 1) :], level] if lookback > 1 else [level]
        out.append(zscore(window) if len(window) >= lookback else None)
    return out


# --------------------------------------------------------------------------- specs


def snap(name: str, value: ParamValue) -> ParamValue:
    """``value`` moved to the nearest grid point of ``name`` (ties: the lower one)."""
    best = nearest(GRID[name], value)
    if name == "total_ratio":
        return bool(best)
    return float(best) if name in FLOATS else int(best)


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the code reads, snapped to the grid, the exit threshold below
    the entry's (else the highest grid exit below it); no blocks."""
    params = {k: snap(k, spec.parameters.get(k, d)) for k, d in DEFAULTS.items()}
    if params["exit_z"] >= params["entry_z"]:
        params["exit_z"] = max(g for g in GRID["exit_z"] if g < params["entry_z"])
    return settled(spec, KIND, params)


def regime_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = False
) -> StrategySpec:
    """The family's spec with ``parameters`` over the defaults, snapped to the grid."""
    return named(reconcile(new_spec(KIND, APPROACH, parameters, long_short=long_short)))


def named(spec: StrategySpec) -> StrategySpec:
    """Named by its side and every parameter, so two specs never share a name."""
    p = spec.parameters
    side = "ls" if spec.long_short else "long"
    ratio = "total" if p["total_ratio"] else "equity"
    name = (
        f"{KIND}-{side} | {ratio} p/c, ema {p['span']}, z over {p['lookback']}, "
        f"in {float(p['entry_z']):g} out {float(p['exit_z']):g}, hold {p['hold_bars']}"
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


def propose(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
) -> list[Proposal]:
    """Up to ``n`` fresh specs (no trial key in ``seen``), deterministic for ``rng``.

    INITIAL and RESEARCH (or no own best yet): the listed ideas, then random grid points.
    TUNE and FIX: grid steps around the best. REFINE: the other side first (long only <->
    long/short), then grid steps."""
    taken = set(seen)
    out: list[Proposal] = []

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) < n and spec.trial_key() not in taken:
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
        add(regime_spec(params, long_short=long_short), None, f"new idea: {note}")
    for _ in range(200):  # every listed idea tried: random grid points
        if len(out) >= n:
            break
        params = {k: rng.choice(g) for k, g in GRID.items()}
        add(regime_spec(params, long_short=rng.random() < 0.5), None, "random grid point")
    return out


# --------------------------------------------------------------------------- the source


def _series_lines(points: tuple[Point, ...]) -> list[str]:
    per_line = 4
    lines = ["SERIES = ("]
    for i in range(0, len(points), per_line):
        chunk = points[i : i + per_line]
        lines.append("    " + " ".join(f"({int(p.day)}, {float(p.ratio)!r})," for p in chunk))
    lines.append(")")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: putcall_regime ({side}). {n} CBOE {column} ratios embedded, first tradable
    {first} .. {last}: no newer ratio, so flat after {flat}.
    Each bar reads the ratios whose key (the first bar that may know them) is on or before
    its date, smooths them (EMA of span sessions) and scores the smoothed value against its
    last lookback values (z). Long while z >= entry_z until z < exit_z; long/short also
    short while z <= -entry_z until z > -exit_z; hold_bars bars at most per regime. Orders
    are decided at the close and fill at the next bar's open.
    """

    params = (
        ("span", {span}),
        ("lookback", {lookback}),
        ("entry_z", {entry_z!r}),
        ("exit_z", {exit_z!r}),
        ("hold_bars", {hold_bars}),
        ("allow_short", {allow_short}),
        ("fraction", {fraction!r}),
        ("stale_days", {stale_days}),  # no new ratio for longer: the series ended, be flat
    )

    def __init__(self):
        self.cursor = 0
        self.level = None  # the smoothed ratio
        self.window = []  # its last lookback values
        self.last_key = 0  # the key of the newest ratio read
        self.z = None
        self.order = None
        self.bars_held = 0
        self.blocked = 0

    def notify_order(self, order):
        if order.status in (order.Submitted, order.Accepted, order.Partial):
            return
        if self.order is not None and order.ref == self.order.ref:
            self.order = None

    def _read(self, today):
        while self.cursor < len(SERIES) and SERIES[self.cursor][0] <= today:
            key, ratio = SERIES[self.cursor]
            self.cursor += 1
            self.level = ema_step(self.level, ratio, self.p.span)
            self.window.append(self.level)
            if len(self.window) > self.p.lookback:
                self.window.pop(0)
            self.last_key = key

    def _score(self, day):
        if self.last_key == 0 or len(self.window) < self.p.lookback:
            return None
        k = self.last_key
        newest = day.replace(year=k // 10000, month=k // 100 % 100, day=k % 100)
        if (day - newest).days > self.p.stale_days:
            return None
        return zscore(self.window)

    def next(self):
        day = self.data.datetime.date(0)
        self._read(day.year * 10000 + day.month * 100 + day.day)
        held = self.position.size
        self.bars_held = self.bars_held + 1 if held else 0
        if self.order is not None:
            return  # wait for the working order
        self.z = self._score(day)
        now = 1 if held > 0 else -1 if held < 0 else 0
        side, self.blocked = regime_side(
            self.z, now, self.bars_held, self.blocked, self.p.entry_z, self.p.exit_z,
            self.p.hold_bars, self.p.allow_short,
        )
        if side == now:
            return
        if side == 0:
            self.order = self.close()
        else:
            self.order = self.order_target_percent(target=side * self.p.fraction)
'''


def _day_text(day: date | None) -> str:
    return "none" if day is None else day.isoformat()


def render(spec: StrategySpec, table: RatioSeries) -> str:
    """The complete module for ``spec`` on ``table``'s ratios; passes ``validate_code``."""
    if spec.family.value != KIND:
        raise ValueError(f"spec {spec.name!r} is not a {KIND} spec")
    spec = reconcile(spec)
    p = spec.parameters
    total = bool(p["total_ratio"])
    points = table.get(total, ())
    title = "".join(ch if ch.isprintable() else " " for ch in named(spec).name)
    title = title.replace("\\", "/").replace('"', "'")
    body = _CLASS.format(
        class_name=CLASS_NAME,
        title=title,
        side="long and short" if spec.long_short else "long only",
        n=len(points),
        column=COLUMNS[total],
        first=_day_text(last_day(points[:1])),
        last=_day_text(last_day(points)),
        flat=_day_text(flat_after(points)),
        span=int(p["span"]),
        lookback=int(p["lookback"]),
        entry_z=float(p["entry_z"]),
        exit_z=float(p["exit_z"]),
        hold_bars=int(p["hold_bars"]),
        allow_short=bool(spec.long_short),
        fraction=FRACTION,
        stale_days=STALE_DAYS,
    )
    signal = [inspect.getsource(f).rstrip() for f in (ema_step, zscore, regime_side)]
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import math",
        "",
        "import backtrader as bt",
        "",
        f"# ((first tradable yyyymmdd, CBOE {COLUMNS[total]}), ...): a day's ratio is known after",
        "# its close, so it is keyed by the next session; computed on the trusted side from the",
        "# ratios known by the window's end.",
        *_series_lines(points),
        "",
        "",
        "\n\n\n".join(signal),
    ]
    return "\n".join(head) + body
