"""Fundamental and sentiment steering: the two view domains move the recommended families
(agreeing with the technical side confirms a move, opposing it says the move may fade) and
rank the universe (a universe expansion adds the better-ranked symbols' sectors first)."""

from __future__ import annotations

from collections.abc import Sequence

from swarm.research.context import sign
from swarm.research.leader import FAMILIES, took_side
from swarm.research.models import Domain, FactSheet, Finding, SymbolRank

VIEW_DOMAINS = (Domain.FUNDAMENTAL, Domain.SENTIMENT)


def universe_ranking(findings: Sequence[Finding], symbols: Sequence[str]) -> list[SymbolRank]:
    """Symbols ranked by their fundamental and sentiment findings: confidence-weighted mean
    signal of the non-abstained ones, best first; symbols without any view keep their
    universe order after the others, at score 0."""
    ranks = []
    for symbol in symbols:
        active = [
            f for f in findings if f.symbol == symbol and f.type in VIEW_DOMAINS and not f.abstained
        ]
        w = sum(f.confidence for f in active)
        score = sum(f.confidence * f.signal for f in active) / w if w else 0.0
        basis = (
            ", ".join(
                f"{f.type.value}.{f.specialization} {f.signal:+.2f}@{f.confidence:.2f}"
                for f in active
            )
            or "no fundamental or sentiment view"
        )
        ranks.append(
            SymbolRank(
                symbol=symbol, score=max(-1.0, min(1.0, score)), n_views=len(active), basis=basis
            )
        )
    position = {s: i for i, s in enumerate(symbols)}
    return sorted(ranks, key=lambda r: (r.n_views == 0, -r.score, position[r.symbol]))


def steer_families(
    families: Sequence[str], fact_sheets: Sequence[FactSheet]
) -> tuple[list[str], list[str]]:
    """(families, notes): the fundamental and sentiment views move families up.

    Views that agree with the technical side confirm the move: trend and momentum first.
    Views that oppose it say the move may fade: mean reversion and volatility first. Views
    with no technical side to compare lean the way they point: trend for a clear lean.
    No view (every finding abstained or neutral): no change, and the note says so.
    """
    views = [fs for fs in fact_sheets if fs.domain in VIEW_DOMAINS and took_side(fs)]
    silent = [
        fs.domain.value for fs in fact_sheets if fs.domain in VIEW_DOMAINS and not took_side(fs)
    ]
    notes = [f"{d}: no view (abstained or neutral), does not steer" for d in silent]
    if not views:
        return list(families), notes
    w = sum(fs.confidence for fs in views)
    view = sum(fs.confidence * fs.signal for fs in views) / w
    names = " and ".join(fs.domain.value for fs in views)
    tech = next((fs for fs in fact_sheets if fs.domain == Domain.TECHNICAL), None)
    if tech is not None and took_side(tech) and sign(view) == sign(tech.signal):
        favoured = ["trend", "momentum"]
        why = (
            f"{names} ({view:+.2f}) agree with the technical side ({tech.signal:+.2f}): "
            "a confirmed move, trend-following families first"
        )
    elif tech is not None and took_side(tech) and sign(view) == -sign(tech.signal):
        favoured = ["mean_reversion", "volatility"]
        why = (
            f"{names} ({view:+.2f}) oppose the technical side ({tech.signal:+.2f}): the "
            "move may fade, mean reversion and volatility first"
        )
    elif abs(view) >= 0.3:
        favoured = ["trend"]
        why = f"{names} lean {view:+.2f} with no technical side: trend first"
    else:
        return list(families), [*notes, f"{names} lean {view:+.2f}: too weak to steer"]
    steered = list(dict.fromkeys([f for f in favoured if f in FAMILIES] + list(families)))
    return steered, [*notes, f"{why} ({', '.join(families)} -> {', '.join(steered)})"]
