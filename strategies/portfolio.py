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
* ``low_volatility``: the low-volatility anomaly: every ``rebalance_bars`` bars, rank on the
  daily-return volatility over ``vol_lookback`` bars and hold the ``xs_top_n`` calmest (long
  only; equal or inverse-volatility weights, optionally scaled to ``target_vol``). Tried only
  when asked for ("low volatility"), never in the unnamed portfolio slot.
* ``pairs``: spread mean reversion on the universe's most cointegrated pair (Engle-Granger on
  in-sample prices, ``strategies.pairs``): short the rich leg and buy the cheap one when the
  spread's z-score over ``pair_lookback`` bars passes ``entry_z``, flat again inside ``exit_z``.

Here: the families' specs and what the rules brain proposes of them; their Backtrader code is
``strategies.portfolio_code``. Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple

from strategies.families import PORTFOLIO_PARAMS, jitter, reconcile_portfolio
from strategies.family_api import PORTFOLIO_LABEL, Proposal
from strategies.mutate import tune
from strategies.pairs import PairChoice
from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.regime import INDEX_REGIME, REGIME_STYLE
from strategies.regime import wanted as regime_wanted
from strategies.route import Route
from strategies.spec import ParamValue, PortfolioFamily, StrategySpec

PARAMS = PORTFOLIO_PARAMS  # each family's parameters and defaults (strategies.families)

SCOPE = "portfolio"
LABEL = PORTFOLIO_LABEL  # the ``symbol`` of a portfolio job and its results
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
    PortfolioFamily.LOW_VOLATILITY: (
        "Low volatility: rank the universe on its realised volatility, hold the calmest "
        "(equal or inverse-volatility weights, optionally scaled to a volatility target), "
        "rebalance on a fixed schedule; the low-volatility anomaly, not a volatility breakout."
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
    ),
    Template(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"xs_top_n": 1},
        True,
        "long top 1, short bottom 1",
    ),
    Template(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"vol_target": True},
        False,
        "top n, volatility-targeted",
    ),
    Template(
        PortfolioFamily.ROTATION,
        {"xs_lookback": 63, "cash_filter": False},
        False,
        "strongest over 3 months, always invested",
    ),
    # Tried only when asked for ("low volatility"): a directive that names no portfolio
    # family keeps the momentum designs above.
    Template(PortfolioFamily.LOW_VOLATILITY, {}, False, "calmest n, equal weight"),
    Template(
        PortfolioFamily.LOW_VOLATILITY,
        {"inverse_vol": True},
        False,
        "calmest n, inverse-volatility weights",
    ),
    Template(
        PortfolioFamily.LOW_VOLATILITY,
        {"vol_target": True},
        False,
        "calmest n, volatility-targeted",
    ),
)


# REFINE: design switches (a bool flipped, or the long/short side) tried on the best.
SWITCHES: tuple[str, ...] = ("inverse_vol", "vol_target", "cash_filter", "long_short")


def is_portfolio_spec(spec: StrategySpec) -> bool:
    """Whether ``spec`` is of a portfolio family."""
    return isinstance(spec.family, PortfolioFamily)


def portfolio_families() -> list[str]:
    """The names of the portfolio families."""
    return [f.value for f in PortfolioFamily]


def portfolio_spec(
    family: PortfolioFamily | str,
    parameters: dict[str, ParamValue] | None = None,
    *,
    long_short: bool = False,
    note: str = "",
    filters: tuple[str, ...] | list[str] = (),
) -> StrategySpec:
    """A portfolio-family spec with ``parameters``, reconciled and named."""
    family = PortfolioFamily(family)
    side = "-ls" if long_short and family == PortfolioFamily.CROSS_SECTIONAL_MOMENTUM else ""
    regime = "".join(f"+{f}" for f in filters)
    spec = StrategySpec(
        family=family,
        name=f"{family.value}{side}{regime}" + (f" | {note}" if note else ""),
        approach=APPROACH[family],
        entry=family.value,
        sizing="target_weights",
        long_short=bool(side),
        parameters=dict(parameters or {}),
        scope=SCOPE,
        filters=list(filters),
    )
    return reconcile_portfolio(spec)


