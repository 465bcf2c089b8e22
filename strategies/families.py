"""Default designs and the parameter space of each strategy family.

``PARAM_SPACE`` is the one place that says how far and in what steps a parameter may move; tuning,
fixing and seeding from a data brief all clip and snap through it, so every spec the lab produces is
on the same grid (which keeps trial keys comparable across iterations).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from strategies.blocks import (
    ENTRIES,
    EXITS,
    FILTERS,
    SIBLINGS,
    SIZINGS,
    required_params,
    unknown_blocks,
)
from strategies.regime import INDEX_REGIME, REGIME_FILTERS, wanted
from strategies.spec import Family, ParamValue, PipelineFamily, PortfolioFamily, StrategySpec


@dataclass(frozen=True)
class ParamRange:
    low: float
    high: float
    step: float
    kind: Literal["int", "float"]
    tunable: bool = True  # sizing caps are risk choices, not something to optimise on

    def snap(self, value: float) -> int | float:
        """Clip into [low, high] and round onto the step grid."""
        v = min(max(float(value), self.low), self.high)
        v = self.low + round((v - self.low) / self.step) * self.step
        v = min(max(v, self.low), self.high)
        return int(round(v)) if self.kind == "int" else round(v, 6)


def _i(low: int, high: int, step: int = 1, tunable: bool = True) -> ParamRange:
    return ParamRange(low, high, step, "int", tunable)


def _f(low: float, high: float, step: float, tunable: bool = True) -> ParamRange:
    return ParamRange(low, high, step, "float", tunable)


PARAM_SPACE: dict[str, ParamRange] = {
    # entries
    "roc_period": _i(5, 120, 5),
    "roc_threshold": _f(0.0, 0.15, 0.005),
    "fast_period": _i(5, 60, 5),
    "slow_period": _i(20, 250, 10),
    "macd_fast": _i(4, 20),
    "macd_slow": _i(15, 60),
    "macd_signal": _i(3, 18),
    "rsi_period": _i(2, 30),
    "rsi_oversold": _i(10, 45),
    "rsi_exit": _i(40, 80),
    "bb_period": _i(10, 60, 2),
    "bb_width": _f(1.0, 3.5, 0.1),
    "donchian_period": _i(10, 150, 5),
    "donchian_exit_period": _i(5, 75, 5),
    # filters
    "trend_period": _i(50, 250, 10),
    "adx_min": _i(10, 40),
    "volume_mult": _f(0.8, 3.0, 0.1),
    "atr_max_pct": _f(0.01, 0.10, 0.005),
    # the index regime filter (strategies.regime): which index (0 SPY, 1 QQQ), its SMA, VIX cap
    "regime_index": _i(0, 1),
    "regime_ma": _i(50, 250, 10),
    "vix_max": _f(12.0, 40.0, 1.0),
    # exits
    "stop_loss_pct": _f(0.01, 0.25, 0.005),
    "take_profit_pct": _f(0.02, 0.60, 0.01),
    "atr_stop_mult": _f(1.0, 6.0, 0.25),
    "trail_pct": _f(0.02, 0.30, 0.01),
    "max_hold_bars": _i(2, 150),
    # sizing
    "position_fraction": _f(0.1, 0.95, 0.05, tunable=False),
    "risk_pct": _f(0.0025, 0.03, 0.0025),
    "target_vol": _f(0.05, 0.40, 0.01),
    "vol_lookback": _i(10, 120, 5),
    # portfolio families (strategies.portfolio); target_vol and vol_lookback above serve too
    "xs_lookback": _i(20, 252, 1),
    "xs_skip": _i(0, 42, 1),
    "xs_top_n": _i(1, 5),
    "rebalance_bars": _i(5, 63),
    "gross": _f(0.5, 1.0, 0.05, tunable=False),
    # the pair and its hedge ratio come from the data (strategies.pairs), never tuned
    "pair_a": _i(0, 999, tunable=False),
    "pair_b": _i(0, 999, tunable=False),
    "hedge_ratio": _f(-50.0, 50.0, 0.000001, tunable=False),
    "pair_lookback": _i(20, 250, 5),
    "entry_z": _f(1.0, 3.5, 0.1),
    "exit_z": _f(0.0, 1.5, 0.1),
    # the decision pipeline (strategies.decision_family): risk_pct above is its risk per trade
    "debate_rounds": _i(1, 3),
    "conviction_floor": _f(0.0, 0.8, 0.05),
    "horizon_bars": _i(3, 60),
}

# The decision pipeline's parameters and defaults (AnalysisConfig's: 1 round, 1% risk, floor
# 0.2, a 10-bar horizon); it has no blocks, so these are all its spec carries.
DECISION_PARAMS: dict[str, ParamValue] = {
    "debate_rounds": 2,
    "risk_pct": 0.01,
    "conviction_floor": 0.2,
    "horizon_bars": 10,
}

# The portfolio families' parameters and defaults (strategies.portfolio; a spec carries
# exactly these).
PORTFOLIO_PARAMS: dict[PortfolioFamily, dict[str, ParamValue]] = {
    PortfolioFamily.CROSS_SECTIONAL_MOMENTUM: {
        "xs_lookback": 126,
        "xs_skip": 21,
        "xs_top_n": 2,
        "rebalance_bars": 21,
        "inverse_vol": False,
        "vol_target": False,
        "target_vol": 0.15,
        "vol_lookback": 60,
        "gross": 0.95,
    },
    PortfolioFamily.ROTATION: {
        "xs_lookback": 126,
        "xs_skip": 0,
        "rebalance_bars": 21,
        "cash_filter": True,
        "vol_target": False,
        "target_vol": 0.15,
        "vol_lookback": 60,
        "gross": 0.95,
    },
    PortfolioFamily.LOW_VOLATILITY: {
        "xs_top_n": 2,
        "rebalance_bars": 21,
        "inverse_vol": False,
        "vol_target": False,
        "target_vol": 0.15,
        "vol_lookback": 60,
        "gross": 0.95,
    },
    PortfolioFamily.PAIRS: {
        "pair_a": 0,
        "pair_b": 1,
        "hedge_ratio": 1.0,
        "pair_lookback": 60,
        "entry_z": 2.0,
        "exit_z": 0.5,
        "gross": 0.95,
    },
}

# (a, b): a must stay strictly below b.
ORDERED_PAIRS: tuple[tuple[str, str], ...] = (
    ("fast_period", "slow_period"),
    ("macd_fast", "macd_slow"),
    ("rsi_oversold", "rsi_exit"),
    ("donchian_exit_period", "donchian_period"),
    ("exit_z", "entry_z"),
)


@dataclass(frozen=True)
class Template:
    entry: str
    filters: tuple[str, ...]
    exits: tuple[str, ...]
    sizing: str
    approach: str
    params: dict[str, ParamValue]  # family-specific overrides of the block defaults


# Template 0 is the family default; the others are alternative designs for diversity.
TEMPLATES: dict[Family, tuple[Template, ...]] = {
    Family.MOMENTUM: (
        Template(
            "roc_momentum",
            ("trend_sma",),
            ("stop_loss", "max_hold"),
            "fixed_fraction",
            "Buy when the rate of change is strongly positive inside a long uptrend; "
            "leave on a stop or after a fixed holding period.",
            {
                "roc_period": 20,
                "roc_threshold": 0.03,
                "trend_period": 100,
                "stop_loss_pct": 0.07,
                "max_hold_bars": 30,
            },
        ),
        Template(
            "macd_cross",
            ("trend_sma",),
            ("opposite_signal", "stop_loss"),
            "fixed_fraction",
            "Buy a MACD bullish cross above the long trend; sell on the bearish cross or a stop.",
            {"trend_period": 150, "stop_loss_pct": 0.08},
        ),
    ),
    Family.MEAN_REVERSION: (
        Template(
            "bollinger_reversion",
            (),
            ("opposite_signal", "stop_loss", "max_hold"),
            "fixed_fraction",
            "Buy closes below the lower Bollinger band and sell the reversion to the middle band, "
            "with a stop and a time limit.",
            {"bb_period": 20, "bb_width": 2.0, "stop_loss_pct": 0.08, "max_hold_bars": 15},
        ),
        Template(
            "rsi_reversion",
            ("trend_sma",),
            ("opposite_signal", "stop_loss", "max_hold"),
            "fixed_fraction",
            "Buy oversold RSI dips while the long trend is up; sell when RSI recovers.",
            {
                "rsi_period": 5,
                "rsi_oversold": 25,
                "rsi_exit": 55,
                "trend_period": 200,
                "stop_loss_pct": 0.08,
                "max_hold_bars": 10,
            },
        ),
    ),
    Family.BREAKOUT: (
        Template(
            "donchian_breakout",
            (),
            ("opposite_signal", "atr_stop", "trailing_stop"),
            "fixed_risk",
            "Buy a close above the prior 55-bar high (turtle style), risk a fixed slice of "
            "equity to an ATR stop, exit on the short channel or a trailing stop.",
            {
                "donchian_period": 55,
                "donchian_exit_period": 20,
                "atr_stop_mult": 3.0,
                "trail_pct": 0.12,
                "risk_pct": 0.02,
            },
        ),
        Template(
            "donchian_breakout",
            ("volume_confirm",),
            ("opposite_signal", "trailing_stop"),
            "fixed_fraction",
            "Buy a channel breakout confirmed by above-average volume; trail a stop behind it.",
            {
                "donchian_period": 40,
                "donchian_exit_period": 15,
                "volume_mult": 1.0,
                "trail_pct": 0.10,
            },
        ),
    ),
    Family.TREND: (
        Template(
            "sma_cross",
            ("adx",),
            ("opposite_signal", "atr_stop"),
            "fixed_fraction",
            "Follow the trend: buy a fast/slow SMA golden cross when ADX says the market trends; "
            "exit on the death cross or an ATR stop.",
            {"fast_period": 20, "slow_period": 60, "adx_min": 15, "atr_stop_mult": 3.0},
        ),
        Template(
            "ema_cross",
            ("adx",),
            ("opposite_signal", "trailing_stop"),
            "fixed_fraction",
            "Buy a fast/slow EMA cross in a trending market; exit on the opposite cross or a "
            "trailing stop.",
            {"fast_period": 10, "slow_period": 40, "adx_min": 15, "trail_pct": 0.10},
        ),
    ),
    Family.VOLATILITY: (
        Template(
            "bollinger_breakout",
            ("volume_confirm",),
            ("opposite_signal", "trailing_stop", "max_hold"),
            "volatility_target",
            "Buy a volatility expansion (close above the upper band) on strong volume, sized to "
            "a volatility target; exit at the middle band, a trailing stop or a time limit.",
            {
                "bb_period": 20,
                "bb_width": 2.0,
                "volume_mult": 1.0,
                "trail_pct": 0.08,
                "max_hold_bars": 30,
                "target_vol": 0.20,
                "vol_lookback": 20,
            },
        ),
        Template(
            "bollinger_breakout",
            ("vol_regime",),
            ("opposite_signal", "take_profit", "stop_loss"),
            "fixed_fraction",
            "Buy an upper-band breakout unless volatility is chaotic; take profit or stop out.",
            {
                "bb_period": 20,
                "bb_width": 1.8,
                "atr_max_pct": 0.035,
                "take_profit_pct": 0.12,
                "stop_loss_pct": 0.06,
            },
        ),
    ),
}

# Which parameter a data brief's generic "lookback" maps to, by entry.
LOOKBACK_PARAM: dict[str, str] = {
    "roc_momentum": "roc_period",
    "sma_cross": "fast_period",
    "ema_cross": "fast_period",
    "rsi_reversion": "rsi_period",
    "bollinger_reversion": "bb_period",
    "bollinger_breakout": "bb_period",
    "donchian_breakout": "donchian_period",
}

SUGGESTED_ALIASES: dict[str, str] = {
    "bollinger_width": "bb_width",
    "bb_std": "bb_width",
    "stop_loss": "stop_loss_pct",
    "take_profit": "take_profit_pct",
    "max_hold": "max_hold_bars",
}


def _enforce_order(params: dict[str, ParamValue]) -> None:
    for a, b in ORDERED_PAIRS:
        if a in params and b in params and params[a] >= params[b]:
            ra, rb = PARAM_SPACE[a], PARAM_SPACE[b]
            params[b] = rb.snap(float(params[a]) + rb.step)  # widen b first
            if params[a] >= params[b]:
                params[a] = ra.snap(float(params[b]) - ra.step)


def snap_params(params: dict[str, Any]) -> dict[str, ParamValue]:
    """Clip and snap every known parameter, then keep ordered pairs ordered."""
    out: dict[str, ParamValue] = {}
    for name, value in params.items():
        rng = PARAM_SPACE.get(name)
        out[name] = rng.snap(value) if rng is not None and not isinstance(value, bool) else value
    _enforce_order(out)
    return out


def block_family(spec: StrategySpec) -> Family:
    """The spec's family as a block family (the only kind with templates), else a clear error."""
    if not isinstance(spec.family, Family):
        raise ValueError(f"{spec.family.value} is not a block family: it has no templates")
    return spec.family


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the blocks read: keep values, add defaults, drop the unused.
    A family without blocks reconciles to its own parameter table (``OWN_PARAMETERS``)."""
    own = OWN_PARAMETERS.get(spec.family.value)
    if own is not None:
        return own(spec)
    problems = unknown_blocks(spec.entry, spec.filters, spec.exits, spec.sizing)
    if problems:
        raise ValueError("; ".join(problems))
    needed = required_params(spec.entry, spec.filters, spec.exits, spec.sizing)
    family_defaults = TEMPLATES[block_family(spec)][0].params
    params = {
        name: spec.parameters.get(name, family_defaults.get(name, default))
        for name, default in needed.items()
    }
    return spec.model_copy(update={"parameters": snap_params(params)})


def reconcile_decision(spec: StrategySpec) -> StrategySpec:
    """The decision pipeline's own parameters (defaults filled in, snapped); no block edit
    can make a new trial of the same decisions, so it carries no blocks."""
    params = {name: spec.parameters.get(name, d) for name, d in DECISION_PARAMS.items()}
    return spec.model_copy(
        update={
            "entry": "decision_pipeline",
            "filters": [],
            "exits": [],
            "sizing": "risk_engine",
            "parameters": snap_params(params),
        }
    )


def reconcile_portfolio(spec: StrategySpec) -> StrategySpec:
    """Exactly the family's parameters and its regime filters' (defaults filled in, values
    snapped to the grid); the only filters a portfolio takes are the regime filters."""
    family = PortfolioFamily(spec.family)
    filters = [f for f in dict.fromkeys(spec.filters) if f in REGIME_FILTERS]
    defaults = dict(PORTFOLIO_PARAMS[family])
    for f in filters:
        defaults.update(FILTERS[f].params)
    params = {k: spec.parameters.get(k, d) for k, d in defaults.items()}
    long_short = spec.long_short and family == PortfolioFamily.CROSS_SECTIONAL_MOMENTUM
    return spec.model_copy(
        update={
            "entry": family.value,
            "filters": filters,
            "exits": [],
            "sizing": "target_weights",
            "long_short": long_short,
            "scope": "portfolio",
            "parameters": snap_params(params),
        }
    )


def with_regime_filter(spec: StrategySpec) -> StrategySpec:
    """``spec`` with the index regime filter (its defaults) added, named so."""
    if INDEX_REGIME in spec.filters:
        return spec
    added = spec.model_copy(
        update={"filters": [*spec.filters, INDEX_REGIME], "name": f"{spec.name}+{INDEX_REGIME}"}
    )
    return reconcile(added)


def base_name(family: Family, entry: str, filters: list[str], long_short: bool = False) -> str:
    """A template spec's name: family, entry, filters, and ``-ls`` when long-short."""
    name = f"{family.value}-{entry}" + "".join(f"+{f}" for f in filters)
    return name + ("-ls" if long_short else "")


