"""The decision pipeline as a strategy family: specs, proposals, and the replay's source.

The analysts -> debate -> trader -> risk pipeline (``swarm.analyze``) decides on each
rebalance date; this module only turns those decisions, computed on the trusted side, into a
standalone Backtrader module that replays them. The sandboxed child reads no file, so the
decisions are embedded as a literal table: ticker -> yyyymmdd -> (direction, stop, target,
size). A decision dated D used bars up to D's close; its order is placed on D's bar and fills
at the next bar's open, with the thesis's stop and target as the bracket's children and the
risk engine's size (scaled by the account's value over the capital it was sized on).

Pure: nothing here imports ``swarm`` (the layering of DESIGN.md).
"""

from __future__ import annotations

import random
from typing import NamedTuple

from strategies.families import DECISION_PARAMS, reconcile
from strategies.family_api import Proposal
from strategies.mutate import tune
from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.spec import ParamValue, PipelineFamily, StrategySpec

FAMILY = PipelineFamily.DECISION_PIPELINE
CLASS_NAME = "DecisionPipelineReplay"
APPROACH = (
    "Analysts, a bull/bear debate, a trader and a risk team decide on each weekly rebalance "
    "date from the data up to it; the decisions are replayed as bracket orders at the "
    "thesis's stop and target with the risk engine's size, held at most the horizon."
)
# First-iteration diversity, cheapest first: sizing, side and horizon reuse the same pipeline
# decisions (no new analyst or debate call); the floor and the rounds need new ones.
INITIAL_MOVES: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, True, "defaults"),
    ({}, False, "long only"),
    ({"horizon_bars": 20}, True, "horizon 20"),
    ({"conviction_floor": 0.4}, True, "conviction floor 0.4"),
    ({"debate_rounds": 1}, True, "no rebuttal"),
    ({"risk_pct": 0.02}, True, "risk 2%"),
    ({"horizon_bars": 5}, True, "horizon 5"),
)
# Parameters that change no decision of the rules brain; with that brain, proposals never
# move them (a trial that cannot differ is a wasted trial and a needless count against the
# deflated Sharpe). None now: the rules' rebuttals can rebut a point and move the verdict.
RULES_INERT_PARAMS: tuple[str, ...] = ()


class DecisionRow(NamedTuple):
    """One tradable decision as the replay reads it."""

    direction: int  # +1 long (BUY), -1 short (SELL)
    stop: float
    target: float
    size: int  # the risk engine's quantity on ``capital``


DecisionTable = dict[str, dict[int, DecisionRow]]


def date_key(day) -> int:
    """yyyymmdd of a date: how the replay looks a bar's decision up."""
    return day.year * 10000 + day.month * 100 + day.day


def decision_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = True, note: str = ""
) -> StrategySpec:
    """A decision-pipeline spec with ``parameters``, named after its side and ``note``."""
    name = "decision_pipeline" + ("-ls" if long_short else "-long") + (f" | {note}" if note else "")
    spec = StrategySpec(
        family=FAMILY,
        name=name,
        approach=APPROACH,
        entry="decision_pipeline",
        sizing="risk_engine",
        long_short=long_short,
        parameters=dict(parameters or {}),
    )
    return reconcile(spec)


def is_decision_spec(spec: StrategySpec) -> bool:
    """Whether ``spec`` is the decision pipeline's."""
    return spec.family == FAMILY


def pipeline_parameters(spec: StrategySpec) -> dict[str, ParamValue]:
    """The spec's parameters, defaults filled in."""
    return dict(reconcile(spec).parameters)


# --------------------------------------------------------------------------- proposals


