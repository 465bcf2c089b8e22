"""Strategy development node: proposals -> Backtrader code -> static validation."""

from __future__ import annotations

import random
from collections.abc import Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from experiments.records import ScreenedTrial, ScreenRecord, VariantRejectedRecord, append_record
from experiments.runfolder import code_file, screen_file
from gate.contracts import FailureAnalysis, VariantEvaluation
from gate.evaluate import rank_key
from gate.ledger import TrialLedger
from strategies.blocks import ENTRIES, EXITS, FILTERS, SIZINGS
from strategies.codegen import code_sha256, make_variant
from strategies.decision_family import is_decision_spec
from strategies.mutate import neighbourhood
from strategies.pairs import PairChoice, best_pair
from strategies.portfolio import LABEL as PORTFOLIO
from strategies.portfolio import SCOPE, is_portfolio_spec, portfolio_slots, propose_portfolio_specs
from strategies.regime import REGIME_FILTERS, available_filters
from strategies.spec import StrategySpec, StrategyVariant
from strategies.validate import validate_code
from swarm.agents.strategy_dev import (
    Proposal,
    preferred_order,
    propose,
    repair_proposals,
    repair_slots,
)
from swarm.analyze.family import decision_proposals, pipeline_code
from swarm.context import RunContext
from swarm.llm.brains import llm_strategy_specs
from swarm.nodes.llm_log import llm_logger
from swarm.regime_data import available_indices
from swarm.state import RESET, DevelopState, StoredVariant

if TYPE_CHECKING:
    from backtest.sweep import Sweep


def index_entry(variant: StrategyVariant, class_name: str | None) -> StoredVariant:
    """A variant as ``all_variants`` keeps it: everything but the code, plus where the code is."""
    fields = {k: v for k, v in variant if k != "code"}
    return StoredVariant(**fields, code_file=code_file(variant.variant_id), class_name=class_name)


def with_code(ctx: RunContext, entry: StoredVariant) -> dict[str, Any]:
    """An ``all_variants`` entry as ``variants.json`` holds it (JSON), with its
    (sha256-verified) source put back."""
    code = ctx.run.read_code(entry.variant_id, entry.code_sha256)
    return entry.model_dump(mode="json") | {"code": code}


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


def _brief(state, route, best, last, failure, families) -> str:
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
        lines.append(f"best so far: {best[1].family.value} entry={best[1].entry} filters={best[1].filters} "
                     f"exits={best[1].exits} parameters={best[1].parameters}")  # fmt: skip
    for ev, spec in last[:5]:
        m = ev.metrics
        lines.append(
            f"last iteration {spec.family.value}/{spec.entry}: score {ev.score:.3f}, sharpe "
            f"{None if m is None else m.sharpe}, max_dd {None if m is None else m.max_drawdown_pct}, "
            f"trades {None if m is None else m.n_trades}, vetoes {ev.vetoes}"
        )
    if failure:
        lines.append(f"failure analysis: {failure.failure_type.value}: {failure.root_cause}; "
                     f"actions {failure.actions}")  # fmt: skip
    lines.append(f"route {route}: TUNE = parameters near the best; FIX = repair errors/zero trades; "
                 "REFINE = change the design (filters, stops, sizing); INITIAL/RESEARCH = diverse ideas")  # fmt: skip
    return "\n".join(lines)


def _pair(ctx: RunContext) -> PairChoice | None:
    """The universe's most cointegrated pair on in-sample closes (the holdout stays sealed),
    found once per run."""
    if not ctx.memo.pair_chosen:
        ctx.memo.pair = best_pair({s: ctx.insample_bars(s)["close"] for s in ctx.symbols})
        ctx.memo.pair_chosen = True
    return ctx.memo.pair


def _own_proposer(spec: StrategySpec) -> bool:
    """Specs the block mutators never touch: an LLM's own code, the pipeline's, a portfolio's."""
    return spec.is_custom or is_decision_spec(spec) or is_portfolio_spec(spec)


def _own_best(
    best: tuple[str, StrategySpec] | None, last: list[tuple[VariantEvaluation, StrategySpec]]
) -> tuple[str, StrategySpec] | None:
    """The portfolio families' best: the run's best if it is one, else the best-scored
    portfolio variant of the last iteration."""
    if best is not None and is_portfolio_spec(best[1]):
        return best
    mine = [(ev, spec) for ev, spec in last if is_portfolio_spec(spec)]
    if not mine:
        return None
    ev, spec = max(mine, key=lambda p: rank_key(p[0]))
    return ev.variant_id, spec


