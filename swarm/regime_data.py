"""The index series a regime filter reads (``strategies.regime``), for a run's jobs.

A strategy with a regime filter reads an index (SPY, QQQ or VIX) as an extra data feed named
``index:SYMBOL``; its code names it. ``with_index_feeds`` adds those feeds to a job's bars, the
holdout sealed as for the universe; the series are loaded once per run through the same source
chain as the universe (``backtest.data.load_bars``). ``check_regime_data`` refuses a run that
asks for the filter when the data folder lacks a series it needs, before anything runs.

Reproducibility: ``load_index_series`` loads every index series the run has once, before it
starts (``swarm.run`` records their sha256s in the manifest); a variant reads only those, and a
job's data hash covers the ones its code reads (``index_hashes``). A series the run lacks is a
job error naming the file (``missing_message``), never a bare ``KeyError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from backtest.data import LoadedBars, find_csv, load_bars
from backtest.errors import BacktestError
from strategies.regime import INDEX_SERIES, feed_name, index_symbols, needed_series
from swarm.errors import UserInputError


def check_regime_data(
    styles: list[str], *, data_dir: Path | None, source: str, timeframe: str = "1d"
) -> None:
    """Exit-2 input check: a run asking for the regime filter (``styles``: the directive's
    families and styles) needs every index the filter may read in ``--data-dir``."""
    if data_dir is None or source not in ("auto", "csv"):
        return  # synthetic, cache or yfinance: the series load like the universe's
    for symbol in needed_series(styles):
        try:
            find_csv(symbol, Path(data_dir), timeframe)
        except BacktestError:
            raise UserInputError(
                f"--data-dir: the regime filter needs {symbol}.csv in {data_dir}; add it or "
                "drop the filter (leave 'regime filtered' / 'risk-on' out of the directive, "
                "index_regime / vix_regime out of --families)"
            ) from None


def load_index_series(config: Any, universe: dict[str, LoadedBars]) -> dict[str, LoadedBars]:
    """The index series (``INDEX_SERIES``) the run's variants may read, loaded once before it
    starts so the manifest can hash them. A series the run asks for (its styles name a
    regime filter) loads through the whole source chain and must exist (exit 2); any other
    only when the run's data has it without the network (a CSV in ``--data-dir``, the cache,
    synthetic bars). A series in the universe is the universe's, hashed there."""
    needed = needed_series([*config.preferred_families, *config.families])
    out: dict[str, LoadedBars] = {}
    for symbol in INDEX_SERIES:
        if symbol in universe:
            continue
        local_only = config.offline or symbol not in needed
        try:
            out[symbol] = load_bars(
                symbol,
                start=config.start,
                end=config.end,
                timeframe=config.timeframe,
                source=config.source,
                data_dir=config.data_dir,
                cache_dir=config.cache_dir,
                seed=config.seed,
                prices=config.prices,
                repair=getattr(config, "repair_data", False),
                fetcher=_offline if local_only else None,
            )
        except BacktestError as exc:
            if symbol in needed:
                raise UserInputError(
                    f"the regime filter needs the index {symbol}: "
                    + str(exc).removeprefix("--tickers: ")
                ) from None
    return out


def index_bars(ctx: Any, symbol: str, *, holdout: bool = False) -> pd.DataFrame | None:
    """The index ``symbol``'s bars over the run's dates (in-sample only unless ``holdout``),
    loaded once per run; None when no source has it (the job then fails naming the feed)."""
    loaded = _loaded(ctx, symbol)
    bars = None if loaded is None else loaded.bars
    if bars is None or holdout:
        return bars
    # One in-sample frame per index for the run, shared by its jobs (as the universe's are).
    sealed = ctx.memo.index_insample
    if symbol not in sealed:
        sealed[symbol] = ctx.split.insample_bars(bars)
    return sealed[symbol]


def _loaded(ctx: Any, symbol: str) -> LoadedBars | None:
    """The index ``symbol`` as the run loaded it before it started (``load_index_series``,
    in ``ctx.memo.index_bars``), or the universe's; None: the run has no such series.
    Never loaded later: the manifest could not record it."""
    if symbol in ctx.data:  # an index that is also in the universe
        return ctx.data[symbol]
    return ctx.memo.index_bars.get(symbol)


def available_indices(ctx: Any) -> list[str]:
    """The regime filters' index series this run has (``strategies.regime.available_filters``
    says which filters it can offer)."""
    return [s for s in INDEX_SERIES if _loaded(ctx, s) is not None]


def index_hashes(ctx: Any, code: str | None) -> list[str]:
    """``index:SYM:sha256`` of every index ``code`` reads ("missing" when the run lacks it):
    what a job's data hash adds for them (``swarm.nodes.backtest.data_sha256``)."""
    out = []
    for s in index_symbols(code) if code else []:
        loaded = _loaded(ctx, s)
        out.append(f"{feed_name(s)}:{loaded.sha256 if loaded is not None else 'missing'}")
    return out


def missing_indices(ctx: Any, code: str | None) -> list[str]:
    """The index series ``code`` reads that the run does not have."""
    return [s for s in (index_symbols(code) if code else []) if _loaded(ctx, s) is None]


def missing_message(ctx: Any, missing: list[str]) -> str:
    """A job's error for index feeds the run lacks: which file, where, and what to do."""
    where = ctx.config.data_dir if ctx.config.data_dir is not None else "--data-dir"
    files = ", ".join(f"{s}.csv" for s in missing)
    feeds = ", ".join(f'getdatabyname("{feed_name(s)}")' for s in missing)
    return (
        f"the strategy reads {feeds} but the run has no {files} (in {where}): add the file "
        "and start a new run, or drop the regime filter from the strategy"
    )


def reproduce_data(ctx: Any, data: str | list[str] | None, code: str | None) -> Any:
    """A holdout run's ``--data`` for the export's README: the traded file(s), then the index
    files ``code`` reads (the exported runner takes them last, in that order)."""
    wanted = index_symbols(code) if code else []
    if not wanted:
        return data
    files = list(data) if isinstance(data, list) else [data]
    for s in wanted:
        loaded = _loaded(ctx, s)
        files.append(loaded.path if loaded is not None and loaded.path else f"{s}.csv")
    return files


def with_index_feeds(
    ctx: Any,
    bars: pd.DataFrame | dict[str, pd.DataFrame],
    symbol: str,
    code: str | None,
    *,
    holdout: bool = False,
) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """``bars`` plus the index feeds ``code`` reads (after the traded feeds, so ``self.data``
    stays the traded symbol); unchanged when it reads none."""
    wanted = index_symbols(code) if code else []
    if not wanted:
        return bars
    out = dict(bars) if isinstance(bars, dict) else {symbol: bars}
    for s in wanted:
        frame = index_bars(ctx, s, holdout=holdout)
        if frame is not None:
            out[feed_name(s)] = frame
    return out


def _offline(symbol: str, **_: Any) -> pd.DataFrame:
    raise ConnectionError("--offline: network disabled")
