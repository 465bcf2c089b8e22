"""The block families (momentum, mean reversion, breakout, trend, volatility): specs assembled
from the block catalogue (``strategies.blocks``), proposed by the rules brain
(``swarm.agents.strategy_dev.propose``) and the LLM. The catch-all plugin: it takes the slots
the self-proposing families leave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies.codegen import render
from strategies.families import block_grid_parameters, reconcile
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.repair import block_moves
from strategies.spec import Family, StrategySpec
from swarm.agents.strategy_dev import propose
from swarm.families import REGISTRY


class BlockFamilies:
    name = "blocks"
    kinds = tuple(f.value for f in Family)
    scope: Scope = "symbol"
    self_proposing = False
    repairable = True
    repair_moves = staticmethod(block_moves)

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """Block families take every slot left."""
        return max(0, n)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """The rules brain on ``ctx.extra``'s brief (the block order, the research's suggested
        parameters, the trade floor, the regime filters the data allows); ``ctx.own_best`` is
        its tuning parent and ``ctx.last`` its own last iteration."""
        x = ctx.extra
        return propose(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            families=x["order"],
            suggested=x.get("suggested"),
            best=ctx.own_best,
            last=ctx.last,
            failure=ctx.failure,
            min_trades=x["min_trades"],
            directive_families=x.get("directive_families", []),
            tuner=ctx.tuner,
            regime_filters=x.get("regime_filters", ()),
            space=ctx.space,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with its parameters made consistent (strategies.families.reconcile)."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The spec rendered as Backtrader code."""
        return render(spec, bars_per_year=run.periods_per_year)

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The variant as it is: a block strategy runs on the holdout unchanged."""
        return variant

    def grid_parameters(self, kind: str) -> frozenset[str]:
        """What ``--param-space`` may narrow for ``kind``: its blocks' tunable parameters."""
        return block_grid_parameters(kind)

    def screens(self, spec: StrategySpec) -> bool:
        """Whether the screen can sweep the spec's parameters."""
        from backtest.screen import supported

        return supported(spec)


REGISTRY.register(BlockFamilies())