def propose_decision_specs(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    frozen: tuple[str, ...] = (),
    space: ParamSpace = DEFAULT_SPACE,
) -> list[Proposal]:
    """Up to ``n`` fresh decision-pipeline specs for the gate's route.

    INITIAL (or nothing to build on): the defaults and single moves away from them.
    TUNE / FIX / RESEARCH: parameter moves around the best. REFINE: the other side
    (long only <-> long/short) first, a design change, then parameter moves. No proposal
    moves a ``frozen`` parameter away from its value in the spec it starts from
    (``RULES_INERT_PARAMS`` when the brain is rules). ``space``: the user's grid
    (``--param-space``) the parameter moves stay inside.
    """
    taken = set(seen)
    out: list[Proposal] = []

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        if len(out) < n and spec.trial_key() not in taken:
            taken.add(spec.trial_key())
            out.append(Proposal(spec, parent, why))

    if best is not None and route != "INITIAL":
        best_id, base = best
        if route == "REFINE":
            flipped = base.model_copy(update={"long_short": not base.long_short})
            side = "long/short" if flipped.long_short else "long only"
            add(_renamed(reconcile(flipped), f"refine: {side}"), best_id, f"refine: {side}")
        for spec in _tune(
            base, max(0, n - len(out)), rng=rng, seen=taken, frozen=frozen, space=space
        ):
            add(_named(spec), best_id, "tune around the best so far")
    for params, long_short, note in INITIAL_MOVES:
        if not set(params) & set(frozen):
            add(decision_spec(params, long_short=long_short, note=note), None, f"new idea: {note}")
    if len(out) < n:  # every listed idea already tried: perturb the defaults
        for spec in _tune(
            decision_spec(), n - len(out), rng=rng, seen=taken, frozen=frozen, space=space
        ):
            add(_named(spec), None, "perturbed defaults")
    return out


def _tune(
    base: StrategySpec,
    n: int,
    *,
    rng: random.Random,
    seen: set[str],
    frozen: tuple[str, ...],
    space: ParamSpace,
) -> list[StrategySpec]:
    """``tune`` without the moves of a ``frozen`` parameter (drawn again, a few rounds)."""
    if not frozen or n <= 0:
        return tune(base, n, rng=rng, seen=seen, space=space)
    keep = {k: base.parameters.get(k) for k in frozen}
    taken, out = set(seen), list[StrategySpec]()
    for _ in range(4):
        for spec in tune(base, 2 * (n - len(out)), rng=rng, seen=taken, space=space):
            taken.add(spec.trial_key())
            if len(out) < n and all(spec.parameters.get(k) == v for k, v in keep.items()):
                out.append(spec)
        if len(out) >= n:
            break
    return out


def _named(spec: StrategySpec) -> StrategySpec:
    """Named by every parameter away from the defaults, so two tunes of different parents
    never share a name."""
    moved = [f"{k} {v:g}" for k, v in spec.parameters.items() if v != DECISION_PARAMS.get(k)]
    return _renamed(spec, ", ".join(moved) or "defaults")


def _renamed(spec: StrategySpec, note: str) -> StrategySpec:
    root = "decision_pipeline" + ("-ls" if spec.long_short else "-long")
    return spec.model_copy(update={"name": f"{root} | {note}"})


# --------------------------------------------------------------------------- the replay


def _row(row: DecisionRow) -> str:
    # repr round-trips a float exactly: the replay's prices are the thesis's, to the bit.
    return f"({int(row.direction)}, {float(row.stop)!r}, {float(row.target)!r}, {int(row.size)})"