# ---------------------------------------------------------------------------- proposals


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
    route: Route | str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    pair: PairChoice | None = None,
    tuner: Callable[[StrategySpec, int, set[str]], list[StrategySpec]] | None = None,
    space: ParamSpace = DEFAULT_SPACE,
) -> list[Proposal]:
    """``n`` fresh proposals: around the family's own best for TUNE/FIX/REFINE, otherwise
    the templates of the named families (jittered past the templates). ``pair``: the
    universe's most cointegrated pair, for the pairs family (None: no pairs proposal).
    ``tuner``: what fills the tuning slots around the best first (the portfolio screen,
    ``swarm.nodes.strategy.ScreenTuner``; with it REFINE keeps a third of the slots, from 2,
    for tuning); ``tune``'s grid moves fill what it leaves, and None is ``tune`` alone, as
    before the screen. ``space``: the user's grid (``--param-space``) ``tune`` moves within."""
    route = Route(route)
    picks = _Picks(n, seen)
    if best is not None and route in (Route.TUNE, Route.FIX, Route.REFINE):
        best_id, base = best
        if route == Route.REFINE:
            _refine(picks, base, best_id, rng, tuner)
        if route == Route.FIX:
            _fix(picks, base, best_id)
        if tuner is not None:
            for cand in tuner(base, n - len(picks.out), set(picks.taken)):
                picks.add(cand, best_id, "screened around the best")
        for cand in tune(base, n, rng=rng, seen=picks.taken, space=space):
            picks.add(cand, best_id, "tune around the best")
    pool = _template_pool(families, pair)
    for k in range(200):
        if len(picks.out) >= n:
            break
        t = pool[k % len(pool)]
        spec = portfolio_spec(
            t.family, t.params, long_short=t.long_short, note=t.note, filters=t.filters
        )
        if k >= len(pool):
            spec = jitter(spec, rng)
        picks.add(spec, None, f"portfolio family: {t.note}")
    return picks.out


class _Picks:
    """The proposals so far: at most ``n``, never a trial key already taken (``seen`` first)."""

    def __init__(self, n: int, seen: set[str]) -> None:
        self.n = n
        self.taken = set(seen)
        self.out: list[Proposal] = []

    def add(self, spec: StrategySpec, parent: str | None, why: str) -> None:
        """Propose ``spec`` unless its trial key is taken or the ``n`` slots are full."""
        key = spec.trial_key()
        if key not in self.taken and len(self.out) < self.n:
            self.taken.add(key)
            self.out.append(Proposal(spec, parent, why))


def _refine(
    picks: _Picks,
    base: StrategySpec,
    best_id: str,
    rng: random.Random,
    tuner: Callable[[StrategySpec, int, set[str]], list[StrategySpec]] | None,
) -> None:
    """REFINE: each switch of ``base`` once, in a random order, leaving the tuner its slots."""
    n = picks.n
    # With a tuner (the screen), a third of the slots (from 2) stay for tuning around
    # the best, as the rules brain keeps them (swarm.agents.strategy_dev.propose).
    keep = max(1, n - (n + 1) // 3) if tuner is not None else n
    for switch in rng.sample(SWITCHES, len(SWITCHES)):
        cand = _switched(base, switch)
        if cand is not None and len(picks.out) < keep:
            why = f"refine {switch} {_state(cand, switch)}"
            picks.add(_named(cand, why), best_id, why)


def _fix(picks: _Picks, base: StrategySpec, best_id: str) -> None:
    """FIX (too few trades): pairs enter at a lower z-score; the others rebalance more often
    and look back less far."""
    if base.family == PortfolioFamily.PAIRS:  # enter more often
        params = dict(base.parameters)
        params["entry_z"] = max(1.0, float(params["entry_z"]) - 0.5)
        why = "fix: a lower entry z-score"
        picks.add(
            _named(reconcile_portfolio(base.model_copy(update={"parameters": params})), why),
            best_id,
            why,
        )
    else:  # too few trades: rebalance more often, look back less far
        params = dict(base.parameters)
        params["rebalance_bars"] = max(5, int(params["rebalance_bars"]) // 2)
        if "xs_lookback" in params:  # the low-volatility family ranks on vol_lookback
            params["xs_lookback"] = max(20, int(params["xs_lookback"]) // 2)
        why = "fix: rebalance more often, shorter lookback"
        picks.add(
            _named(reconcile_portfolio(base.model_copy(update={"parameters": params})), why),
            best_id,
            why,
        )


def _template_pool(families: list[str], pair: PairChoice | None) -> list[Template]:
    """The templates to propose from: the named families' (the pair's spread among them),
    else every design but low volatility (and pairs without a pair); each also risk-on only
    when the regime filter is asked for."""
    wanted = [PortfolioFamily(f) for f in families if f in portfolio_families()]
    templates = list(TEMPLATES)
    if pair is not None:
        pair_params = {"pair_a": pair.a, "pair_b": pair.b, "hedge_ratio": pair.hedge_ratio}
        note = f"{pair.names[0]}/{pair.names[1]} spread (EG p {pair.pvalue:.3f})"
        templates.insert(2, Template(PortfolioFamily.PAIRS, pair_params, False, note))
    pool = [t for t in templates if t.family in wanted] or [
        t
        for t in templates
        if t.family != PortfolioFamily.LOW_VOLATILITY
        and (t.family != PortfolioFamily.PAIRS or pair is not None)
    ]
    if regime_wanted(families):  # each design, then the same design risk-on only
        pool = [
            v
            for t in pool
            for v in (t, t._replace(filters=(INDEX_REGIME,), note=f"{t.note}, risk-on only"))
        ]
    return pool


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
