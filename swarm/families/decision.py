"""The decision pipeline as a family: the analyst -> debate -> trader -> risk desk decides on
every rebalance date, and the variant's code replays those decisions
(``swarm.analyze.family``). Registered here, above ``strategies/``: it needs the desk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies.decision_family import FAMILY, RULES_INERT_PARAMS, propose_decision_specs
from strategies.families import DECISION_PARAMS, reconcile, tunable
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.spec import StrategySpec
from swarm.analyze.family import decision_slots, holdout_variant, pipeline_code
from swarm.families import REGISTRY


class DecisionPipeline:
    name = "decision_pipeline"
    kinds = (FAMILY.value,)
    scope: Scope = "symbol"
    self_proposing = True
    priority = 10
    repairable = False  # its proposer revises it: no block edit makes new decisions

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """Slots for the pipeline when the run names it (none otherwise)."""
        return decision_slots(list(families), n) if n > 0 else 0

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Around its own best, or fresh; without an LLM (the rules brain) no proposal moves
        ``debate_rounds``: it would change no decision."""
        if n <= 0:
            return []
        frozen = RULES_INERT_PARAMS if ctx.run is None or ctx.run.llm is None else ()
        return propose_decision_specs(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            frozen=frozen,
            space=ctx.space,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with its parameters made consistent."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The pipeline's replayed decisions as code; None when the LLM budget ran out."""
        return pipeline_code(run, spec)  # None: the LLM budget ran out (the gate stops the run)

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The variant as the holdout runs it: its code regenerated with the holdout's decisions."""
        return holdout_variant(run, variant)

    def grid_parameters(self, kind: str) -> frozenset[str]:
        """What ``--param-space`` may narrow: the pipeline's tunable parameters."""
        return tunable(DECISION_PARAMS)

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the pipeline's decisions are not a parameter sweep."""
        return False


REGISTRY.register(DecisionPipeline())
