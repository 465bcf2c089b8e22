"""The style taxonomy: a tree of the styles a directive can name, and the designs each covers.

A directive names styles ("momentum", "trend following", "low volatility"), not code. A style
is a node of this tree; it covers its children's families and designs. "Momentum" covers
time-series momentum (the ``momentum`` block family) and cross-sectional momentum
(``cross_sectional_momentum``, ``rotation``); "trend" covers the moving-average designs (the
``trend`` family), channel breakouts (Donchian) and rate-of-change entries that trade only
with the trend (``roc_momentum`` behind ``trend_sma``). A best variant is "outside the
directive" only when no named style covers it (``within_directive``).

Pure data and one function: nothing here imports ``swarm``, so the report (``experiments``)
and the final verdict (``swarm.nodes.finalize``) judge with the same tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Design(NamedTuple):
    """A design inside another family: its entry block, and the filters it must carry."""

    family: str
    entry: str
    filters: tuple[str, ...] = ()


class Style(NamedTuple):
    """A node: the families it tries first (in order), its children, the designs it covers."""

    families: tuple[str, ...]
    children: tuple[str, ...] = ()
    designs: tuple[Design, ...] = ()


# Order of ``families`` is the search order a directive naming the style gets.
STYLES: dict[str, Style] = {
    "momentum": Style(
        families=("momentum",),
        children=("time_series_momentum", "cross_sectional_momentum"),
    ),
    "time_series_momentum": Style(families=("momentum",)),
    "cross_sectional_momentum": Style(
        families=("cross_sectional_momentum",), children=("rotation",)
    ),
    "rotation": Style(families=("rotation",)),
    "trend": Style(
        families=("trend",),
        designs=(
            Design("breakout", "donchian_breakout"),
            Design("momentum", "roc_momentum", ("trend_sma",)),
        ),
    ),
    "breakout": Style(families=("breakout",)),
    "mean_reversion": Style(families=("mean_reversion",)),
    "pairs": Style(families=("pairs",)),
    # Volatility expansion (Bollinger squeeze breakouts): not the low-volatility anomaly.
    "volatility": Style(families=("volatility",)),
    # The low-volatility anomaly: hold the calmest names (portfolio), or scale exposure down
    # when volatility rises (one symbol). Never a volatility breakout.
    "low_volatility": Style(families=("low_volatility",)),
    "decision_pipeline": Style(families=("decision_pipeline",)),
}


def covered(style: str) -> tuple[set[str], set[Design]]:
    """(every family, every extra design) the style covers, its subtree included."""
    node = STYLES.get(style)
    if node is None:  # a family name given where a style is expected: covers itself
        return {style}, set()
    families, designs = set(node.families), set(node.designs)
    for child in node.children:
        f, d = covered(child)
        families |= f
        designs |= d
    return families, designs


def within_directive(spec: Mapping[str, Any], named: list[str]) -> bool:
    """Whether a variant's spec (its JSON form) is inside one of the ``named`` styles.

    ``named`` holds style nodes or family names (a run recorded before the tree named its
    families); both are read through the tree, so "momentum" covers cross-sectional momentum.
    Nothing named: everything is inside.
    """
    named = [n for n in named if n not in _NOT_STYLES]
    if not named:
        return True
    family = str(spec.get("family", ""))
    entry = str(spec.get("entry", ""))
    filters = set(spec.get("filters") or [])
    for style in named:
        families, designs = covered(style)
        if family in families:
            return True
        if any(
            d.family == family and d.entry == entry and set(d.filters) <= filters for d in designs
        ):
            return True
    return False


# Names a run may record beside its styles that are filters, not styles.
_NOT_STYLES = frozenset({"index_regime", "vix_regime"})
