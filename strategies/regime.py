"""The index regime filter: trade only when the market is risk-on.

Two catalogue filter blocks (``strategies.blocks``) read an index that is fed to the strategy as
an extra, read-only data feed, found by name (``self.getdatabyname("index:SPY")``) and never
traded:

* ``index_regime``: the index (``REGIME_INDICES[regime_index]``: SPY or QQQ) closes above its
  ``regime_ma``-bar simple moving average (longs; shorts when it is below);
* ``vix_regime``: VIX closes below ``vix_max`` (either side).

Any family can take them: the block families as a filter, the portfolio families
(``strategies.portfolio``) as a switch to cash at a rebalance.

Which index a strategy reads is written in its code, as the literal name of the feed; the job
builder (``swarm.regime_data``), the books (``backtest.books``: a fill on an index feed is an
integrity error) and the export (``experiments.export``) all read it from there with
``index_symbols``, so the code alone says which extra data it needs.

Pure: nothing here imports ``backtest`` or ``swarm``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Collection

from strategies.parsing import parse

# The prefix of a read-only index feed's name. Universe symbols never hold a colon.
INDEX_PREFIX = "index:"
REGIME_INDICES: tuple[str, ...] = ("SPY", "QQQ")  # regime_index 0, 1
VIX = "VIX"
INDEX_REGIME = "index_regime"
VIX_REGIME = "vix_regime"
REGIME_FILTERS: tuple[str, ...] = (INDEX_REGIME, VIX_REGIME)
# Every index series a regime filter can read: a run loads (and hashes) those it has before
# it starts, so a variant reads only series its manifest records.
INDEX_SERIES: tuple[str, ...] = (*REGIME_INDICES, VIX)
# Parameters written into the code as data (the feed's name), not as a strategy parameter.
INLINE_PARAMS = frozenset({"regime_index"})
# The directive's request for the filter ("regime filtered", "risk-on"): a style word beside
# the families (``swarm.directive``); the proposers add the filter to some of the named
# families' specs when they see it.
REGIME_STYLE = "index_regime"


def feed_name(symbol: str) -> str:
    """The data feed name a strategy reads the index ``symbol`` by."""
    return INDEX_PREFIX + symbol


def is_index_feed(name: str) -> bool:
    """A read-only index feed (never traded), by its name."""
    return name.startswith(INDEX_PREFIX)


def regime_symbol(regime_index: int | float | bool) -> str:
    """The index ``regime_index`` selects (clipped into ``REGIME_INDICES``)."""
    i = min(max(int(regime_index), 0), len(REGIME_INDICES) - 1)
    return REGIME_INDICES[i]


def spec_index_symbols(filters: list[str], parameters: dict) -> list[str]:
    """The index series a spec's regime filters read, in filter order."""
    out: list[str] = []
    for f in filters:
        if f == INDEX_REGIME:
            out.append(regime_symbol(parameters.get("regime_index", 0)))
        elif f == VIX_REGIME:
            out.append(VIX)
    return list(dict.fromkeys(out))


def index_symbols(code: str) -> list[str]:
    """The index symbols ``code`` reads: every ``getdatabyname("index:SYM")`` with a literal
    name, in order of appearance (no duplicates). Code that does not parse reads none."""
    return list(_index_symbols(code))


@functools.lru_cache(maxsize=256)
def _index_symbols(code: str) -> tuple[str, ...]:
    try:
        tree = parse(code)  # locked: the backtest node calls this from several threads
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "getdatabyname"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and is_index_feed(node.args[0].value)
        ):
            symbol = node.args[0].value[len(INDEX_PREFIX) :]
            if symbol:
                found.append((node.lineno, node.col_offset, symbol))
    return tuple(dict.fromkeys(s for _, _, s in sorted(found)))


def wanted(styles: list[str]) -> bool:
    """Whether a run's named styles ask for the regime filter."""
    return REGIME_STYLE in styles


def filter_series(block: str) -> tuple[str, ...]:
    """The index series a regime filter may read: for ``index_regime`` every index
    ``regime_index`` can reach (the tuner moves it)."""
    return {INDEX_REGIME: REGIME_INDICES, VIX_REGIME: (VIX,)}.get(block, ())


def needed_series(styles: list[str]) -> list[str]:
    """The index series a run whose styles name a regime filter (the directive's phrases,
    ``--families index_regime`` / ``vix_regime``) may read."""
    return list(dict.fromkeys(s for f in REGIME_FILTERS if f in styles for s in filter_series(f)))


def available_filters(indices: Collection[str]) -> tuple[str, ...]:
    """The regime filters a run can offer (LLM catalogue, REFINE): those whose every index
    series is in ``indices``, the series the run's data has."""
    return tuple(f for f in REGIME_FILTERS if set(filter_series(f)) <= set(indices))