def _table(table: DecisionTable) -> list[str]:
    lines = ["DECISIONS = {"]
    for ticker in sorted(table):
        name = '"' + ticker.replace("\\", "").replace('"', "") + '"'
        if not table[ticker]:
            lines.append(f"    {name}: {{}},")
            continue
        lines.append(f"    {name}: {{")
        lines += [f"        {day}: {_row(r)}," for day, r in sorted(table[ticker].items())]
        lines.append("    },")
    lines.append("}")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: decision_pipeline ({side}). {n} decisions embedded for {tickers}.
    Pipeline: debate_rounds={debate_rounds}, conviction_floor={conviction_floor},
    risk_pct={risk_pct} (the risk engine's risk per trade), horizon {horizon} bars.
    A decision dated D (bars up to D's close) places a market entry on D's bar, filled at the
    next open, with the thesis's stop and target as its bracket; the position leaves at the
    stop, the target, after the horizon, or on a decision the other way.
    """

    params = (
        ("horizon_bars", {horizon}),
        ("allow_short", {allow_short}),
        ("ticker", ""),  # which table to replay; default: the feed's name
    )

    def __init__(self):
        self.entry = None  # the working entry order
        self.exit = None  # the working horizon / reversal exit
        self.children = []  # the bracket's stop and target
        self.entry_bar = None
        self.book = self._book()

    def _book(self):
        name = self.p.ticker or self.data._name
        if name in DECISIONS:
            return DECISIONS[name]
        if len(DECISIONS) == 1:
            return list(DECISIONS.values())[0]
        source = self.data.p.dataname
        if isinstance(source, str):  # a CSV path under plain backtrader: its stem is the ticker
            stem = source.replace("\\\\", "/").split("/")[-1].split(".")[0].upper()
            return DECISIONS.get(stem, {{}})
        return {{}}

    def notify_order(self, order):
        if order.status in (order.Submitted, order.Accepted, order.Partial):
            return
        # Notifications are clones: compare references.
        if self.entry is not None and order.ref == self.entry.ref:
            self.entry = None
            if order.status == order.Completed:
                self.entry_bar = len(self)
            else:
                self.children = []
        elif self.exit is not None and order.ref == self.exit.ref:
            self.exit = None
        if self.position.size == 0 and self.entry is None and self.exit is None:
            self.children = []
            self.entry_bar = None

    def next(self):
        if self.entry is not None or self.exit is not None:
            return  # wait for the working order
        day = self.data.datetime.date(0)
        decision = self.book.get(day.year * 10000 + day.month * 100 + day.day)
        held = self.position.size
        if held != 0:
            against = decision is not None and decision[0] * held < 0
            if self.entry_bar is not None and (
                len(self) - self.entry_bar >= self.p.horizon_bars or against
            ):
                for child in self.children:
                    self.cancel(child)  # one cancelled child cancels its sibling
                self.children = []
                self.exit = self.close()
            return
        if decision is None:
            return
        direction, stop, target, size = decision
        if direction < 0 and not self.p.allow_short:
            return
        quantity = math.floor(size * self.broker.getvalue() / CAPITAL)
        if quantity < 1:
            return
        # The bracket buy_bracket builds, spelled out: the entry may be refused (the engine
        # takes no order on warm-up bars) and then no child may follow it.
        opening, closing = (self.buy, self.sell) if direction > 0 else (self.sell, self.buy)
        main = opening(size=quantity, exectype=bt.Order.Market, transmit=False)
        if main is None:
            return
        self.entry = main
        self.children = [
            closing(price=stop, size=quantity, exectype=bt.Order.Stop, parent=main, transmit=False),
            closing(
                price=target, size=quantity, exectype=bt.Order.Limit, parent=main, transmit=True
            ),
        ]
'''


def render_decision_strategy(spec: StrategySpec, table: DecisionTable, *, capital: float) -> str:
    """The complete module for ``spec`` replaying ``table``; passes ``validate_code``."""
    if not is_decision_spec(spec):
        raise ValueError(f"spec {spec.name!r} is not a decision_pipeline spec")
    if capital <= 0:
        raise ValueError(f"capital must be positive, got {capital}")
    p = pipeline_parameters(spec)
    title = "".join(ch if ch.isprintable() else " " for ch in spec.name)
    title = title.replace("\\", "/").replace('"', "'")
    body = _CLASS.format(
        class_name=CLASS_NAME,
        title=title,
        side="long and short" if spec.long_short else "long only",
        n=sum(len(v) for v in table.values()),
        tickers=", ".join(sorted(table)) or "no ticker",
        debate_rounds=p["debate_rounds"],
        conviction_floor=p["conviction_floor"],
        risk_pct=p["risk_pct"],
        horizon=int(p["horizon_bars"]),
        allow_short=bool(spec.long_short),
    )
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import math",
        "",
        "import backtrader as bt",
        "",
        "# The capital the risk engine sized each decision on; sizes scale with the account.",
        f"CAPITAL = {float(capital)!r}",
        "# ticker -> yyyymmdd -> (direction, stop, target, size), computed by the pipeline.",
        *_table(table),
    ]
    return "\n".join(head) + body