def spec_from_template(
    family: Family, template: int = 0, *, long_short: bool = False, name: str | None = None
) -> StrategySpec:
    """A complete, reconciled spec from one of the family's templates."""
    t = TEMPLATES[family][template % len(TEMPLATES[family])]
    spec = StrategySpec(
        family=family,
        name=name or base_name(family, t.entry, list(t.filters), long_short),
        approach=t.approach,
        entry=t.entry,
        filters=list(t.filters),
        exits=list(t.exits),
        sizing=t.sizing,
        long_short=long_short,
        parameters=dict(t.params),
    )
    return reconcile(spec)


def default_spec(family: Family | str, *, long_short: bool = False) -> StrategySpec:
    """The first template's spec of ``family``."""
    return spec_from_template(Family(family), 0, long_short=long_short)


def _parse_family(value: str) -> Family | None:
    key = value.strip().lower().replace(" ", "_").replace("-", "_")
    try:
        return Family(key)
    except ValueError:
        return None


def seed_parameters(spec: StrategySpec, suggested: dict[str, Any] | None) -> StrategySpec:
    """Override the spec's own parameters with a data brief's suggestions (never adds blocks).

    Percent-like suggestions above 1 (``stop_loss_pct=5``) are read as percent.
    """
    if not suggested:
        return spec
    params = dict(spec.parameters)
    for raw_key, value in suggested.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        key = SUGGESTED_ALIASES.get(raw_key, raw_key)
        if key == "lookback":
            key = LOOKBACK_PARAM.get(spec.entry, "")
        if key not in params:
            continue
        if key.endswith("_pct") and value > 1.0:
            value = value / 100.0
        params[key] = value
    return spec.model_copy(update={"parameters": snap_params(params)})


