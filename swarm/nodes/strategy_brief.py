"""What the LLM strategy developer reads: the block catalogue and the iteration's brief
(computed facts only: numbers and enums from our own analysis, never third-party text)."""

from __future__ import annotations

from collections.abc import Collection

from strategies.blocks import ENTRIES, EXITS, FILTERS, SIZINGS
from strategies.regime import REGIME_FILTERS


def catalogue_text(regime_filters: Collection[str] = ()) -> str:
    """The block catalogue as the LLM sees it: ids and their parameters with defaults. A
    regime filter is listed only when in ``regime_filters``, those whose index files the
    run has (``strategies.regime.available_filters``)."""
    lines = []
    for kind, blocks in (
        ("entries", ENTRIES),
        ("filters", FILTERS),
        ("exits", EXITS),
        ("sizing", SIZINGS),
    ):
        items = [
            f"{bid}({', '.join(f'{k}={v}' for k, v in b.params.items())})"
            for bid, b in blocks.items()
            if bid not in REGIME_FILTERS or bid in regime_filters
        ]
        lines.append(f"{kind}: " + "; ".join(items))
    return "\n".join(lines)


def brief_text(state, route, best, last, failure, families) -> str:
    """Computed facts only: numbers and enums from our own analysis, never third-party text."""
    synthesis, brief = state.get("synthesis"), state.get("data_brief")
    suggested = brief.suggested.model_dump(mode="json") if brief else {}
    regime, confidence, signal = (
        (synthesis.regime.value, synthesis.confidence, synthesis.signal)
        if synthesis
        else (None,) * 3
    )
    lines = [
        f"regime {regime} (research confidence {confidence}, "
        f"signal {signal}); families in order: {', '.join(families)}",
        "suggested: " + ", ".join(f"{k}={v}" for k, v in suggested.items() if k != "reasoning"),
    ]
    if best:
        lines.append(
            f"best so far: {best[1].family.value} entry={best[1].entry} filters={best[1].filters} "
            f"exits={best[1].exits} parameters={best[1].parameters}"
        )
    for ev, spec in last[:5]:
        m = ev.metrics
        lines.append(
            f"last iteration {spec.family.value}/{spec.entry}: score {ev.score:.3f}, sharpe "
            f"{None if m is None else m.sharpe}, max_dd {None if m is None else m.max_drawdown_pct}, "
            f"trades {None if m is None else m.n_trades}, vetoes {ev.vetoes}"
        )
    if failure:
        lines.append(
            f"failure analysis: {failure.failure_type.value}: {failure.root_cause}; "
            f"actions {failure.actions}"
        )
    lines.append(
        f"route {route}: TUNE = parameters near the best; FIX = repair errors/zero trades; "
        "REFINE = change the design (filters, stops, sizing); INITIAL/RESEARCH = diverse ideas"
    )
    return "\n".join(lines)
