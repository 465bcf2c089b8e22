"""The portfolio families (cross-sectional momentum, rotation, pairs, low volatility): one
strategy over the whole universe, run once per fold (``strategies.portfolio``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies.codegen import render
from strategies.families import portfolio_grid_parameters, reconcile_portfolio
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.pairs import PairChoice, best_pair
from strategies.portfolio import portfolio_slots, propose_portfolio_specs
from strategies.repair import portfolio_moves
from strategies.spec import PortfolioFamily, StrategySpec
from swarm.families import REGISTRY


def universe_pair(run: Any) -> PairChoice | None:
    """The universe's most cointegrated pair on in-sample closes (the holdout stays sealed),
    found once per run."""
    if not run.memo.pair_chosen:
        run.memo.pair = best_pair({s: run.insample_bars(s)["close"] for s in run.symbols})
        run.memo.pair_chosen = True
    return run.memo.pair


class PortfolioFamilies:
    name = "portfolio"
    kinds = tuple(f.value for f in PortfolioFamily)
    scope: Scope = "portfolio"
    self_proposing = True
    priority = 20
    repairable = True
    repair_moves = staticmethod(portfolio_moves)

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """Slots for the portfolio families the run names, given the universe's size."""
        return portfolio_slots(list(families), n, n_symbols)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Portfolio specs: new ones, or tuned around the family's best so far."""
        return propose_portfolio_specs(
            families=ctx.families,
            route=ctx.route,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            n=n,
            pair=universe_pair(ctx.run) if n else None,
            space=ctx.space,
            tuner=ctx.tuner,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with its portfolio parameters made consistent."""
        return reconcile_portfolio(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The spec rendered as Backtrader code over every symbol."""
        return render(spec, bars_per_year=run.periods_per_year)

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The variant as it is: a portfolio strategy runs on the holdout unchanged."""
        return variant

    def grid_parameters(self, kind: str) -> frozenset[str]:
        """What ``--param-space`` may narrow for ``kind``: its tunable portfolio parameters."""
        return portfolio_grid_parameters(kind)

    def screens(self, spec: StrategySpec) -> bool:
        """Whether the screen can sweep the portfolio spec's parameters."""
        from backtest.screen import supported_portfolio

        return supported_portfolio(spec)


REGISTRY.register(PortfolioFamilies())
