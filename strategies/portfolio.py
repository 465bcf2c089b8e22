"""Portfolio-scope families: one Backtrader strategy over the whole universe (``self.datas``).

A symbol-scope variant (``strategies.codegen``) times one symbol and is run on each alone; a
portfolio variant ranks the universe's symbols against each other and holds weights, set by
target orders (``order_target_percent``), so it can say what "cross-sectional momentum",
"relative strength" or "rotation" means. It runs as one job per fold, through the same engine,
sandbox, books, costs, next-open fills, ledger and gate.

Families (data, not prose: ``TEMPLATES``; every numeric parameter in ``PARAM_SPACE`` moves):

* ``cross_sectional_momentum``: every ``rebalance_bars`` bars, rank on the return over
  ``xs_lookback`` bars skipping the last ``xs_skip``; hold the top ``xs_top_n`` long (long
  only), or also the bottom ``xs_top_n`` short (long/short); equal or inverse-volatility
  weights (``inverse_vol``); optionally scaled to a volatility target (``vol_target``).
* ``rotation``: relative-strength rotation into the single strongest symbol, or into cash when
  even the strongest has a negative return (``cash_filter``).
* ``pairs``: spread mean reversion on the universe's most cointegrated pair (Engle-Granger on
  in-sample prices, ``strategies.pairs``): short the rich leg and buy the cheap one when the
  spread's z-score over ``pair_lookback`` bars passes ``entry_z``, flat again inside ``exit_z``.

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Callable
from typing import NamedTuple

from strategies.blocks import FILTERS, filter_init
from strategies.families import PARAM_SPACE, PORTFOLIO_PARAMS, jitter, reconcile_portfolio
from strategies.mutate import tune
from strategies.pairs import PairChoice
from strategies.regime import INDEX_REGIME, INLINE_PARAMS, REGIME_STYLE, regime_symbol
from strategies.regime import wanted as regime_wanted
from strategies.spec import Origin, ParamValue, PortfolioFamily, StrategySpec

PARAMS = PORTFOLIO_PARAMS  # each family's parameters and defaults (strategies.families)

SCOPE = "portfolio"
LABEL = "PORTFOLIO"  # the ``symbol`` of a portfolio job and its results
MIN_SYMBOLS = 2
# From this many symbols a universe is broad enough to rank: the portfolio families get one
# slot of every iteration even when the directive names none ("alpha" over a sector).
UNNAMED_FROM = 4

APPROACH = {
    PortfolioFamily.CROSS_SECTIONAL_MOMENTUM: (
        "Cross-sectional momentum: rank the universe on its past return (skipping the most "
        "recent month), hold the leaders (and short the laggards when long/short), rebalance "
        "on a fixed schedule."
    ),
    PortfolioFamily.ROTATION: (
        "Relative-strength rotation: hold the universe's strongest symbol, or cash when even "
        "the strongest is falling; rebalance on a fixed schedule."
    ),
    PortfolioFamily.PAIRS: (
        "Pairs: trade the spread of the universe's most cointegrated pair (Engle-Granger, "
        "in-sample), short the rich leg and buy the cheap one when it stretches, flat when it "
        "comes back."
    ),
}


class Template(NamedTuple):
    family: PortfolioFamily
    params: dict[str, ParamValue]
    long_short: bool
    note: str
    filters: tuple[str, ...] = ()  # regime filters (strategies.regime)


# First-iteration diversity: the family default first, then alternative designs.
TEMPLATES: tuple[Template, ...] = (
    Template(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {}, False, "top n, equal weight"),
    Template(PortfolioFamily.ROTATION, {}, False, "strongest or cash"),
    Template(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"inverse_vol": True},
        False,
        "top n, inverse-volatility weights",
    ),  # fmt: skip
    Template(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"xs_top_n": 1},
        True,
        "long top 1, short bottom 1",
    ),  # fmt: skip
    Template(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"vol_target": True},
        False,
        "top n, volatility-targeted",
    ),  # fmt: skip
    Template(
        PortfolioFamily.ROTATION,
        {"xs_lookback": 63, "cash_filter": False},
        False,
        "strongest over 3 months, always invested",
    ),  # fmt: skip
)

# REFINE: design switches (a bool flipped, or the long/short side) tried on the best.
SWITCHES: tuple[str, ...] = ("inverse_vol", "vol_target", "cash_filter", "long_short")


def is_portfolio_spec(spec: StrategySpec) -> bool:
    return isinstance(spec.family, PortfolioFamily)


def portfolio_families() -> list[str]:
    return [f.value for f in PortfolioFamily]


def portfolio_spec(
    family: PortfolioFamily | str,
    parameters: dict[str, ParamValue] | None = None,
    *,
    long_short: bool = False,
    note: str = "",
    filters: tuple[str, ...] | list[str] = (),
) -> StrategySpec:
    family = PortfolioFamily(family)
    side = "-ls" if long_short and family == PortfolioFamily.CROSS_SECTIONAL_MOMENTUM else ""
    regime = "".join(f"+{f}" for f in filters)
    spec = StrategySpec(
        family=family, name=f"{family.value}{side}{regime}" + (f" | {note}" if note else ""),
        approach=APPROACH[family], entry=family.value, sizing="target_weights",
        long_short=bool(side), parameters=dict(parameters or {}), scope=SCOPE,
        filters=list(filters),
    )  # fmt: skip
    return reconcile_portfolio(spec)


# ---------------------------------------------------------------------------- proposals


class PortfolioProposal(NamedTuple):
    spec: StrategySpec
    parent_id: str | None
    why: str


def portfolio_slots(families: list[str], n: int, n_symbols: int) -> int:
    """All ``n`` slots when the run names only portfolio families; half (at least one) beside
    others; one (of 2+) when it names none but the universe has ``UNNAMED_FROM`` symbols or
    more; none for a single symbol, or a small universe the directive did not ask to rank."""
    families = [f for f in families if f != REGIME_STYLE]  # a filter asked for, not a family
    named = [f for f in families if f in portfolio_families()]
    if n_symbols < MIN_SYMBOLS or n < 1:
        return 0
    if not named:
        return 1 if n_symbols >= UNNAMED_FROM and n >= 2 else 0
    return n if set(families) <= set(portfolio_families()) else max(1, n // 2)


def propose_portfolio_specs(
    *,
    families: list[str],
    route: Origin | str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    pair: PairChoice | None = None,
    tuner: Callable[[StrategySpec, int, set[str]], list[StrategySpec]] | None = None,
) -> list[PortfolioProposal]:
    """``n`` fresh proposals: around the family's own best for TUNE/FIX/REFINE, otherwise
    the templates of the named families (jittered past the templates). ``pair``: the
    universe's most cointegrated pair, for the pairs family (None: no pairs proposal).
    ``tuner``: what fills the tuning slots around the best first (the portfolio screen,
    ``swarm.nodes.strategy.ScreenTuner``; with it REFINE keeps a third of the slots, from 2,
    for tuning); ``tune``'s grid moves fill what it leaves, and None is ``tune`` alone, as
    before the screen."""
    route = Origin(route)
    taken = set(seen)
    out: list[PortfolioProposal] = []

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        key = spec.trial_key()
        if key not in taken and len(out) < n:
            taken.add(key)
            out.append(PortfolioProposal(spec, parent, why))

    if best is not None and route in (Origin.TUNE, Origin.FIX, Origin.REFINE):
        best_id, base = best
        if route == Origin.REFINE:
            # With a tuner (the screen), a third of the slots (from 2) stay for tuning around
            # the best, as the rules brain keeps them (swarm.agents.strategy_dev.propose).
            keep = max(1, n - (n + 1) // 3) if tuner is not None else n
            for switch in rng.sample(SWITCHES, len(SWITCHES)):
                cand = _switched(base, switch)
                if cand is not None and len(out) < keep:
                    why = f"refine {switch} {_state(cand, switch)}"
                    add(_named(cand, why), best_id, why)
        if route == Origin.FIX and base.family == PortfolioFamily.PAIRS:  # enter more often
            params = dict(base.parameters)
            params["entry_z"] = max(1.0, float(params["entry_z"]) - 0.5)
            why = "fix: a lower entry z-score"
            add(_named(reconcile_portfolio(base.model_copy(update={"parameters": params})), why),
                best_id, why)  # fmt: skip
        elif route == Origin.FIX:  # too few trades: rebalance more often, look back less far
            params = dict(base.parameters)
            params["rebalance_bars"] = max(5, int(params["rebalance_bars"]) // 2)
            params["xs_lookback"] = max(20, int(params["xs_lookback"]) // 2)
            why = "fix: rebalance more often, shorter lookback"
            add(_named(reconcile_portfolio(base.model_copy(update={"parameters": params})), why),
                best_id, why)  # fmt: skip
        if tuner is not None:
            for cand in tuner(base, n - len(out), set(taken)):
                add(cand, best_id, "screened around the best")
        for cand in tune(base, n, rng=rng, seen=taken):
            add(cand, best_id, "tune around the best")
    wanted = [PortfolioFamily(f) for f in families if f in portfolio_families()]
    templates = list(TEMPLATES)
    if pair is not None:
        pair_params = {"pair_a": pair.a, "pair_b": pair.b, "hedge_ratio": pair.hedge_ratio}
        note = f"{pair.names[0]}/{pair.names[1]} spread (EG p {pair.pvalue:.3f})"
        templates.insert(2, Template(PortfolioFamily.PAIRS, pair_params, False, note))
    pool = [t for t in templates if t.family in wanted] or [
        t for t in templates if t.family != PortfolioFamily.PAIRS or pair is not None
    ]
    if regime_wanted(families):  # each design, then the same design risk-on only
        pool = [
            v
            for t in pool
            for v in (t, t._replace(filters=(INDEX_REGIME,), note=f"{t.note}, risk-on only"))
        ]
    for k in range(200):
        if len(out) >= n:
            break
        t = pool[k % len(pool)]
        spec = portfolio_spec(
            t.family, t.params, long_short=t.long_short, note=t.note, filters=t.filters
        )
        if k >= len(pool):
            spec = jitter(spec, rng)
        add(spec, None, f"portfolio family: {t.note}")
    return out


def _named(spec: StrategySpec, why: str) -> StrategySpec:
    return spec.model_copy(update={"name": f"{spec.name.split(' | ')[0]} | {why}"})


def _switched(spec: StrategySpec, switch: str) -> StrategySpec | None:
    if switch == "long_short":
        if spec.family != PortfolioFamily.CROSS_SECTIONAL_MOMENTUM:
            return None
        return reconcile_portfolio(spec.model_copy(update={"long_short": not spec.long_short}))
    if switch not in spec.parameters:
        return None
    params = dict(spec.parameters) | {switch: not spec.parameters[switch]}
    return reconcile_portfolio(spec.model_copy(update={"parameters": params}))


def _state(spec: StrategySpec, switch: str) -> str:
    value = spec.long_short if switch == "long_short" else spec.parameters[switch]
    return "on" if value else "off"


# ---------------------------------------------------------------------------- code


def render_portfolio(spec: StrategySpec, *, bars_per_year: int = 252, class_name: str) -> str:
    """The standalone Backtrader module of a portfolio spec (lint-clean: lines are read only at
    ``[0]`` and ``[-k]``; no slicing)."""
    spec = reconcile_portfolio(spec)  # exactly the family's parameters
    family = PortfolioFamily(spec.family)
    params = "\n".join(
        f"        # {k}={v}: reads {regime_symbol(v)}"
        if k in INLINE_PARAMS
        else f'        ("{k}", {_literal(v, k in PARAM_SPACE and PARAM_SPACE[k].kind == "int")}),'
        for k, v in spec.parameters.items()
    )
    rotation = family == PortfolioFamily.ROTATION
    body = (
        _PAIRS_BODY
        if family == PortfolioFamily.PAIRS
        else _BODY.format(
            top_n="1" if rotation else "self.p.xs_top_n",
            shorts="False" if rotation else repr(spec.long_short),
            cash_filter="self.p.cash_filter" if rotation else "False",
            inverse_vol="False" if rotation else "self.p.inverse_vol",
        )
    )
    body = body.replace("@TRADED@", _traded(spec)) + _risk_on(spec)
    doc = textwrap.fill(f"Approach: {spec.approach}", width=92, initial_indent="    ",
                        subsequent_indent="    ")  # fmt: skip
    side = "long and short" if spec.long_short else "long only"
    return (
        f'"""Generated Backtrader strategy: {spec.name} (trial {spec.trial_key()})."""\n\n'
        "import math\n\nimport backtrader as bt\n\n\n"
        f"class {class_name}(bt.Strategy):\n"
        f'    """{spec.name}\n\n    Family: {family.value} (portfolio, {side}).\n{doc}\n'
        f"{_regime_doc(spec)}"
        "    Orders are target-percent market orders: a rebalance on a bar's close fills at the\n"
        "    next bar's open; reductions are sent before additions, so their cash pays for them.\n"
        '    """\n\n'
        f"    params = (\n{params}\n"
        f'        ("bars_per_year", {int(bars_per_year)}),  # annualises realised vol\n'
        "    )\n" + body
    )


