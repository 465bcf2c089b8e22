"""Research -> strategy: the alt-data families a research study supports get a slot.

``swarm.research.alt_studies`` measures in-sample whether the edge an alt-data family trades
was there (the drift after surprises, the value/quality rank IC); the leader lists the
supported ones in ``ResearchSynthesis.proposed_families``. In a run that named no family
(neither ``--families`` nor the directive), each gets one slot an iteration, after the named
families' share and before the block families', as long as one slot is left for those. The
family's own input check (``preflight``) runs first: one whose data are missing is skipped,
with a warning, never a failed run.
"""

from __future__ import annotations

from typing import Any

from gate.evaluate import rank_key
from strategies.family_api import (
    FamilyRegistry,
    Proposal,
    ProposalContext,
    own_best,
    whole_universe,
)
from swarm.errors import UserInputError

SLOTS_EACH = 1
KEEP_FOR_BLOCKS = 1


def research_proposals(
    reg: FamilyRegistry, ctx: Any, pctx: ProposalContext, left: int, proposed: list[str]
) -> list[Proposal]:
    """One proposal for each family in ``proposed`` the run can trade, while ``left`` slots
    keep ``KEEP_FOR_BLOCKS`` for the block families; none when the run named families."""
    if ctx.config.families or not proposed:
        return []
    out: list[Proposal] = []
    for kind in proposed:
        if left - len(out) - SLOTS_EACH < KEEP_FOR_BLOCKS:
            break
        plugin = _plugin(reg, kind)
        if plugin is None or (whole_universe(plugin.scope) and pctx.n_symbols < 2):
            continue
        try:
            check = getattr(plugin, "preflight", None)
            if check is not None:
                check(ctx.config)
        except UserInputError as exc:
            ctx.progress.warn(f"research proposed {kind}, but it cannot run: {exc}")
            continue
        parent = own_best(reg, plugin, pctx.best, pctx.last, rank_key)
        props = plugin.propose(pctx.with_(own_best=parent, tuner=None), SLOTS_EACH)
        props = [Proposal(p.spec, p.parent_id, f"research: {p.why}") for p in props]
        pctx.seen = pctx.seen | {p.spec.trial_key() for p in props}
        out += props
    return out


def _plugin(reg: FamilyRegistry, kind: str) -> Any:
    """The self-proposing plugin that owns ``kind``, or None."""
    try:
        plugin = reg.for_kind(kind)
    except KeyError:
        return None
    return plugin if plugin.self_proposing else None