def jitter(spec: StrategySpec, rng: random.Random, moves: int = 2) -> StrategySpec:
    """Move a few tunable parameters by one or two grid steps (used to de-duplicate seeds)."""
    params = dict(spec.parameters)
    names = [n for n in params if n in PARAM_SPACE and PARAM_SPACE[n].tunable]
    if not names:
        return spec
    for name in rng.sample(names, min(moves, len(names))):
        r = PARAM_SPACE[name]
        params[name] = r.snap(float(params[name]) + rng.choice((-2, -1, 1, 2)) * r.step)
    return spec.model_copy(update={"parameters": snap_params(params)})


def family_order(preferred_families: list[str]) -> list[Family]:
    """Preferred families first (in the given order), then the rest in enum order."""
    order: list[Family] = []
    for value in preferred_families:
        fam = _parse_family(value)
        if fam is not None and fam not in order:
            order.append(fam)
    return order + [f for f in Family if f not in order]


def family_slots(n: int, preferred_families: list[str], named: list[str]) -> list[Family]:
    """The family of each of ``n`` first-iteration slots.

    Without ``named`` families (the directive's), one family each before any repeats, in
    ``preferred_families`` order. With them, named and other families alternate, named first,
    so every prefix of the list (any ``n``) gives the directive at least half the slots and
    the rest stay diverse.
    """
    order = family_order(preferred_families)
    wanted = [f for f in family_order(named) if f.value in {_norm_family(x) for x in named}]
    if not wanted:
        return [order[i % len(order)] for i in range(n)]
    others = [f for f in order if f not in wanted] or wanted
    return [
        wanted[(i // 2) % len(wanted)] if i % 2 == 0 else others[(i // 2) % len(others)]
        for i in range(n)
    ]


def _norm_family(value: str) -> str | None:
    fam = _parse_family(value)
    return fam.value if fam is not None else None


def initial_specs(
    n: int,
    *,
    preferred_families: list[str],
    suggested: dict[str, Any] | None,
    rng: random.Random,
    named: list[str] | None = None,
) -> list[StrategySpec]:
    """n diverse first-iteration specs (see ``family_slots`` for which family fills a slot).

    A family's k-th appearance uses its k-th template; past the templates, parameters are
    jittered. Trial keys are unique within the batch.
    """
    slots = family_slots(n, preferred_families, named or [])
    # The directive asked for the index regime filter: a named family's designs come in pairs,
    # each without and then with the filter, so the iteration compares like with like (every
    # second slot of the iteration takes it when the directive names no block family).
    regime = wanted(named or [])
    named_families = {_norm_family(x) for x in named or []} - {None}
    specs: list[StrategySpec] = []
    keys: set[str] = set()
    seen_count: dict[Family, int] = {}
    for i, family in enumerate(slots):
        k = seen_count.get(family, 0)
        seen_count[family] = k + 1
        paired = regime and family.value in named_families
        t = k // 2 if paired else k  # the template of this slot
        spec = seed_parameters(spec_from_template(family, t), suggested)
        if (paired and k % 2 == 1) or (regime and not named_families and i % 2 == 1):
            spec = with_regime_filter(spec)
        if t >= len(TEMPLATES[family]):
            spec = spec.model_copy(update={"name": f"{spec.name} v{t + 1}"})
            spec = jitter(spec, rng)
        for _ in range(100):
            if spec.trial_key() not in keys:
                break
            spec = jitter(spec, rng)
        else:
            raise RuntimeError(f"could not find a fresh {family.value} variant")
        keys.add(spec.trial_key())
        specs.append(spec)
    return specs


def known_families() -> list[str]:
    """Every family name ``--families`` accepts: the block families, then the pipelines."""
    return (
        [f.value for f in Family]
        + [f.value for f in PortfolioFamily]
        + [f.value for f in PipelineFamily]
    )


# The families without blocks, each reconciled to its own parameter table (the block
# families, the catch-all, reconcile to what their blocks read).
OWN_PARAMETERS: dict[str, Callable[[StrategySpec], StrategySpec]] = {
    **{f.value: reconcile_portfolio for f in PortfolioFamily},
    PipelineFamily.DECISION_PIPELINE.value: reconcile_decision,
}


def tunable(names: Iterable[str]) -> frozenset[str]:
    """The names among ``names`` that move on the grid (``PARAM_SPACE``, tunable)."""
    return frozenset(n for n in names if n in PARAM_SPACE and PARAM_SPACE[n].tunable)


def block_grid_parameters(family: str) -> frozenset[str]:
    """The tunable grid parameters a block family's specs can carry: its templates' entries and
    their siblings, and every filter, exit and sizing block (which mutation may add)."""
    block = next((f for f in TEMPLATES if f.value == family), None)
    if block is None:
        return frozenset()
    entries = {t.entry for t in TEMPLATES[block]}
    entries |= {s for e in list(entries) for s in SIBLINGS.get(e, ())}
    names = {k for e in entries if e in ENTRIES for k in ENTRIES[e].params}
    for table in (FILTERS, EXITS, SIZINGS):
        names |= {k for b in table.values() for k in b.params}
    return tunable(names)


def portfolio_grid_parameters(family: str) -> frozenset[str]:
    """The tunable grid parameters of a portfolio family's specs."""
    return tunable(k for f, p in PORTFOLIO_PARAMS.items() if f.value == family for k in p)