def _traded(spec: StrategySpec) -> str:
    """``__init__`` lines: the regime filters' index feeds (read by name, never traded) and
    ``self.traded``, the universe's feeds (``self.datas`` without the index feeds)."""
    lines: list[str] = []
    feeds: list[str] = []
    for f in spec.filters:
        lines.append(f"        # filter: {f}")
        for ln in filter_init(f, spec.parameters):
            lines.append(f"        {ln}")
            if ln.startswith("self.") and "getdatabyname" in ln:
                feeds.append(ln.split(" = ", 1)[0])
    if not feeds:
        return "\n".join([*lines, "        self.traded = list(self.datas)"])
    lines += [
        f"        index_feeds = ({', '.join(feeds)}{',' if len(feeds) == 1 else ''})",
        "        self.traded = [d for d in self.datas if not any(d is f for f in index_feeds)]",
    ]
    return "\n".join(lines)


def _risk_on(spec: StrategySpec) -> str:
    """The regime filters as one method: every one must say risk-on (a NaN says no)."""
    conds = [f"({FILTERS[f].long_ok})" for f in spec.filters]
    if not conds:
        return "\n    def risk_on(self):\n        return True  # no regime filter\n"
    why = textwrap.wrap("; ".join(FILTERS[f].why for f in spec.filters) + ".", width=88)
    return (
        "\n    def risk_on(self):\n"
        + "".join(f"        # {ln}\n" for ln in why)
        + f"        return {' and '.join(conds)}\n"
    )


