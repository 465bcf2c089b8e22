"""The Backtrader code of a portfolio-scope spec (``strategies.portfolio``): one strategy over
``self.datas`` that ranks the universe and holds target weights.

A symbol-scope spec is rendered by ``strategies.codegen``; this module renders the portfolio
families (cross-sectional momentum, rotation, pairs) with their switches (inverse-volatility
weights, a volatility target, a cash filter, long/short) and regime filters. The code passes
the lint (``strategies.validate``) and runs in the sandbox like any other strategy;
``backtest.screen.portfolio`` replays it trade for trade.
"""

from __future__ import annotations

import textwrap

from strategies.blocks import FILTERS, filter_init
from strategies.families import PARAM_SPACE, reconcile_portfolio
from strategies.regime import INLINE_PARAMS, regime_symbol
from strategies.spec import ParamValue, PortfolioFamily, StrategySpec


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
    calm = family == PortfolioFamily.LOW_VOLATILITY
    body = (
        _PAIRS_BODY
        if family == PortfolioFamily.PAIRS
        else _BODY.format(
            top_n="1" if rotation else "self.p.xs_top_n",
            shorts="False" if rotation else repr(spec.long_short),
            cash_filter="self.p.cash_filter" if rotation else "False",
            inverse_vol="False" if rotation else "self.p.inverse_vol",
            score="self.calm(i)" if calm else "self.momentum(d)",
            calm_method=_CALM if calm else "",
        )
    )
    body = body.replace("@TRADED@", _traded(spec)) + _risk_on(spec)
    doc = textwrap.fill(
        f"Approach: {spec.approach}", width=92, initial_indent="    ", subsequent_indent="    "
    )
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

{calm_method}    def momentum(self, d):
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
            score = {score}
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

_CALM = '''    def calm(self, i):
        """Minus the daily-return volatility over vol_lookback bars: the calmest rank first."""
        v = self.vol[i][0]
        return -v if v > 0 else math.nan

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
