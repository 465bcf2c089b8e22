"""What this run's gate has taught the research so far.

A RESEARCH round re-reads the same data with the same subagents, so on its own it would
recommend the same families again. The difference has to come from the gate's verdicts in
this run (memory holds other runs, and may be off): families not yet tried come first,
then the tried ones from the closest to passing to the farthest. Pure functions; the leader
applies them and records the notes.
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
    best_score: float
    best_variant: str
    best_iteration: int


def run_outcomes(decisions: Sequence[Mapping[str, Any] | GateDecision]) -> dict[str, FamilyTrack]:
    """Per family: variants evaluated, passes and the best fuzzy score, over every gate
    decision of the run (a variant evaluated twice counts once)."""
    best: dict[str, tuple[float, str, int]] = {}
    variants: dict[str, set[str]] = {}
    passed: dict[str, set[str]] = {}
    for raw in decisions:
        decision = raw if isinstance(raw, GateDecision) else GateDecision.model_validate(raw)
        for ev in decision.evaluations:
            variants.setdefault(ev.family, set()).add(ev.variant_id)
            if ev.passed:
                passed.setdefault(ev.family, set()).add(ev.variant_id)
            current = best.get(ev.family)
            if current is None or ev.score > current[0]:
                best[ev.family] = (ev.score, ev.variant_id, decision.iteration)
    return {
        fam: FamilyTrack(
            family=fam,
            n_variants=len(variants[fam]),
            n_passed=len(passed.get(fam, ())),
            best_score=score,
            best_variant=vid,
            best_iteration=it,
        )
        for fam, (score, vid, it) in best.items()
    }


def rerank(
    families: Sequence[str], tracks: Mapping[str, FamilyTrack]
) -> tuple[list[str], list[str]]:
    """(families reordered, one note per tried family).

    Untried families keep the research's order and come first: the run has learnt nothing
    against them. Tried ones follow, a family with a pass first, then by best score (ties
    keep the research's order).
    """
    position = {f: i for i, f in enumerate(families)}
    untried = [f for f in families if f not in tracks]
    tried = sorted(
        (f for f in families if f in tracks),
        key=lambda f: (-tracks[f].n_passed, -tracks[f].best_score, position[f]),
    )
    notes = [
        f"{f}: {t.n_variants} variant(s) tried in this run, {t.n_passed} passed, best score "
        f"{t.best_score:.2f} ({t.best_variant}, iteration {t.best_iteration})"
        for f in tried
        for t in (tracks[f],)
    ]
    if untried and tried:
        notes.append(f"not yet tried in this run, so first: {', '.join(untried)}")
    return untried + tried, notes