def _regime_doc(spec: StrategySpec) -> str:
    if not spec.filters:
        return ""
    return f"    Regime filter: {', '.join(spec.filters)} (cash when risk-off).\n"


def _literal(value: ParamValue, is_int: bool) -> str:
    if isinstance(value, bool):
        return repr(value)
    return repr(int(value)) if is_int else repr(float(value))


_BODY = '''
    def __init__(self):
@TRADED@
        # Daily-return volatility of each symbol: inverse-volatility and vol-targeted weights.
        self.vol = [
            bt.indicators.StdDev(bt.indicators.PercentChange(d.close, period=1),
                                 period=self.p.vol_lookback)
            for d in self.traded
        ]

    def momentum(self, d):
        """Return over xs_lookback bars, ending xs_skip bars ago (NaN until there is history)."""
        span = self.p.xs_lookback + self.p.xs_skip
        if len(d) <= span:
            return math.nan
        past = d.close[-span]
        recent = d.close[-self.p.xs_skip]
        if not past > 0:
            return math.nan
        return recent / past - 1.0

    def targets(self):
        """Target weight of each feed (by position in self.datas): the rebalance's decision."""
        ranked = []
        for i, d in enumerate(self.traded):
            score = self.momentum(d)
            if not math.isnan(score):
                ranked.append((score, i))
        if len(ranked) < 2:
            return None  # not enough history yet: keep what is held
        if not self.risk_on():
            return {{}}  # the regime filter says risk-off: cash
        ranked.sort(reverse=True)
        shorts = {shorts}
        n = max(1, min({top_n}, len(ranked) // 2 if shorts else len(ranked) - 1))
        longs, lows = [], []
        for rank, (score, i) in enumerate(ranked):
            if rank < n:
                longs.append(i)
            if shorts and rank >= len(ranked) - n:
                lows.append(i)
        if {cash_filter} and ranked[0][0] < 0:
            longs = []  # even the strongest is falling: cash
        weights = {{}}
        budget = self.p.gross / 2.0 if shorts else self.p.gross
        for sign, group in ((1.0, longs), (-1.0, lows)):
            raw = []
            for i in group:
                v = self.vol[i][0]
                raw.append(1.0 / v if {inverse_vol} and v > 0 else 1.0)
            total = sum(raw)
            for i, r in zip(group, raw):
                weights[i] = sign * budget * r / total
        if self.p.vol_target and weights:
            # Scale to the target with each holding's own volatility summed (correlation 1):
            # an upper bound of the portfolio's, so the scaling errs on the safe side.
            est = 0.0
            for i, w in weights.items():
                v = self.vol[i][0]
                est += abs(w) * (v if v > 0 else 0.0)
            est *= math.sqrt(self.p.bars_per_year)
            if est > 0:
                scale = min(1.0, self.p.target_vol / est)
                weights = {{i: w * scale for i, w in weights.items()}}
        return weights

    def next(self):
        if len(self) % self.p.rebalance_bars:
            return
        weights = self.targets()
        if weights is None:
            return
        value = self.broker.getvalue()
        if not value > 0:
            return
        now = []
        for i, d in enumerate(self.traded):
            now.append(self.getposition(d).size * d.close[0] / value)
        # Reductions first: their sales fund the additions at the same open.
        for i, d in enumerate(self.traded):
            if weights.get(i, 0.0) < now[i]:
                self.order_target_percent(data=d, target=weights.get(i, 0.0))
        for i, d in enumerate(self.traded):
            if weights.get(i, 0.0) > now[i]:
                self.order_target_percent(data=d, target=weights.get(i, 0.0))
'''

