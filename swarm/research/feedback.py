"""What this run's gate has taught the research so far.

A RESEARCH round re-reads the same data with the same subagents, so on its own it would
recommend the same families and starting parameters again. The difference has to come from
the gate's verdicts in this run (memory holds other runs, and may be off): families not yet
tried come first, then the tried ones from the closest to passing to the farthest
(``rerank``, applied by the leader), and the data brief's starting parameters move the way
the last failure points (``revise_suggestion``, applied by the data extractor). Pure
functions; the nodes apply them and record the notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.contracts import GateDecision


@dataclass(frozen=True)
class FamilyTrack:
    """One family's record in this run."""

    family: str
    n_variants: int
    n_passed: int
    best_score: float  # the fuzzy score of the family's best
    best_variant: str
    best_iteration: int
    best_progress: float = 0.0  # its graded progress (gate.progress); 0 in old decisions


def run_outcomes(decisions: Sequence[Mapping[str, Any] | GateDecision]) -> dict[str, FamilyTrack]:
    """Per family: variants evaluated, passes and the best variant (by graded progress, then
    fuzzy score: the floored fuzzy score alone ties most of a struggling search), over every
    gate decision of the run (a variant evaluated twice counts once)."""
    best: dict[str, tuple[float, float, str, int]] = {}
    variants: dict[str, set[str]] = {}
    passed: dict[str, set[str]] = {}
    for raw in decisions:
        decision = raw if isinstance(raw, GateDecision) else GateDecision.model_validate(raw)
        for ev in decision.evaluations:
            variants.setdefault(ev.family, set()).add(ev.variant_id)
            if ev.passed:
                passed.setdefault(ev.family, set()).add(ev.variant_id)
            current = best.get(ev.family)
            if current is None or (ev.progress, ev.score) > current[:2]:
                best[ev.family] = (ev.progress, ev.score, ev.variant_id, decision.iteration)
    return {
        fam: FamilyTrack(
            family=fam,
            n_variants=len(variants[fam]),
            n_passed=len(passed.get(fam, ())),
            best_score=score,
            best_variant=vid,
            best_iteration=it,
            best_progress=progress,
        )
        for fam, (progress, score, vid, it) in best.items()
    }


def rerank(
    families: Sequence[str], tracks: Mapping[str, FamilyTrack]
) -> tuple[list[str], list[str]]:
    """(families reordered, one note per tried family).

    Untried families keep the research's order and come first: the run has learnt nothing
    against them. Tried ones follow, a family with a pass first, then by its best's graded
    progress, then its fuzzy score (ties keep the research's order).
    """
    position = {f: i for i, f in enumerate(families)}
    untried = [f for f in families if f not in tracks]
    tried = sorted(
        (f for f in families if f in tracks),
        key=lambda f: (
            -tracks[f].n_passed,
            -tracks[f].best_progress,
            -tracks[f].best_score,
            position[f],
        ),
    )
    notes = [
        f"{f}: {t.n_variants} variant(s) tried in this run, {t.n_passed} passed, best score "
        f"{t.best_score:.2f}, progress {t.best_progress:.2f} ({t.best_variant}, iteration {t.best_iteration})"
        for f in tried
        for t in (tracks[f],)
    ]
    if untried and tried:
        notes.append(f"not yet tried in this run, so first: {', '.join(untried)}")
    return untried + tried, notes


# What a failure says about the horizon and the risk of the suggested starting parameters:
# (lookback factor, max-hold factor, stop factor, why). First matching hint wins.
_HINT_REVISIONS: tuple[tuple[str, float, float, float, str], ...] = (
    ("zero_trades", 0.6, 1.0, 1.0, "no trades: a shorter lookback lets signals fire"),
    ("too_few_trades", 0.7, 1.0, 1.0, "too few trades: a shorter lookback, more signals"),
    ("cost_drag", 1.5, 1.5, 1.0, "costs eat the edge: a longer horizon, fewer and longer trades"),
    ("deep_drawdown", 1.0, 1.0, 0.75, "drawdowns too deep: a tighter stop"),
    ("fold_collapse", 1.5, 1.0, 1.0, "the edge collapses in some folds: a slower, steadier signal"),
)
# No specific defect (no edge / not significant): look at another horizon each round.
_EXPLORE = (2.0, 0.5)


def revise_suggestion(
    suggested: Mapping[str, Any], hints: Sequence[str], research_round: int
) -> tuple[dict[str, Any], str | None]:
    """The data brief's starting parameters revised by the run's last failure: (revised,
    note), or the same values and None on the first round.

    The strategy developer seeds a RESEARCH round's fresh ideas with these, so a new round
    tries a different horizon or risk setting instead of the same parameters again.
    """
    out = dict(suggested)
    if research_round < 2:
        return out, None
    names = {h.removeprefix("hint:") for h in hints}
    rule = next((r for r in _HINT_REVISIONS if r[0] in names), None)
    if rule is not None:
        _, look, hold, stop, why = rule
    else:
        look = _EXPLORE[(research_round - 2) % len(_EXPLORE)]
        hold, stop = 1.0, 1.0
        why = f"no single defect: try another horizon (lookback x{look:g})"
    before = {k: out.get(k) for k in ("lookback", "max_hold_bars", "stop_loss_pct")}
    if isinstance(out.get("lookback"), int | float):
        out["lookback"] = max(5, int(round(out["lookback"] * look)))
    if isinstance(out.get("max_hold_bars"), int | float):
        out["max_hold_bars"] = max(2, int(round(out["max_hold_bars"] * hold)))
    if isinstance(out.get("stop_loss_pct"), int | float):
        out["stop_loss_pct"] = round(out["stop_loss_pct"] * stop, 2)
        if isinstance(out.get("take_profit_pct"), int | float) and stop != 1.0:
            out["take_profit_pct"] = round(out["take_profit_pct"] * stop, 2)
    changes = ", ".join(
        f"{k} {before[k]:g}->{out[k]:g}"
        for k in before
        if isinstance(before[k], int | float) and out.get(k) != before[k]
    )
    note = f"round {research_round}, after the gate: {why}" + (f" ({changes})" if changes else "")
    out["reasoning"] = f"{str(out.get('reasoning', '')).rstrip('.')}; revised in {note}"
    return out, note