def _repair_parent(
    failure: FailureAnalysis | None,
    all_variants: dict[str, StoredVariant],
    best: tuple[str, StrategySpec] | None,
) -> tuple[str, StrategySpec] | None:
    """The variant whose failing criteria the failure analysis lists (the last iteration's
    best), else the run's best."""
    vid = failure.best_variant_id if failure is not None else None
    if vid is not None and vid in all_variants:
        return vid, all_variants[vid].spec
    return best


def _screens(cfg: Any, best: tuple[str, StrategySpec] | None) -> bool:
    """Tuning goes through the screen when it is on and the rules brain's parent is a
    single-symbol catalogue spec the screen reproduces; otherwise tuning is unchanged."""
    from backtest.sweep import supported

    return cfg.screen_size > 0 and best is not None and supported(best[1])


def _screens_portfolio(cfg: Any, own_best: tuple[str, StrategySpec] | None) -> bool:
    """The portfolio families' tuning goes through the portfolio screen when the screen is
    on and their parent is a spec it reproduces (cross-sectional momentum or rotation, no
    regime filter); otherwise they tune as before (``strategies.portfolio``)."""
    from backtest.sweep import supported_portfolio

    return cfg.screen_size > 0 and own_best is not None and supported_portfolio(own_best[1])


class ScreenTuner:
    """The rules brain's tuner (``swarm.agents.strategy_dev.Tuner``) through the screen.

    Called with the parent and the slots to fill, it screens ``screen_size`` parameter sets
    around the parent on every symbol x in-sample fold and returns the top ones for Backtrader
    to confirm (``backtest.sweep``). Every screened set is a trial: it goes into ``ledger`` (a
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
        from backtest.sweep import portfolio_windows_for, windows_for
        from swarm.nodes.backtest import job_bars

        ctx = self.ctx
        universe = (self.scope, tuple(ctx.symbols))
        windows = ctx.memo.screen_windows
        if universe not in windows:
            if self.scope == SCOPE:  # one job per fold on the whole universe, feeds in order
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
        from backtest.screen_blocks import Unsupported
        from backtest.sweep import screen_sets

        ctx, cfg = self.ctx, self.ctx.config
        portfolio = self.scope == SCOPE
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
        specs = neighbourhood(parent, cfg.screen_size, seed=seed, seen=seen)
        try:
            sweep = screen_sets(
                specs, windows, costs=cfg.costs,
                bars_per_year=ctx.periods_per_year, periods_per_year=ctx.periods_per_year,
                min_trades=ctx.criteria.min_trades,
            )  # fmt: skip
        except Unsupported as exc:  # the universe's bars (a price <= 0): tune as before
            ctx.progress.stage("screen", f"{label} skipped: {exc}")
            return False
        base = self.base if self.base is not None else self.state.get("ledger")
        ledger = (base or TrialLedger()).model_copy(deep=True)
        for s in sweep.sets:
            ledger.record(s.trial_key, s.sharpe_per_period, n_obs=s.n_obs)
        self.sweep, self.ledger, self.parent_key = sweep, ledger, parent.trial_key()
        return True

    def flush(self) -> None:
        """Write the sweep (``screens/iNN[-portfolio].npz``) and its ``screen`` record, with
        every set the iteration confirmed; nothing when there was no sweep."""
        from backtest.sweep import write_batch

        ctx, sweep = self.ctx, self.sweep
        if sweep is None or self.flushed:
            return
        self.flushed = True
        rel = screen_file(self.iteration, self.scope)
        write_batch(ctx.run.path(rel), sweep)
        append_record(
            ctx.run.tracker,
            ScreenRecord(
                run_id=ctx.run.root.name, iteration=self.iteration, route=self.route,
                parent_id=self.parent_id, scope=self.scope, symbols=ctx.symbols,
                symbol=PORTFOLIO if self.scope == SCOPE else None, n_sets=len(sweep.sets),
                n_symbols=sweep.n_symbols, n_folds=sweep.n_folds, min_trades=sweep.min_trades,
                series_file=rel, confirmed=list(self.confirmed),
                trials=[
                    ScreenedTrial(trial_key=s.trial_key, parameters=s.spec.parameters,
                                  sharpe=s.sharpe, n_trades=s.n_trades, error=s.error)
                    for s in sweep.top(len(sweep.sets))
                ],
                recorded_at=datetime.now(UTC).isoformat(),
            ),
        )  # fmt: skip
        ctx.progress.stage(
            "screen",
            f"screened {len(sweep.sets)} {'portfolio ' if self.scope == SCOPE else ''}sets on "
            f"{sweep.n_symbols} symbols x {sweep.n_folds} "
            f"folds in {sweep.seconds:.1f} s, confirming top {len(self.confirmed)}",
        )


def strategy_dev(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    cfg = ctx.config
    iteration = state.get("iteration", 1)
    route = state.get("route", "INITIAL")
    all_variants = dict(state.get("all_variants", {}))
    seen = {v.spec.trial_key() for v in all_variants.values()}

    synthesis, brief = state.get("synthesis"), state.get("data_brief")
    families = preferred_order(
        cfg.preferred_families, synthesis.recommended_families if synthesis else []
    )
    suggested = brief.suggested.model_dump(mode="json") if brief else None
    best = None
    if state.get("best"):
        best_id = state["best"].variant_id
        best = (best_id, all_variants[best_id].spec)
    last = [(e, all_variants[e.variant_id].spec) for e in state.get("evaluations", [])]
    # The rules brain mutates catalogue specs only; an LLM's own code is revised by the LLM.
    # Neither do they mutate the decision pipeline's specs: that family proposes its own.
    # Nor the portfolio families' (strategies.portfolio proposes around its own best).
    rules_best = best if best and not _own_proposer(best[1]) else None
    rules_last = [(ev, s) for ev, s in last if not _own_proposer(s)]
    failure = state.get("failure")
    # A distinct, reproducible stream per (seed, iteration, research round).
    rng = random.Random(cfg.seed * 1_000_003 + iteration * 101 + state.get("research_round", 1))
    regime_filters = available_filters(available_indices(ctx))  # those the run's data allows

    # A near miss is pursued along what it missed: TUNE and REFINE start with the analysed
    # best's repairs along its failing criteria (any scope); the shares below split the rest.
    repaired = repair_proposals(
        route=route, failure=failure, parent=_repair_parent(failure, all_variants, best),
        n=repair_slots(cfg.variants, failure), rng=rng, seen=seen, regime_filters=regime_filters,
    )  # fmt: skip
    seen = seen | {p.spec.trial_key() for p in repaired}
    budget = cfg.variants - len(repaired)
    # The decision pipeline's share of the slots when the run names it (swarm.analyze.family).
    pipeline = [Proposal(p.spec, p.parent_id, p.why) for p in decision_proposals(
        cfg.families, budget, route=route, rng=rng, seen=seen, best=best, last=last,
        llm=ctx.llm)] if budget > 0 else []  # fmt: skip
    seen = seen | {p.spec.trial_key() for p in pipeline}
    # The portfolio families' share when the run names them and the universe has 2+ symbols.
    n_portfolio = portfolio_slots(cfg.families, budget - len(pipeline), len(ctx.symbols))
    own_best = _own_best(best, last)
    # Their tuning through the portfolio screen when it reproduces their parent (and the rules
    # brain's too when that parent is the run's best: below).
    pscreen = ScreenTuner(ctx, state, own_best, iteration=iteration, route=route,
                          scope=SCOPE) if _screens_portfolio(cfg, own_best) else None  # fmt: skip
    portfolio = [Proposal(p.spec, p.parent_id, p.why) for p in propose_portfolio_specs(
        families=cfg.families, route=route, rng=rng, seen=seen, best=own_best,
        n=n_portfolio, pair=_pair(ctx) if n_portfolio else None, tuner=pscreen,
    )]  # fmt: skip
    seen = seen | {p.spec.trial_key() for p in portfolio}
    pipeline += portfolio
    n_blocks = budget - len(pipeline)

    custom_code: dict[str, str] = {}
    proposals: list[Proposal] = []
    if ctx.llm is not None and not ctx.llm.exhausted and n_blocks > 0:
        parent = best[0] if best and route in ("TUNE", "FIX", "REFINE") else None
        for spec, code, why in llm_strategy_specs(
            ctx.llm, n=n_blocks, route=route,
            brief=_brief(state, route, best, last, failure, families),
            catalogue=catalogue_text(regime_filters), seen=seen,
            untrusted=[i.headline for i in ctx.news_items], log=llm_logger(ctx, iteration=iteration, route=route),
        ):  # fmt: skip
            if code is not None:
                custom_code[spec.trial_key()] = code
            proposals.append(Proposal(spec, parent, why))
            seen = seen | {spec.trial_key()}
    # TUNE through the screen: the slots around the best so far (backtest.sweep). When the
    # run's best is a portfolio spec the portfolio screen reproduces, the rules brain's tuning
    # share goes through that screen around it (the next-ranked sets of the same sweep);
    # without the screen it tunes around the best catalogue spec, as before.
    tuner_best, screen = rules_best, None
    if pscreen is not None and best is not None and is_portfolio_spec(best[1]):
        tuner_best, screen = best, pscreen
    elif _screens(cfg, rules_best):
        swept = pscreen.ledger if pscreen is not None else None  # the portfolio sweep's trials
        screen = ScreenTuner(ctx, state, rules_best, iteration=iteration, route=route,
                             ledger=swept)  # fmt: skip
    proposals += propose(
        route=route, n=n_blocks - len(proposals), rng=rng, seen=seen, families=families,
        suggested=suggested, best=tuner_best, last=rules_last, failure=failure,
        min_trades=ctx.criteria.min_trades, directive_families=cfg.preferred_families,
        tuner=screen, regime_filters=regime_filters,
    ) if len(proposals) < n_blocks else []  # fmt: skip
    for tuner in (pscreen, screen):  # the sweeps' series and records, once each
        if tuner is not None:
            tuner.flush()
    proposals = repaired + pipeline + proposals

    variants: list[StrategyVariant] = []
    rejected = 0
    for k, prop in enumerate(proposals, start=1):
        spec: StrategySpec = prop.spec
        variant_id = f"i{iteration:02d}-v{k:02d}-{spec.family.value}-{spec.trial_key()[:6]}"
        code = custom_code.get(spec.trial_key())
        if code is None and is_decision_spec(spec):
            code = pipeline_code(ctx, spec)  # the pipeline's decisions, embedded
            if code is None:  # the LLM budget ran out: the gate's budget stop ends the run
                continue
        if code is not None:  # the LLM's own class: already validated, recorded as written
            variant = StrategyVariant(
                variant_id=variant_id, parent_id=prop.parent_id, iteration=iteration, route=route,
                spec=spec, code=code, code_sha256=code_sha256(code),
            )  # fmt: skip
        else:
            variant = make_variant(
                spec,
                variant_id=variant_id,
                parent_id=prop.parent_id,
                iteration=iteration,
                route=route,
                bars_per_year=ctx.periods_per_year,
            )
        ctx.run.write_text(code_file(variant_id), variant.code)
        report = validate_code(variant.code)
        # Every variant ever built stays in the state for lineage, without its source (which
        # is in strategies/<id>.py): the state is checkpointed at every super-step.
        all_variants[variant_id] = index_entry(variant, report.class_name)
        if not report.ok:
            rejected += 1
            append_record(
                ctx.run.tracker,
                VariantRejectedRecord(
                    run_id=ctx.run.root.name, iteration=iteration, route=route,
                    variant_id=variant_id, parent_id=prop.parent_id,
                    code_sha256=variant.code_sha256, errors=report.errors, symbols=ctx.symbols,
                    recorded_at=datetime.now(UTC).isoformat(),
                ),
            )  # fmt: skip
            continue
        variants.append(variant)
    jobs = sum(1 if v.spec.scope == SCOPE else len(ctx.symbols) for v in variants)
    ctx.progress.start_batch(jobs * len(ctx.folds))
    ctx.progress.stage(
        "strategy",
        f"iteration {iteration}/{cfg.limits.max_iterations} route {route}: "
        f"{len(variants)} variants ({', '.join(v.spec.name for v in variants)})"
        + (f", {rejected} rejected by validation" if rejected else ""),
    )
    # The last sweep's ledger holds every sweep's trials (it started from the earlier one's).
    ledgers = [t.ledger for t in (pscreen, screen) if t is not None and t.ledger is not None]
    return {"variants": variants, "all_variants": all_variants, "results": RESET} | (
        {"ledger": ledgers[-1]} if ledgers else {}
    )