_PAIRS_BODY = '''
    def __init__(self):
@TRADED@

    def spread(self, ago):
        """log(a) - hedge_ratio * log(b), ``ago`` bars back."""
        a, b = self.datas[self.p.pair_a], self.datas[self.p.pair_b]
        return math.log(a.close[-ago]) - self.p.hedge_ratio * math.log(b.close[-ago])

    def next(self):
        a, b = self.datas[self.p.pair_a], self.datas[self.p.pair_b]
        if len(a) <= self.p.pair_lookback:
            return
        values = [self.spread(k) for k in range(self.p.pair_lookback)]
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        if not var > 0:
            return
        z = (values[0] - mean) / math.sqrt(var)
        held = self.getposition(a).size
        if not self.risk_on():  # the regime filter says risk-off: flat
            if held != 0:
                self.order_target_percent(data=a, target=0.0)
                self.order_target_percent(data=b, target=0.0)
            return
        half = self.p.gross / 2.0
        if held == 0:
            # The short leg first: its sale funds the long leg at the same open.
            if z > self.p.entry_z:  # the spread is rich: a is dear against b
                self.order_target_percent(data=a, target=-half)
                self.order_target_percent(data=b, target=half)
            elif z < -self.p.entry_z:
                self.order_target_percent(data=b, target=-half)
                self.order_target_percent(data=a, target=half)
        elif abs(z) < self.p.exit_z or (held > 0 and z > self.p.entry_z) or (
            held < 0 and z < -self.p.entry_z
        ):
            self.order_target_percent(data=a, target=0.0)
            self.order_target_percent(data=b, target=0.0)
'''
