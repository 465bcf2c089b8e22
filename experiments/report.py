"""The run's markdown report: what was decided, on what evidence, with which caveats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backtest.contracts import Metrics
from experiments.records import BenchmarkInfo, DataSummary, Figures, VariantEntry, Verdict
from experiments.scorecard import (
    TRADE_LABELS,
    CriterionRow,
    concentration_line,
    criteria_rows,
    holdout_line,
    other_vetoes,
    scorecard_table,
    trades_kind,
    verdict_line,
)
from gate.alpha import AlphaStats, spa_look_factor
from gate.contracts import Criteria, GateDecision, VariantEvaluation
from gate.cpcv import CpcvResult, cpcv_summary
from gate.criteria import criteria_sources
from gate.effective import CORRELATION_DISTANCE
from strategies.taxonomy import within_directive

if TYPE_CHECKING:  # types only: experiments is imported by swarm, never the other way
    from swarm.config import RunConfig
    from swarm.research.models import ResearchSynthesis

# The benchmark of a run recorded before the benchmark gate.
BUY_AND_HOLD = BenchmarkInfo(name="buy-and-hold", description="buy & hold")


def _f(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, int | float):
        return f"{x:.{nd}f}"
    return str(x)


def _metrics_row(label: str, m: Metrics | None) -> str:
    if m is None:
        return f"| {label} | – | – | – | – | – | – | – | – | – | – |"
    return (
        f"| {label} | {_f(m.sharpe)} | {_f(m.sortino)} | {_f(m.cagr_pct)} | "
        f"{_f(m.max_drawdown_pct)} | {_f(m.win_rate_pct)} | "
        f"{_f(m.profit_factor)} | {m.n_trades} | {_f(m.exposure_pct)} | "
        f"{_f(m.turnover_annual)} | {_f(m.avg_holding_bars, 1)} |"
    )


ALPHA_HEADER = [
    "| window | alpha % a year | beta | HAC t of alpha | appraisal ratio | information ratio | "
    "excess Sharpe | deflated alpha |",
    "|---|---|---|---|---|---|---|---|",
]


def _alpha_row(label: str, a: AlphaStats | None) -> str:
    if a is None:
        return f"| {label} | – | – | – | – | – | – | – |"
    return (
        f"| {label} | {_f(a.alpha_annual_pct)} | {_f(a.beta)} | "
        f"{_f(a.t_stat)} | {_f(a.appraisal_ratio)} | "
        f"{_f(a.information_ratio)} | {_f(a.excess_sharpe)} | "
        f"{_f(a.deflated_alpha, 3)} |"
    )


def metrics_header(trades: str = "trades") -> list[str]:
    """The metrics table's head; ``trades`` says what the count is (``scorecard.TRADE_LABELS``)."""
    return [
        f"| window | sharpe | sortino | CAGR % | max DD % | win rate % | profit factor | {trades} | "
        "exposure % | turnover / year | bars held per trade |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]


def render_report(
    *,
    run_id: str,
    config: RunConfig,
    criteria: Criteria,
    verdict: Verdict,
    decisions: list[GateDecision],
    synthesis: ResearchSynthesis | None,
    data: DataSummary,
    best_variant: VariantEntry | None,
    best_eval: VariantEvaluation | None,
    figures: dict[str, Figures],
    charts: list[str] | None = None,
    n_records: int | None = None,
    holdout_per_symbol: dict[str, Metrics] | None = None,
) -> str:
    """The report of a run: ``config`` as it ran, ``criteria`` as the gate applied them (the
    user's laid over the defaults), ``verdict`` as verdict.json holds it, ``best_eval`` the
    best variant's in-sample evaluation, ``figures`` its figures per window, and
    ``holdout_per_symbol`` the winner's holdout metrics per symbol (for concentration)."""
    bench = verdict.benchmark or BUY_AND_HOLD
    cash = bench.name == "cash"
    spec = best_variant.spec if best_variant else None
    trades = trades_kind(spec, len(config.tickers))
    rows = _criteria_rows(criteria, verdict, best_eval, cash=cash, trades=trades)
    headline = _headline(
        verdict,
        criteria,
        best_variant,
        best_eval,
        rows,
        holdout_per_symbol,
        spec.scope if spec else None,
    )
    out = [
        f"# Strategy lab run `{run_id}`",
        "",
        *[f"**{line}**  " if k == 0 else f"{line}  " for k, line in enumerate(headline)],
        "",
        *_verdict_lines(config, verdict),
        "",
        *_plan_block(config),
        *_setup_section(config, verdict, data, bench),
        "",
        *_route_history(decisions),
        *_research_summary(synthesis),
        "",
        "## Best variant",
        "",
        *_best_variant_section(
            config, verdict, best_variant, best_eval, figures, rows, bench, trades
        ),
        *_honesty_section(verdict, bench.name, cash, sampler=config.sampler),
        *_cpcv_section(verdict.cpcv),
        *_charts_section((charts or []) if config.figures else None),
        *_caveats_section(config, data, bench.name, cash),
        *_reproduce_section(config, n_records),
    ]
    return "\n".join(out)


def _criteria_rows(
    criteria: Criteria,
    verdict: Verdict,
    best_eval: VariantEvaluation | None,
    *,
    cash: bool,
    trades: str,
) -> list[CriterionRow]:
    """The scorecard rows of the best variant's in-sample evaluation (none without one)."""
    if best_eval is None:
        return []
    return criteria_rows(
        criteria,
        metrics=best_eval.metrics,
        alpha=best_eval.alpha,
        score=best_eval.score,
        dsr=best_eval.dsr,
        spa_pvalue=best_eval.spa_pvalue,
        cash=cash,
        trades=trades,
    )


def _headline(
    verdict: Verdict,
    criteria: Criteria,
    best_variant: VariantEntry | None,
    best_eval: VariantEvaluation | None,
    rows: list[CriterionRow],
    holdout_per_symbol: dict[str, Metrics] | None,
    scope: str | None,
) -> list[str]:
    """The verdict sentence, then the holdout's and its concentration across symbols."""
    vetoes = other_vetoes(
        best_eval.vetoes if best_eval else None, best_eval.veto_kinds if best_eval else None
    )
    headline = [verdict_line(verdict, best_variant if best_eval else None, rows, vetoes=vetoes)]
    if (held := holdout_line(verdict, criteria)) is not None:
        headline.append(held)
        if (spread := concentration_line(holdout_per_symbol, scope=scope)) is not None:
            headline.append(spread)
    return headline


def _verdict_lines(config: RunConfig, verdict: Verdict) -> list[str]:
    """Directive, verdict, reason and the LLM masking state, in bold labels."""
    return [
        f"**Directive:** {config.directive}  ",
        f"**Verdict:** {verdict.verdict} after {verdict.iterations} iteration(s), "
        f"{verdict.n_backtests} backtests, {verdict.n_trials} trials counted.  ",
        f"**Reason:** {verdict.reason}",
        *_masking_lines(verdict.llm_masking),
    ]


def _setup_section(
    config: RunConfig, verdict: Verdict, data: DataSummary, bench: BenchmarkInfo
) -> list[str]:
    """The set-up: universe, split, costs, benchmark, prices, memory and the gate's bars."""
    bname = bench.name
    cash = bname == "cash"
    split = data.split
    return [
        "## Set-up",
        "",
        f"- Directive read as: {_directive_reading(config)}",
        f"- Universe: {', '.join(config.tickers)} ({config.universe_source}), timeframe "
        f"{config.timeframe}, {config.start} .. {config.end}",
        f"- Split: in-sample {split.insample_start} .. {split.insample_end} "
        f"in {len(data.folds)} walk-forward folds; sealed holdout "
        f"{split.holdout_start} .. {split.holdout_end}",
        f"- Costs: commission {config.costs.commission_pct}% and slippage "
        f"{config.costs.slippage_pct}% per side{_borrow_clause(config)}; market orders "
        "fill at the next bar's open",
        f"- Benchmark: {bench.description}"
        + (
            " — the absolute test: market exposure counts as edge here"
            if cash
            else "; same windows, one entry at the same costs"
        ),
        f"- Prices: {_prices(config)}",
        f"- Research memory: {_memory(config)}",
        f"- Gate criteria: {_criteria_sources(config)}; a pass also needs "
        f"fuzzy score >= "
        f"{verdict.score_threshold}, deflated Sharpe >= {verdict.dsr_threshold}"
        + ("" if cash else f", deflated alpha over {bname} >= {verdict.deflated_alpha_threshold}")
        + f" and Hansen's SPA p-value over every trial <= {verdict.spa_threshold}",
    ]


def _route_history(decisions: list[GateDecision]) -> list[str]:
    """One table row per iteration's gate decision, then the reasons in order."""
    out = [
        "## Route history",
        "",
        "| iteration | variants | passed | best variant | best score | progress | DSR | beta | "
        "alpha t | deflated alpha | SPA p | failure | trajectory | decision |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    out += [_route_row(d) for d in decisions]
    out += ["", "Reasons, in order:", ""]
    out += [f"{d.iteration}. {d.reasoning}" for d in decisions]
    return out


def _route_row(d: GateDecision) -> str:
    """An iteration's row: its variants, passes and its best variant's figures."""
    evs = d.evaluations
    best = next((e for e in evs if e.variant_id == d.best_variant_id), None)
    alpha = best.alpha if best else None
    return (
        f"| {d.iteration} | {len(evs)} | {sum(e.passed for e in evs)} | "
        f"{d.best_variant_id or '–'} | {_f(best.score if best else None, 3)} | "
        f"{_f(best.progress if best else None, 3)} | "
        f"{_f(best.dsr if best else None, 3)} | "
        f"{_f(alpha.beta if alpha else None)} | "
        f"{_f(alpha.t_stat if alpha else None)} | "
        f"{_f(alpha.deflated_alpha if alpha else None, 3)} | "
        f"{_f(d.spa_pvalue, 3)} | "
        f"{d.failure.failure_type if d.failure else '–'} | "
        f"{d.trajectory.status if d.trajectory else '–'} | {d.decision} |"
    )


def _research_summary(synthesis: ResearchSynthesis | None) -> list[str]:
    """The research synthesis in a paragraph (nothing without one)."""
    if synthesis is None:
        return []
    out = [
        "",
        "## Research summary",
        "",
        f"Regime **{synthesis.regime}**, signal {synthesis.signal:+.2f}, confidence "
        f"{synthesis.confidence:.2f} over the domains with data ({synthesis.quality} "
        "quality)"
        + f", coverage {synthesis.coverage:.2f} of domains"
        + (" — research degraded" if synthesis.degraded else "")
        + ". Recommended families: "
        + ", ".join(synthesis.recommended_families)
        + ".",
        "",
        synthesis.summary,
        "",
    ]
    if synthesis.gaps:
        out += ["Gaps: " + "; ".join(synthesis.gaps) + ".", ""]
    out += ["Details: `research/research.md`, `research/data_brief.md`."]
    return out


def _best_variant_section(
    config: RunConfig,
    verdict: Verdict,
    best_variant: VariantEntry | None,
    best_eval: VariantEvaluation | None,
    figures: dict[str, Figures],
    rows: list[CriterionRow],
    bench: BenchmarkInfo,
    trades: str,
) -> list[str]:
    """The best variant: its code and lineage, scorecard, figures per window and the holdout."""
    if not (best_variant and best_eval):
        return ["No variant produced a result."]
    out = [
        *_best_variant_intro(config, verdict, best_variant, best_eval),
        "What passed, bar by bar (in-sample, as the gate saw it when it chose this variant; "
        "margin: how far past the threshold, negative when short of it; attainment: 1 at "
        "the threshold, 0..2):",
        "",
        *scorecard_table(rows),
        "",
        *_rejected_warning(best_eval, figures),
        *metrics_header(TRADE_LABELS[trades]),
        *_figures_tables(verdict, figures, bench),
    ]
    if "holdout" not in figures:
        out += [
            "",
            "The holdout stays sealed: it is opened only for a strategy that passed the gate.",
        ]
    else:
        out += [
            "",
            "The holdout was sealed during the search and opened once, for this strategy; "
            "its result was not fed back. The winner is exported in `winner/` "
            "(`strategy.py` runs with plain backtrader).",
        ]
    return out


def _best_variant_intro(
    config: RunConfig,
    verdict: Verdict,
    best_variant: VariantEntry,
    best_eval: VariantEvaluation,
) -> list[str]:
    """What the best variant is, where its code is, and its score at selection."""
    spec, vid = best_variant.spec, best_variant.variant_id
    named = config.styles or config.preferred_families
    outside = (
        f" — **outside the directive** (it asked for {', '.join(named)})"
        # within_directive reads a spec's JSON form (variants.json's)
        if not within_directive(spec.model_dump(mode="json"), named)
        else ""
    )
    return [
        f"`{vid}` — {spec.name} ({spec.family}): {spec.approach}{outside}",
        "",
        f"Code: [`strategies/{vid}.py`](strategies/{vid}.py) (lineage: parent "
        f"`{best_variant.parent_id or '–'}`, route {best_variant.route}, "
        f"iteration {best_variant.iteration}); parameters: "
        + ", ".join(f"{k}={v}" for k, v in sorted(spec.parameters.items())),
        "",
        f"Fuzzy score {_f(best_eval.score, 3)} (graded progress "
        f"{_f(best_eval.progress, 3)}); deflated Sharpe {_f(best_eval.dsr, 3)} at "
        f"selection ({_f(verdict.best_dsr_all_trials, 3)} over all {verdict.n_trials} "
        "trials); fold Sharpes "
        + ", ".join(_f(s) for s in best_eval.fold_sharpes)
        + (f"; vetoes: {'; '.join(best_eval.vetoes)}" if best_eval.vetoes else ""),
        "",
    ]


def _figures_tables(
    verdict: Verdict, figures: dict[str, Figures], bench: BenchmarkInfo
) -> list[str]:
    """The metrics rows per window (strategy and benchmark), then the alpha table if any."""
    bname = bench.name
    out = []
    for window, row in figures.items():
        out.append(_metrics_row(f"{window} (strategy)", row.metrics))
        out.append(_metrics_row(f"{window} ({bname})", row.buy_and_hold))
    if not figures:
        out.append(_metrics_row(f"in-sample ({bname})", verdict.buy_and_hold_in_sample))
    if any(row.alpha for row in figures.values()):
        out += ["", f"Against {bench.description}:", "", *ALPHA_HEADER]
        out += [_alpha_row(w, row.alpha) for w, row in figures.items()]
    return out


def _honesty_section(
    verdict: Verdict, bname: str, cash: bool, *, sampler: str = "random"
) -> list[str]:
    """Trials counted, deflation, PBO and the reality check: what the search paid for looking."""
    pbo = verdict.pbo
    best_alpha = verdict.best_alpha
    out = [
        "",
        "## Statistical honesty",
        "",
        f"- Trials counted (every distinct variant × parameter set backtested or screened on "
        f"this data): {verdict.n_trials}",
        *_effective_lines(verdict, sampler),
        *_ledger_line(verdict),
        f"- Deflated Sharpe of the best variant: {_f(verdict.best_dsr, 3)} when it was "
        f"selected; {_f(verdict.best_dsr_all_trials, 3)} deflated by all "
        f"{_deflation_n(verdict)} trials of the run",
        "- PBO (CSCV, probability that the run's in-sample choice is below the median out of "
        + (
            f"sample): {_f(pbo, 3)} over the {verdict.pbo_variants or 'n/a'} variants the run tried"
            if pbo is not None
            else "sample): not computed (needs >= 8 variants with returns on shared dates)"
        ),
        f"- Deflated alpha of the best variant over {bname}: "
        f"{_f(best_alpha.deflated_alpha if best_alpha else None, 3)} when it was selected; "
        f"{_f(verdict.best_deflated_alpha_all_trials, 3)} deflated by all "
        f"{_deflation_n(verdict)} trials"
        + (" (reported only: against cash the deflated Sharpe is the test)" if cash else ""),
        f"- Reality check (Hansen's SPA, stationary bootstrap) of all "
        f"{verdict.spa_trials} trials with returns against {bname}: p = "
        f"{_f(verdict.spa_pvalue, 3)} (a pass needs <= "
        f"{verdict.spa_threshold}): the chance that the best of them looks this "
        "good if none beats the benchmark" + _looks(verdict),
    ]
    ts = verdict.trial_sharpes
    if ts.threshold is not None:
        out.append(
            f"- Deflation threshold: the best of {ts.n_trials} pure-noise trials would be "
            f"expected to reach an annualised Sharpe of {_f(ts.threshold)} "
            f"(best variant: {_f(ts.best)}; {ts.n_with_sharpe} trials had a Sharpe)"
        )
    return out


def _cpcv_section(r: CpcvResult | None) -> list[str]:
    """CPCV of the search's choice (--validation cpcv): the paths' Sharpe distribution and
    its reading; nothing when the run validated by walk-forward alone."""
    if r is None:
        return []
    out = ["", "## CPCV", ""]
    if r.reason is not None:
        return [*out, f"Not computed: {r.reason}."]
    return [
        *out,
        f"Combinatorial purged cross-validation of the search's choice (pick the best "
        f"in-sample Sharpe among the {r.n_variants} variants tried) over {r.n_dates} shared "
        f"in-sample dates: {r.n_groups} groups, {r.n_test_groups} tested per split, "
        f"{r.n_splits} splits; training bars within {r.purge_bars} of a test group purged "
        f"and {r.embargo_bars} more embargoed after it; {r.n_paths} paths.",
        "",
        "| paths | mean | median | std | 5th pct | below zero |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {r.n_paths} | {_f(r.mean)} | {_f(r.median)} | {_f(r.std)} | {_f(r.p5)} | "
        f"{_f(100 * (r.share_negative or 0.0), 0)} % |",
        "",
        f"Each path's annualised Sharpe: {', '.join(_f(x) for x in r.path_sharpes)}. "
        f"Reading: {cpcv_summary(r)}.",
    ]


def _charts_section(charts: list[str] | None) -> list[str]:
    """The charts as markdown images (nothing without charts; None: --no-figures)."""
    if charts is None:
        return ["", "## Charts", "", "Not drawn, nor the tear sheet (`--no-figures`)."]
    if not charts:
        return []
    return ["", "## Charts", "", *[f"![{Path(c).stem}]({c})" for c in charts]]


def _caveats_section(config: RunConfig, data: DataSummary, bname: str, cash: bool) -> list[str]:
    """What the figures cannot say: survivorship, assumed costs, data gaps, the looked-at folds."""
    return [
        "",
        "## Caveats",
        "",
        "- Survivorship: the default universes are today's famous names; past winners are "
        "over-represented.",
        "- Costs are assumptions (commission and slippage above"
        + (", the borrow fee on shorts" if _borrow_pct(config) else "; no borrow fee on shorts")
        + "); no market impact.",
        f"- Data: {_sources(data)}. " + _price_caveat(config),
        *_data_caveats(data),
        "- In-sample folds were looked at many times by the search; only the holdout is out-of-sample.",
        (
            "- The benchmark is cash: a strategy that only holds the market passes this test; "
            "rerun with `--benchmark buy-and-hold` or a symbol to ask for alpha."
            if cash
            else f"- Alpha and beta come from an OLS of the strategy's daily returns on {bname}'s "
            "with Newey-West (HAC) errors; a strategy with beta near 1 and no alpha is the "
            "benchmark with extra costs."
        ),
    ]


def _reproduce_section(config: RunConfig, n_records: int | None) -> list[str]:
    """How to reproduce, resume, review and export the run, and what its files hold."""
    return [
        "",
        "## Reproduce and review",
        "",
        f"- Seed {config.seed}; the config, package versions, git sha and data sha256s are "
        "in `manifest.json`. The same command with the same data and seed gives the same "
        "`experiments.jsonl` apart from its `recorded_at` and `run_id` fields.",
        f"- `experiments.jsonl`: {n_records if n_records is not None else 'every'} records (each "
        "backtest per variant × symbol, each gate decision, rejected variants, holdout runs), "
        "each with a content `record_id`.",
        "- An interrupted run continues with `python -m swarm.develop --resume <this folder>`; "
        "review it in `notebooks/review.ipynb` (`RUN_DIR=<this folder>`); export any variant "
        "with `python -m experiments.export <this folder> --to DIR [--variant ID]`.",
        "- Files: `charts/`, `strategies/` (every variant's source), `backtests/` (per-fold "
        "return series), `research/`, `variants.json`, `verdict.json`, `tearsheet.html` (the "
        "best variant against the benchmark: rolling Sharpe and beta, monthly returns, "
        "drawdown periods, trades; `python -m experiments.tearsheet <this folder>` redraws it).",
        "",
    ]


def _criteria_sources(config: RunConfig) -> str:
    """The criteria and where each came from: the user's ``--criteria``, the defaults kept
    (the asset class's among them, said why), and whether ``--criteria-replace`` dropped the
    default rules."""
    notes = [] if config.criteria_replace else list(config.asset_notes)
    said = _criteria_said(config)
    return said + (f" (asset-class defaults: {'; '.join(notes)})" if notes else "")


def _criteria_said(config: RunConfig) -> str:
    """Which criteria are the user's and which the defaults'."""
    replace = config.criteria_replace
    src = criteria_sources(config.criteria_text, replace=replace, defaults=config.asset_criteria)

    def ticks(labels: list[str]) -> str:
        return ", ".join(f"`{lab}`" for lab in labels)

    if not src.user:
        return (
            f"the defaults {ticks(src.defaults)} (`--criteria` adds to or overrides them, "
            "`--criteria-replace` replaces them)"
        )
    if replace:
        how = (
            f"in place of the default rules (`--criteria-replace`; dropped {ticks(src.displaced)})"
        )
    else:
        how = "over the defaults (`--criteria`; `--criteria-replace` would replace them)"
        if src.displaced:
            how += f", overriding {ticks(src.displaced)}"
    kept = f"; from the defaults {ticks(src.defaults)}" if src.defaults else ""
    return f"yours {ticks(src.user)} {how}{kept}"


def _prices(config: RunConfig) -> str:
    if config.prices == "adjusted":
        return (
            "adjusted (`--prices adjusted`): total return from `adj_close`, open/high/low/close "
            "scaled by the same factor, so dividends count"
        )
    return (
        "raw (the default; `--prices adjusted` for total return): split-adjusted closes "
        "without dividends"
    )


def _price_caveat(config: RunConfig) -> str:
    if config.prices == "adjusted":
        return (
            "Signals and fills use dividend-adjusted prices: past price levels are lower than "
            "the ones traded then, so fixed price levels and share counts are not historical."
        )
    return (
        "OHLC are split-adjusted but not dividend-adjusted in the Yahoo-style corpus; signals "
        "and fills use those prices, so returns leave out dividends (`--prices adjusted` "
        "counts them)."
    )


def _memory(config: RunConfig) -> str:
    where = config.memory_dir
    if where == "off":
        return "off (`--memory-dir off`): nothing recalled, nothing stored"
    place = f"`{where}`" if where else "the user cache dir (default, shared by runs)"
    return (
        f"{place}; what was recalled and why is in `research/recalled.json`. Memory is an "
        "input: reproduce a run exactly with `--memory-dir off` or a copy of that folder"
    )


def _rejected_warning(best_eval: VariantEvaluation, figures: dict[str, Figures]) -> list[str]:
    """Orders the broker refused (margin, size): the trades that did not happen are missing
    from every figure above, so a win rate can look better than the rule is."""
    counts = {"in-sample": best_eval.metrics.orders_rejected if best_eval.metrics else 0}
    for window, row in figures.items():
        counts[window] = row.metrics.orders_rejected if row.metrics else 0
    refused = {w: n for w, n in counts.items() if n}
    if not refused:
        return []
    where = ", ".join(f"{n} {w}" for w, n in refused.items())
    return [
        f"**Warning: the broker refused orders** ({where}, summed over the variant's jobs): "
        "orders sized beyond the cash or margin available were never filled. The figures "
        "below count only the trades that happened, so the trade count, win rate and "
        "returns describe a different strategy from the one written; size positions below "
        "100% of equity (costs included) to trade every signal.",
        "",
    ]


def _plan_block(config: RunConfig) -> list[str]:
    """The resolved plan (swarm.plan.plan_summary) as JSON, heading the report."""
    if not config.plan:
        return []
    return ["## Plan", "", "```json", json.dumps(config.plan, indent=2), "```", ""]


def _directive_reading(config: RunConfig) -> str:
    named = config.preferred_families
    families = (
        f"families {', '.join(named)} (at least half of the first iteration; the others "
        "fill the rest)"
        if named
        else "no family named (one of each family first)"
    )
    return (
        f"{families}; universe {', '.join(config.tickers)} ({config.universe_source}); "
        f"benchmark {config.benchmark}; timeframe {config.timeframe}"
    )


def _sources(data: DataSummary) -> str:
    parts = [f"{s} from {d.source} (sha256 {d.sha256[:12]}…)" for s, d in data.symbols.items()]
    return "; ".join(parts)


def _data_caveats(data: DataSummary) -> list[str]:
    """A line per symbol whose data does not reach an edge of the requested window, and per
    bar ``--repair`` changed: the run's figures are of the data it had, not the one asked for."""
    out = []
    for symbol, d in data.symbols.items():
        for line in d.quality.coverage_warnings if d.quality else []:
            out.append(f"- Coverage: {symbol}: {line}.")
        for r in d.repairs:
            where = f"line {r.line} ({r.date})" if r.line else r.date
            out.append(f"- Repaired (`--repair`): {symbol} {where}: {r.detail} -> {r.action}.")
    return out


def _deflation_n(verdict: Verdict) -> str:
    """The trial count the deflation used, said as such (with the earlier runs' on this data
    when they count)."""
    eff = verdict.n_trials_effective
    earlier = _earlier_runs(verdict)
    if verdict.deflated_by == "effective" and eff is not None:
        if earlier:
            return f"{verdict.n_trials_effective_cumulative} effective ({earlier})"
        return f"{eff} effective"
    return f"{verdict.n_trials_cumulative} ({earlier})" if earlier else str(verdict.n_trials)


def _earlier_runs(verdict: Verdict) -> str:
    """ "this run's and N earlier runs' on this data" when earlier runs count; else ""."""
    if verdict.ledger != "counted" or not verdict.earlier_runs:
        return ""
    return f"this run's and {verdict.earlier_runs} earlier run(s)' on this data"


def _ledger_line(verdict: Verdict) -> list[str]:
    """How the trial ledger across runs on this data counted (nothing for older runs)."""
    if verdict.ledger == "off":
        return ["- Earlier runs on this data: not read (`--ledger-dir off`), nor this run recorded"]
    if verdict.ledger == "fresh":
        return [
            "- Earlier runs on this data: **not counted** (`--fresh-ledger`): the deflation "
            "counts this run's trials only; this run is recorded for the runs after it"
        ]
    if verdict.ledger != "counted":
        return []
    return [
        f"- Earlier runs on this data: {verdict.earlier_runs}; trials with this run's: "
        f"{verdict.n_trials_cumulative} ({verdict.n_trials_effective_cumulative} effective), "
        "all counted in the deflated Sharpe and alpha (`--fresh-ledger` opts out)"
    ]


def _effective_lines(verdict: Verdict, sampler: str = "random") -> list[str]:
    """Raw and effective trial counts, in one or two sentences (and why a TPE run's
    deflation counts every trial)."""
    eff = verdict.n_trials_effective
    if eff is None:
        return []
    used = "effective" if verdict.deflated_by == "effective" else "raw"
    return [
        f"- Effective trials: {eff} of the {verdict.n_trials} trials are genuinely different "
        "(clusters of in-sample return series, alpha series against a benchmark, whose average "
        f"correlation is at least {1 - CORRELATION_DISTANCE:g}: neighbouring parameter sets "
        "move together and count as one). The deflated Sharpe uses "
        f"the {used} count"
        + (
            ", and the dispersion of the clusters' Sharpes as its variance."
            if used == "effective"
            else "."
        )
        + (
            " TPE (`--sampler tpe`) crowds its draws where earlier draws scored well, so "
            "clustering them would understate the search: its default is every trial."
            if sampler == "tpe" and used == "raw"
            else ""
        )
    ]


def _masking_lines(m: dict[str, Any] | None) -> list[str]:
    """Masked or not, the cutoff, the leak counts, and the banner of an unmasked LLM run on
    data its model may remember (issue 29). Nothing for the rules brains.

    ``m`` is ``Verdict.llm_masking``: the mask policy's summary, free-form by design."""
    if not m:
        return []
    state = "masked" if m.get("masked") else "NOT masked"
    cutoff = m.get("cutoff") or "unknown (assumed after all data)"
    leaks = m.get("leaks") or {}
    out = [
        "",
        f"**LLM prompts:** {state} (--mask {m.get('mode')}); model cutoff {cutoff} "
        f"({m.get('cutoff_source')}); leak audit: {leaks.get('leaked', 0)} of "
        f"{leaks.get('audited', 0)} answers rejected (rate {leaks.get('leak_rate', 0.0):.1%}; "
        f"contaminated above {leaks.get('contaminated_above', 0.05):.0%}).",
    ]
    if m.get("banner"):
        out += [
            "",
            f"> **Warning: {m['banner']}** (an unmasked LLM run on data before the "
            f"model's cutoff {m.get('cutoff') or 'unknown'}).",
        ]
    if leaks.get("contaminated"):
        out += [
            "",
            "> **CONTAMINATED: the model named what it was not shown; the gate cannot "
            "pass this run.**",
        ]
    return out


def _looks(verdict: Verdict) -> str:
    """How the reality check's p-value paid for being looked at every iteration."""
    looks = int(verdict.spa_looks or 1)
    raw = verdict.spa_raw_pvalue
    if raw is None:
        return ""
    return (
        f"; looked at {looks} time(s), once per iteration, so the last look's p = {_f(raw, 4)} "
        f"counts x {spa_look_factor(looks)} (look k spends "
        f"{verdict.spa_threshold} / (k (k + 1)))"
    )


def _borrow_pct(config: RunConfig) -> float:
    """The run's borrow fee, percent a year."""
    return float(config.costs.borrow_pct or 0.0)


def _borrow_clause(config: RunConfig) -> str:
    """The cost sentence's borrow part: the fee on shorts, or that there is none."""
    pct = _borrow_pct(config)
    if not pct:
        return ", no borrow fee on shorts"
    return (
        f", and a borrow fee of {pct:g}% a year on the market value of shorts, accrued per bar "
        "held short"
    )
