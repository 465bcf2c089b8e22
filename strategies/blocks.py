"""The building blocks a strategy spec is assembled from.

Each block is data, not code: the Backtrader expressions it contributes, the indicators it needs
and the parameters it reads (with defaults). ``codegen`` stitches them into one readable module.
Expressions only ever read ``[0]`` or ``[-k]`` of a line, so no block can look ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strategies.regime import INDEX_REGIME, VIX, VIX_REGIME, feed_name, regime_symbol

ParamDefault = float | int | bool

# Indicators several blocks share are created once, under a fixed attribute name.
SHARED_INDICATORS: dict[str, str] = {
    "atr": "bt.indicators.ATR(self.data, period=14)",
}


@dataclass(frozen=True)
class EntryBlock:
    id: str
    why: str  # one line shown as a comment above the condition
    params: dict[str, ParamDefault]
    init: tuple[str, ...]  # assignments for __init__, e.g. "self.roc = bt.indicators..."
    long_entry: str
    long_exit: str  # the entry's own exit: what ``opposite_signal`` uses
    short_entry: str | None = None  # None: the idea has no sensible short mirror
    short_exit: str | None = None
    nan_checks: tuple[str, ...] = ()  # values that must be finite before trading
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def shortable(self) -> bool:
        """Whether the family can go short (it has both a short entry and a short exit)."""
        return self.short_entry is not None and self.short_exit is not None


@dataclass(frozen=True)
class FilterBlock:
    id: str
    why: str
    params: dict[str, ParamDefault]
    init: tuple[str, ...]
    long_ok: str
    short_ok: str
    nan_checks: tuple[str, ...] = ()
    needs: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ExitBlock:
    id: str
    why: str
    params: dict[str, ParamDefault]
    long_exit: str | None  # None for opposite_signal: it borrows the entry's exit
    short_exit: str | None
    needs: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class SizingBlock:
    id: str
    why: str
    params: dict[str, ParamDefault]
    init: tuple[str, ...] = ()
    nan_checks: tuple[str, ...] = ()
    needs: frozenset[str] = field(default_factory=frozenset)


_ATR = frozenset({"atr"})
# Where a regime filter's init names its index feed; codegen writes the spec's index there
# (``strategies.regime``): the feed's name is in the code, so the code says what it reads.
INDEX_FEED_SLOT = "$INDEX_FEED"

ENTRIES: dict[str, EntryBlock] = {
    b.id: b
    for b in (
        EntryBlock(
            id="roc_momentum",
            why="momentum: the rate of change over roc_period exceeds roc_threshold",
            params={"roc_period": 20, "roc_threshold": 0.02},
            init=(
                "self.roc = bt.indicators.RateOfChange(self.data.close, period=self.p.roc_period)",
            ),
            long_entry="self.roc[0] > self.p.roc_threshold",
            long_exit="self.roc[0] < 0.0",
            short_entry="self.roc[0] < -self.p.roc_threshold",
            short_exit="self.roc[0] > 0.0",
            nan_checks=("self.roc[0]",),
        ),
        EntryBlock(
            id="sma_cross",
            why="trend: the fast SMA crosses above the slow SMA",
            params={"fast_period": 20, "slow_period": 100},
            init=(
                "self.fast_ma = bt.indicators.SMA(self.data.close, period=self.p.fast_period)",
                "self.slow_ma = bt.indicators.SMA(self.data.close, period=self.p.slow_period)",
                "self.cross = bt.indicators.CrossOver(self.fast_ma, self.slow_ma)",
            ),
            long_entry="self.cross[0] > 0",
            long_exit="self.cross[0] < 0",
            short_entry="self.cross[0] < 0",
            short_exit="self.cross[0] > 0",
            nan_checks=("self.fast_ma[0]", "self.slow_ma[0]"),
        ),
        EntryBlock(
            id="ema_cross",
            why="trend: the fast EMA crosses above the slow EMA",
            params={"fast_period": 20, "slow_period": 100},
            init=(
                "self.fast_ma = bt.indicators.EMA(self.data.close, period=self.p.fast_period)",
                "self.slow_ma = bt.indicators.EMA(self.data.close, period=self.p.slow_period)",
                "self.cross = bt.indicators.CrossOver(self.fast_ma, self.slow_ma)",
            ),
            long_entry="self.cross[0] > 0",
            long_exit="self.cross[0] < 0",
            short_entry="self.cross[0] < 0",
            short_exit="self.cross[0] > 0",
            nan_checks=("self.fast_ma[0]", "self.slow_ma[0]"),
        ),
        EntryBlock(
            id="macd_cross",
            why="momentum: the MACD line crosses above its signal line",
            params={"macd_fast": 12, "macd_slow": 26, "macd_signal": 9},
            init=(
                "self.macd = bt.indicators.MACD(self.data.close, period_me1=self.p.macd_fast, "
                "period_me2=self.p.macd_slow, period_signal=self.p.macd_signal)",
                "self.cross = bt.indicators.CrossOver(self.macd.macd, self.macd.signal)",
            ),
            long_entry="self.cross[0] > 0",
            long_exit="self.cross[0] < 0",
            short_entry="self.cross[0] < 0",
            short_exit="self.cross[0] > 0",
            nan_checks=("self.macd.macd[0]", "self.macd.signal[0]"),
        ),
        EntryBlock(
            id="rsi_reversion",
            why="mean reversion: RSI below rsi_oversold buys the dip, RSI above rsi_exit sells",
            params={"rsi_period": 14, "rsi_oversold": 30, "rsi_exit": 55},
            init=(
                "self.rsi = bt.indicators.RSI(self.data.close, period=self.p.rsi_period, "
                "safediv=True)",
            ),
            long_entry="self.rsi[0] < self.p.rsi_oversold",
            long_exit="self.rsi[0] > self.p.rsi_exit",
            nan_checks=("self.rsi[0]",),
        ),
        EntryBlock(
            id="bollinger_reversion",
            why="mean reversion: close below the lower band buys, the middle band sells",
            params={"bb_period": 20, "bb_width": 2.0},
            init=(
                "self.bband = bt.indicators.BollingerBands(self.data.close, "
                "period=self.p.bb_period, devfactor=self.p.bb_width)",
            ),
            long_entry="self.data.close[0] < self.bband.bot[0]",
            long_exit="self.data.close[0] > self.bband.mid[0]",
            nan_checks=("self.bband.bot[0]", "self.bband.mid[0]"),
        ),
        EntryBlock(
            id="bollinger_breakout",
            why="volatility breakout: close above the upper band, out below the middle band",
            params={"bb_period": 20, "bb_width": 2.0},
            init=(
                "self.bband = bt.indicators.BollingerBands(self.data.close, "
                "period=self.p.bb_period, devfactor=self.p.bb_width)",
            ),
            long_entry="self.data.close[0] > self.bband.top[0]",
            long_exit="self.data.close[0] < self.bband.mid[0]",
            short_entry="self.data.close[0] < self.bband.bot[0]",
            short_exit="self.data.close[0] > self.bband.mid[0]",
            nan_checks=("self.bband.top[0]", "self.bband.mid[0]", "self.bband.bot[0]"),
        ),
        EntryBlock(
            id="donchian_breakout",
            why="breakout: close above the highest high of the previous donchian_period bars",
            params={"donchian_period": 55, "donchian_exit_period": 20},
            init=(
                # high(-1): the channel ends at the previous bar, so today's bar can break it.
                "self.upper_channel = bt.indicators.Highest(self.data.high(-1), "
                "period=self.p.donchian_period)",
                "self.lower_channel = bt.indicators.Lowest(self.data.low(-1), "
                "period=self.p.donchian_period)",
                "self.exit_low = bt.indicators.Lowest(self.data.low(-1), "
                "period=self.p.donchian_exit_period)",
                "self.exit_high = bt.indicators.Highest(self.data.high(-1), "
                "period=self.p.donchian_exit_period)",
            ),
            long_entry="self.data.close[0] > self.upper_channel[0]",
            long_exit="self.data.close[0] < self.exit_low[0]",
            short_entry="self.data.close[0] < self.lower_channel[0]",
            short_exit="self.data.close[0] > self.exit_high[0]",
            nan_checks=(
                "self.upper_channel[0]",
                "self.lower_channel[0]",
                "self.exit_low[0]",
                "self.exit_high[0]",
            ),
        ),
    )
}

FILTERS: dict[str, FilterBlock] = {
    b.id: b
    for b in (
        FilterBlock(
            id="trend_sma",
            why="trade with the long trend: longs above SMA(trend_period), shorts below",
            params={"trend_period": 100},
            init=(
                "self.trend_sma = bt.indicators.SMA(self.data.close, period=self.p.trend_period)",
            ),
            long_ok="self.data.close[0] > self.trend_sma[0]",
            short_ok="self.data.close[0] < self.trend_sma[0]",
            nan_checks=("self.trend_sma[0]",),
        ),
        FilterBlock(
            id="adx",
            why="only trade a trending market: ADX(14) above adx_min",
            params={"adx_min": 20},
            init=("self.adx = bt.indicators.ADX(self.data, period=14)",),
            long_ok="self.adx[0] > self.p.adx_min",
            short_ok="self.adx[0] > self.p.adx_min",
            nan_checks=("self.adx[0]",),
        ),
        FilterBlock(
            id="volume_confirm",
            why="volume confirms the move: volume above volume_mult x its 20-bar average",
            params={"volume_mult": 1.2},
            init=("self.volume_sma = bt.indicators.SMA(self.data.volume, period=20)",),
            long_ok="self.data.volume[0] > self.volume_sma[0] * self.p.volume_mult",
            short_ok="self.data.volume[0] > self.volume_sma[0] * self.p.volume_mult",
            nan_checks=("self.volume_sma[0]",),
        ),
        FilterBlock(
            id=INDEX_REGIME,
            why="risk-on only: the index (SPY or QQQ, read, never traded) closes above its "
            "SMA(regime_ma)",
            params={"regime_index": 0, "regime_ma": 200},
            init=(
                f'self.regime_feed = self.getdatabyname("{INDEX_FEED_SLOT}")',
                "self.regime_sma = bt.indicators.SMA(self.regime_feed.close, "
                "period=self.p.regime_ma)",
            ),
            long_ok="self.regime_feed.close[0] > self.regime_sma[0]",
            short_ok="self.regime_feed.close[0] < self.regime_sma[0]",
            nan_checks=("self.regime_feed.close[0]", "self.regime_sma[0]"),
        ),
        FilterBlock(
            id=VIX_REGIME,
            why="calm markets only: VIX closes below vix_max (a read-only extra feed)",
            params={"vix_max": 25.0},
            init=(f'self.vix_feed = self.getdatabyname("{feed_name(VIX)}")',),
            long_ok="self.vix_feed.close[0] < self.p.vix_max",
            short_ok="self.vix_feed.close[0] < self.p.vix_max",
            nan_checks=("self.vix_feed.close[0]",),
        ),
        FilterBlock(
            id="vol_regime",
            why="skip chaotic markets: ATR(14) / close below atr_max_pct",
            params={"atr_max_pct": 0.04},
            init=(),
            long_ok="self.atr[0] < self.p.atr_max_pct * self.data.close[0]",
            short_ok="self.atr[0] < self.p.atr_max_pct * self.data.close[0]",
            nan_checks=("self.atr[0]",),
            needs=_ATR,
        ),
    )
}

EXITS: dict[str, ExitBlock] = {
    b.id: b
    for b in (
        ExitBlock(
            id="stop_loss",
            why="out when the close is stop_loss_pct against the entry price",
            params={"stop_loss_pct": 0.07},
            long_exit="close <= self.entry_price * (1.0 - self.p.stop_loss_pct)",
            short_exit="close >= self.entry_price * (1.0 + self.p.stop_loss_pct)",
        ),
        ExitBlock(
            id="take_profit",
            why="out when the close is take_profit_pct in favour of the entry price",
            params={"take_profit_pct": 0.15},
            long_exit="close >= self.entry_price * (1.0 + self.p.take_profit_pct)",
            short_exit="close <= self.entry_price * (1.0 - self.p.take_profit_pct)",
        ),
        ExitBlock(
            id="atr_stop",
            why="out beyond entry -/+ atr_stop_mult x ATR(14), fixed when the order fills",
            params={"atr_stop_mult": 3.0},
            long_exit="close <= self.stop_level",
            short_exit="close >= self.stop_level",
            needs=_ATR,
        ),
        ExitBlock(
            id="trailing_stop",
            why="out when the close gives back trail_pct from the best close since entry",
            params={"trail_pct": 0.10},
            long_exit="close <= self.extreme_close * (1.0 - self.p.trail_pct)",
            short_exit="close >= self.extreme_close * (1.0 + self.p.trail_pct)",
        ),
        ExitBlock(
            id="max_hold",
            why="out after max_hold_bars bars in the trade",
            params={"max_hold_bars": 40},
            long_exit="len(self) - self.entry_bar >= self.p.max_hold_bars",
            short_exit="len(self) - self.entry_bar >= self.p.max_hold_bars",
        ),
        ExitBlock(
            id="opposite_signal",
            why="the entry's own exit condition",
            params={},
            long_exit=None,
            short_exit=None,
        ),
    )
}

SIZINGS: dict[str, SizingBlock] = {
    b.id: b
    for b in (
        SizingBlock(
            id="fixed_fraction",
            why="invest position_fraction of equity",
            params={"position_fraction": 0.95},
        ),
        SizingBlock(
            id="fixed_risk",
            why="risk risk_pct of equity down to the stop, capped at position_fraction of equity",
            params={"risk_pct": 0.01, "position_fraction": 0.95},
        ),
        SizingBlock(
            id="volatility_target",
            why="scale exposure to target_vol annualised, capped at position_fraction of equity",
            params={"target_vol": 0.15, "vol_lookback": 20, "position_fraction": 0.95},
            init=(
                "self.returns = bt.indicators.PercentChange(self.data.close, period=1)",
                "self.realised_sd = bt.indicators.StandardDeviation(self.returns, "
                "period=self.p.vol_lookback)",
            ),
            nan_checks=("self.realised_sd[0]",),
        ),
    )
}

# Entries that are the same idea with a different trigger: REFINE swaps between them.
SIBLINGS: dict[str, tuple[str, ...]] = {
    "roc_momentum": ("macd_cross",),
    "macd_cross": ("roc_momentum", "ema_cross"),
    "sma_cross": ("ema_cross", "macd_cross"),
    "ema_cross": ("sma_cross", "macd_cross"),
    "rsi_reversion": ("bollinger_reversion",),
    "bollinger_reversion": ("rsi_reversion",),
    "bollinger_breakout": ("donchian_breakout",),
    "donchian_breakout": ("bollinger_breakout",),
}


def unknown_blocks(entry: str, filters: list[str], exits: list[str], sizing: str) -> list[str]:
    """Block ids that do not exist, as readable messages."""
    bad: list[str] = []
    if entry not in ENTRIES:
        bad.append(f"unknown entry block {entry!r}")
    bad += [f"unknown filter block {f!r}" for f in filters if f not in FILTERS]
    bad += [f"unknown exit block {x!r}" for x in exits if x not in EXITS]
    if sizing not in SIZINGS:
        bad.append(f"unknown sizing block {sizing!r}")
    return bad


def required_params(
    entry: str, filters: list[str], exits: list[str], sizing: str
) -> dict[str, ParamDefault]:
    """Every parameter the blocks read, with its default, in a stable reading order."""
    out: dict[str, ParamDefault] = {}
    out.update(ENTRIES[entry].params)
    for f in filters:
        out.update(FILTERS[f].params)
    for x in exits:
        out.update(EXITS[x].params)
    out.update(SIZINGS[sizing].params)
    return out


def filter_init(block: str, parameters: dict[str, ParamDefault]) -> tuple[str, ...]:
    """A filter's ``__init__`` lines, its index feed's name written in (regime filters)."""
    name = feed_name(regime_symbol(parameters.get("regime_index", 0)))
    return tuple(ln.replace(INDEX_FEED_SLOT, name) for ln in FILTERS[block].init)
