"""Strategy development, rules brain: which specs to try next, given the gate's route.

Pure and deterministic for a given ``rng``: the graph node does the I/O.
INITIAL / RESEARCH: diverse families, the research's and the directive's first.
TUNE: parameter moves around the best variant so far (directed toward more signals when
the trade floor is what failed). FIX: repair what broke.
REFINE: change the design along the failure analysis' hints.
TUNE and REFINE start with repairs of the analysed best along the criteria it fails
(``repair_proposals``, ``strategies.repair``).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Collection

from gate.contracts import FailureAnalysis, Hint, VariantEvaluation, Veto
from gate.evaluate import MAX_ERROR_RATE, rank_key
from gate.failure import FAR_ATTAINMENT
from strategies.families import initial_specs
from strategies.family_api import Proposal, RepairMoves, Tuner
from strategies.mutate import fix, refine, toward_more_trades, tune
from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.repair import repairs
from strategies.route import Route
from strategies.spec import StrategySpec

# propose's ``add``: a spec, its parent and why, kept when new and a slot is free.
_Add = Callable[[StrategySpec, str | None, str], None]

ALL_FAMILIES = ["momentum", "mean_reversion", "breakout", "trend", "volatility"]


def preferred_order(directive_families: list[str], research_families: list[str]) -> list[str]:
    """The directive's style first, then the research's recommendation, then the rest."""
    ordered = [f for f in directive_families + research_families if f in ALL_FAMILIES]
    return list(dict.fromkeys(ordered + ALL_FAMILIES))


def problem_of(evaluation: VariantEvaluation, min_trades: int) -> str | None:
    """What FIX should repair in one evaluated variant, or None if it is not broken."""
    if Veto.LOOKAHEAD in evaluation.veto_kinds:  # measured, not merely unchecked
        return "lookahead"
    if evaluation.n_jobs and evaluation.n_errors > MAX_ERROR_RATE * evaluation.n_jobs:
        return "exception"
    n_trades = evaluation.metrics.n_trades if evaluation.metrics else 0
    if n_trades == 0:
        return "zero_trades"
    if n_trades < min_trades:
        return "too_few_trades"
    return None


# Routes on which a near miss is pursued along what it missed, before the usual moves.
REPAIR_ROUTES = frozenset({Route.TUNE, Route.REFINE})


def repair_slots(n: int, failure: FailureAnalysis | None) -> int:
    """Repair slots of an iteration of ``n``: half (rounded up) for a near miss, whose failing
    criteria are all within reach (attainment >= ``FAR_ATTAINMENT``), else one: repairs
    reshape an edge, they do not make one, and the rest keep tuning or refining (a repair
    can also lose the edge it was meant to keep)."""
    if failure is None or not failure.failing or n <= 0:
        return 0
    if all(c.attainment >= FAR_ATTAINMENT for c in failure.failing):
        return (n + 1) // 2
    return 1


def repair_proposals(
    *,
    route: Route | str,
    failure: FailureAnalysis | None,
    parent: tuple[str, StrategySpec] | None,
    moves: RepairMoves | None,
    n: int,
    rng: random.Random,
    seen: Collection[str],
    regime_filters: Collection[str] = (),
) -> list[Proposal]:
    """Up to ``n`` repairs of ``parent`` (the variant the failure analysis read, any scope)
    along the categories of the criteria it fails, worst first, on TUNE and REFINE; none
    on other routes, without failing criteria or when none applies. ``moves``: the parent's
    family's repair moves (``FamilyRegistry.repair_moves``; None: not repairable, its own
    proposer revises it). ``why`` says "repair <category>: <what>"."""
    if Route(route) not in REPAIR_ROUTES or failure is None or parent is None or n <= 0:
        return []
    if moves is None:
        return []
    categories = [c.category for c in failure.failing if c.category is not None]
    if not categories:
        return []
    parent_id, spec = parent
    fixed = repairs(
        spec, categories, moves=moves, rng=rng, seen=seen, regime_filters=regime_filters
    )
    return [Proposal(s, parent_id, s.name.split(" | ", 1)[1]) for s in fixed[:n]]


def propose(
    *,
    route: Route | str,
    n: int,
    rng: random.Random,
    seen: set[str],
    families: list[str],
    suggested: dict | None,
    best: tuple[str, StrategySpec] | None,
    last: list[tuple[VariantEvaluation, StrategySpec]],
    failure: FailureAnalysis | None,
    min_trades: int,
    directive_families: list[str] | None = None,
    tuner: Tuner | None = None,
    regime_filters: Collection[str] = (),
    space: ParamSpace = DEFAULT_SPACE,
) -> list[Proposal]:
    """``directive_families``: the families the directive named; they fill at least half of
    the first iteration (later rounds follow the research's order).

    ``tuner``: what fills the slots around the best so far (TUNE's, and the share FIX and
    REFINE keep for tuning); None is ``tune``'s few random grid moves, as before the screen.
    A tuner ranks its sets itself (the screen ranks below the trade floor last), so TUNE's
    directed moves toward more trades are ``tune``'s alone.

    ``regime_filters``: the regime filters the run's data has the index files for; REFINE
    may add them (``strategies.mutate.refine``). ``space``: the user's grid (``--param-space``)
    tuning moves within.
    """
    route = Route(route)
    seen = set(seen)
    out: list[Proposal] = []
    named = list(directive_families or []) if route == Route.INITIAL else []

    def add(spec: StrategySpec, parent: str | None, why: str) -> None:
        key = spec.trial_key()
        if key not in seen and len(out) < n:
            seen.add(key)
            out.append(Proposal(spec, parent, why))

    hints = failure.hints if failure else []
    if route == Route.FIX:
        _fix_proposals(add, last, min_trades, rng=rng, seen=seen)
    elif route == Route.REFINE:
        _refine_proposals(
            add, last, hints, n=n, best=best, rng=rng, seen=seen, regime_filters=regime_filters
        )

    if route == Route.TUNE and best is not None and Hint.TOO_FEW_TRADES in hints and not tuner:
        # A near miss on the trade floor: half the slots move toward more signals.
        best_id, best_spec = best
        for spec in toward_more_trades(best_spec, max(1, n // 2), rng=rng, seen=seen, space=space):
            add(spec, best_id, "tune toward more trades (near miss on the trade floor)")

    if route in (Route.TUNE, Route.FIX, Route.REFINE) and best is not None:
        _tune_around_best(add, out, best, n=n, tuner=tuner, rng=rng, seen=seen, space=space)

    if len(out) < n:  # INITIAL, RESEARCH, or nothing left to mutate: fresh diverse ideas
        _fresh_proposals(
            add, out, n=n, families=families, suggested=suggested, rng=rng, seen=seen, named=named
        )
    return out


def _fix_proposals(add: _Add, last, min_trades: int, *, rng: random.Random, seen: set[str]) -> None:
    """FIX: a repair of each last variant's problem, when an untried repair is left."""
    for ev, spec in last:
        problem = problem_of(ev, min_trades)
        if problem:
            with contextlib.suppress(LookupError):  # no untried repair left for this one
                add(fix(spec, problem, rng=rng, seen=seen), ev.variant_id, f"fix {problem}")


def _refine_proposals(
    add: _Add,
    last: list[tuple[VariantEvaluation, StrategySpec]],
    hints: list,
    *,
    n: int,
    best: tuple[str, StrategySpec] | None,
    rng: random.Random,
    seen: set[str],
    regime_filters: Collection[str],
) -> None:
    """REFINE: a design change on the best of each family, one failure hint each in turn."""
    refine_hints = hints or [Hint.DEEP_DRAWDOWN]
    ranked = sorted(last, key=lambda p: rank_key(p[0]), reverse=True)
    # Refine the best of each family, so the design change is tried on several ideas.
    by_family: dict[str, tuple[VariantEvaluation, StrategySpec]] = {}
    for ev, spec in ranked:
        by_family.setdefault(ev.family, (ev, spec))
    # A third of the slots (from 2 variants on) stay for tuning around the best so far: a
    # design change can lose the edge it was meant to strengthen.
    keep = max(1, n - (n + 1) // 3) if best is not None else n
    for i, (ev, spec) in enumerate(list(by_family.values())[:keep]):
        hint = refine_hints[i % len(refine_hints)]
        with contextlib.suppress(LookupError):  # every design change already tried
            add(
                refine(spec, failure_hint=hint, rng=rng, seen=seen, regime_filters=regime_filters),
                ev.variant_id,
                f"refine: {hint}",
            )


def _tune_around_best(
    add: _Add,
    out: list[Proposal],
    best: tuple[str, StrategySpec],
    *,
    n: int,
    tuner: Tuner | None,
    rng: random.Random,
    seen: set[str],
    space: ParamSpace,
) -> None:
    """The slots left filled around the best so far: the tuner's sets first, then ``tune``'s."""
    best_id, best_spec = best
    if tuner is not None:
        for spec in tuner(best_spec, max(0, n - len(out)), set(seen)):
            add(spec, best_id, "screened around the best so far")
    for spec in tune(best_spec, max(0, n - len(out)), rng=rng, seen=seen, space=space):
        add(spec, best_id, "tune around the best so far")


def _fresh_proposals(
    add: _Add,
    out: list[Proposal],
    *,
    n: int,
    families: list[str],
    suggested: dict | None,
    rng: random.Random,
    seen: set[str],
    named: list[str],
) -> None:
    """Fresh diverse ideas from the templates; when every template was tried, perturbed ones,
    one family at a time."""
    for spec in initial_specs(
        2 * n, preferred_families=families, suggested=suggested, rng=rng, named=named
    ):
        add(spec, None, f"new {spec.family.value} idea")
    if len(out) < n:  # every template already tried: perturb them, one family at a time
        bases = initial_specs(
            n, preferred_families=families, suggested=suggested, rng=rng, named=named
        )
        for _round in range(n):
            before = len(out)
            for spec in bases:
                for tuned in tune(spec, 1, rng=rng, seen=seen):
                    add(tuned, None, f"perturbed {spec.family.value} idea")
            if len(out) == before or len(out) >= n:
                break
