"""The screen as the rules brain's tuner: a sweep of parameter sets around a parent, the top
ones handed to Backtrader to confirm (``backtest.screen``), every screened set a trial."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from experiments.records import ScreenedTrial, ScreenRecord, append_record
from experiments.runfolder import screen_file
from gate.ledger import TrialLedger
from strategies.family_api import PORTFOLIO_LABEL as PORTFOLIO
from strategies.family_api import whole_universe
from strategies.mutate import neighbourhood
from strategies.spec import StrategySpec
from swarm.context import RunContext
from swarm.state import DevelopState

if TYPE_CHECKING:
    from backtest.screen import Sweep


def screen_workers(executor: str, workers: int | None, cpus: int | None) -> int:
    """The processes a set-by-set sweep (the portfolio screen) may use on this machine: the
    run's ``--workers`` (default: every core), never more than this machine's cores; one with
    ``--executor serial`` (in-process asked) or ``ray`` (a Ray driver's gRPC threads and
    their fork handlers do not go with forking the driver)."""
    if executor in ("serial", "ray"):
        return 1
    here = max(1, cpus or 1)
    return max(1, min(workers or here, here))


def screens(cfg: Any, plugin: Any, parent: tuple[str, StrategySpec] | None) -> bool:
    """Tuning around ``parent`` goes through the screen when it is on (``--screen-size`` > 0)
    and ``parent``'s family plugin says the screen reproduces it; otherwise it tunes by grid
    moves, as before the screen."""
    return cfg.screen_size > 0 and parent is not None and plugin.screens(parent[1])


class ScreenTuner:
    """The rules brain's tuner (``swarm.agents.strategy_dev.Tuner``) through the screen.

    Called with the parent and the slots to fill, it screens ``screen_size`` parameter sets
    around the parent on every symbol x in-sample fold and returns the top ones for Backtrader
    to confirm (``backtest.screen``). Every screened set is a trial: it goes into ``ledger`` (a
    copy of the state's, for the node to return), into one ``screen`` record and, with its
    in-sample return series, into ``screens/iNN.npz``.

    ``scope="portfolio"``: the parent is a portfolio-scope spec (``_screens_portfolio``),
    screened on the universe's window per fold (the portfolio jobs' bars, ``job_bars``) into
    ``screens/iNN-portfolio.npz``; its neighbourhood leaves the parameters its code does not
    read where they are (``inert_params``). ``ledger``: the ledger to add to (an earlier
    sweep's of the same iteration; None: a copy of the state's).
    """

    def __init__(
        self,
        ctx: RunContext,
        state: DevelopState,
        best: tuple[str, StrategySpec] | None,
        *,
        iteration: int,
        route: str,
        scope: str = "symbol",
        ledger: TrialLedger | None = None,
    ) -> None:
        self.ctx, self.state, self.iteration, self.route = ctx, state, iteration, route
        self.parent_id = best[0] if best else None
        self.scope, self.base = scope, ledger
        self.ledger: TrialLedger | None = None
        self.sweep: Sweep | None = None
        self.parent_key: str | None = None
        self.confirmed: list[str] = []  # trial keys handed out, in order
        self.flushed = False

    def _windows(self) -> dict:
        """The Backtrader jobs' bars and folds as screen windows, built once per run."""
        from backtest.screen import portfolio_windows_for, windows_for
        from swarm.nodes.backtest import job_bars

        ctx = self.ctx
        universe = (self.scope, tuple(ctx.symbols))
        windows = ctx.memo.screen_windows
        if universe not in windows:
            if whole_universe(self.scope):  # one job per fold on the whole universe, feeds in order
                frames = job_bars(ctx, PORTFOLIO)
                windows[universe] = portfolio_windows_for(frames, ctx.folds)
            else:
                frames = {s: ctx.insample_bars(s) for s in ctx.symbols}
                windows[universe] = windows_for(frames, ctx.folds)
        return windows[universe]

    def __call__(self, parent: StrategySpec, n: int, seen: set[str]) -> list[StrategySpec]:
        """The best ``n`` screened sets not in ``seen``. One sweep per iteration: a second
        call around the same parent (the portfolio slots, then the rules brain's tuning
        share) takes the next-ranked sets of the same sweep; another parent gets none."""
        if n <= 0 or self.parent_id is None:
            return []
        if self.sweep is None:
            if self.ledger is not None or not self._sweep(parent, seen):
                return []
        elif parent.trial_key() != self.parent_key:
            return []
        picks = [s for s in self.sweep.top(len(self.sweep.sets)) if s.trial_key not in seen][:n]
        self.confirmed += [s.trial_key for s in picks]
        return [s.spec for s in picks]

    def _sweep(self, parent: StrategySpec, seen: set[str]) -> bool:
        from backtest.screen import Unsupported

        ctx, cfg = self.ctx, self.ctx.config
        portfolio = whole_universe(self.scope)
        label = "portfolio screen" if portfolio else "screen"
        try:
            windows = self._windows()  # the Backtrader jobs' bars and folds, built once
        except (Unsupported, ValueError) as exc:  # e.g. no bars in a fold: tune as before
            ctx.progress.stage("screen", f"{label} skipped: {exc}")
            return False
        # A sample of its own: a pure function of the run's seed, the iteration and the round
        # (and, for a portfolio parent, a stream apart from the same iteration's other sweep).
        seed = (cfg.seed, self.iteration, self.state.get("research_round", 1))
        seed = (*seed, 1) if portfolio else seed
        try:
            sweep = self._draw(parent, seen, seed, windows)
        except Unsupported as exc:  # the universe's bars (a price <= 0): tune as before
            ctx.progress.stage("screen", f"{label} skipped: {exc}")
            return False
        base = self.base if self.base is not None else self.state.get("ledger")
        ledger = (base or TrialLedger()).model_copy(deep=True)
        for s in sweep.sets:
            ledger.record(s.trial_key, s.sharpe_per_period, n_obs=s.n_obs)
        self.sweep, self.ledger, self.parent_key = sweep, ledger, parent.trial_key()
        return True

    def _draw(self, parent: StrategySpec, seen: set[str], seed: tuple, windows: dict) -> Sweep:
        """The sweep's sets drawn by the run's sampler (``--sampler``) inside its space
        (``--param-space``) and screened in-sample; raises ``Unsupported`` as the screen does."""
        from backtest.screen import screen_sets, tpe_sweep

        ctx, cfg = self.ctx, self.ctx.config

        def evaluate(specs: list[StrategySpec]) -> Sweep:
            return screen_sets(
                specs,
                windows,
                costs=cfg.costs,
                bars_per_year=ctx.periods_per_year,
                periods_per_year=ctx.periods_per_year,
                min_trades=ctx.criteria.min_trades,
                workers=screen_workers(cfg.executor, cfg.workers, os.cpu_count()),
            )

        space = cfg.param_space
        if cfg.sampler == "tpe":  # drawn in batches, each screened and told to TPE
            return tpe_sweep(
                parent,
                cfg.screen_size,
                seed=seed,
                seen=seen,
                evaluate=evaluate,
                min_trades=ctx.criteria.min_trades,
                space=space,
            )
        return evaluate(neighbourhood(parent, cfg.screen_size, seed=seed, seen=seen, space=space))

    def flush(self) -> None:
        """Write the sweep (``screens/iNN[-portfolio].npz``) and its ``screen`` record, with
        every set the iteration confirmed; nothing when there was no sweep."""
        from backtest.screen import write_batch

        ctx, sweep = self.ctx, self.sweep
        if sweep is None or self.flushed:
            return
        self.flushed = True
        rel = screen_file(self.iteration, self.scope)
        write_batch(ctx.run.path(rel), sweep)
        append_record(
            ctx.run.tracker,
            ScreenRecord(
                run_id=ctx.run.root.name,
                iteration=self.iteration,
                route=self.route,
                parent_id=self.parent_id,
                scope=self.scope,
                symbols=ctx.symbols,
                symbol=PORTFOLIO if whole_universe(self.scope) else None,
                n_sets=len(sweep.sets),
                n_symbols=sweep.n_symbols,
                n_folds=sweep.n_folds,
                min_trades=sweep.min_trades,
                series_file=rel,
                confirmed=list(self.confirmed),
                trials=[
                    ScreenedTrial(
                        trial_key=s.trial_key,
                        parameters=s.spec.parameters,
                        sharpe=s.sharpe,
                        n_trades=s.n_trades,
                        error=s.error,
                    )
                    for s in sweep.top(len(sweep.sets))
                ],
                recorded_at=datetime.now(UTC).isoformat(),
            ),
        )
        ctx.progress.stage(
            "screen",
            f"screened {len(sweep.sets)} {'portfolio ' if whole_universe(self.scope) else ''}sets on "
            f"{sweep.n_symbols} symbols x {sweep.n_folds} "
            f"folds in {sweep.seconds:.1f} s, confirming top {len(self.confirmed)}",
        )
