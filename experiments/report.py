"""The run's markdown report: what was decided, on what evidence, with which caveats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.scorecard import (
    TRADE_LABELS,
    concentration_line,
    criteria_of,
    criteria_rows,
    holdout_line,
    other_vetoes,
    scorecard_table,
    trades_kind,
    verdict_line,
)
from gate.alpha import spa_look_factor
from gate.criteria import criteria_sources
from gate.effective import CORRELATION_DISTANCE
from strategies.taxonomy import within_directive


def _f(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, int | float):
        return f"{x:.{nd}f}"
    return str(x)


def _metrics_row(label: str, m: dict[str, Any] | None) -> str:
    m = m or {}
    return (
        f"| {label} | {_f(m.get('sharpe'))} | {_f(m.get('sortino'))} | {_f(m.get('cagr_pct'))} | "
        f"{_f(m.get('max_drawdown_pct'))} | {_f(m.get('win_rate_pct'))} | "
        f"{_f(m.get('profit_factor'))} | {m.get('n_trades', '–')} | {_f(m.get('exposure_pct'))} | "
        f"{_f(m.get('turnover_annual'))} | {_f(m.get('avg_holding_bars'), 1)} |"
    )


ALPHA_HEADER = [
    "| window | alpha % a year | beta | HAC t of alpha | appraisal ratio | information ratio | "
    "excess Sharpe | deflated alpha |",
    "|---|---|---|---|---|---|---|---|",
]


def _alpha_row(label: str, a: dict[str, Any] | None) -> str:
    a = a or {}
    return (
        f"| {label} | {_f(a.get('alpha_annual_pct'))} | {_f(a.get('beta'))} | "
        f"{_f(a.get('t_stat'))} | {_f(a.get('appraisal_ratio'))} | "
        f"{_f(a.get('information_ratio'))} | {_f(a.get('excess_sharpe'))} | "
        f"{_f(a.get('deflated_alpha'), 3)} |"
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
    config: dict[str, Any],
    verdict: dict[str, Any],
    decisions: list[dict[str, Any]],
    synthesis: dict[str, Any] | None,
    data: dict[str, Any],
    best_variant: dict[str, Any] | None,
    best_eval: dict[str, Any] | None,
    figures: dict[str, Any],
    criteria_text: str,
    charts: list[str] | None = None,
    n_records: int | None = None,
    holdout_per_symbol: dict[str, dict[str, Any]] | None = None,
) -> str:
    """``holdout_per_symbol``: the winner's holdout metrics per symbol (for concentration)."""
    charts = charts or []
    bench = verdict.get("benchmark") or {"name": "buy-and-hold", "description": "buy & hold"}
    cash = bench["name"] == "cash"
    criteria = criteria_of(config, criteria_text)
    spec = (best_variant or {}).get("spec") or {}
    trades = trades_kind(spec, len(config.get("tickers") or []))
    rows = _criteria_rows(criteria, verdict, best_eval, cash=cash, trades=trades)
    headline = _headline(
        verdict, criteria, best_variant, best_eval, rows, holdout_per_symbol, spec.get("scope")
    )
    out = [
        f"# Strategy lab run `{run_id}`",
        "",
        *[f"**{line}**  " if k == 0 else f"{line}  " for k, line in enumerate(headline)],
        "",
        *_verdict_lines(config, verdict),
        "",
        *_plan_block(config),
        *_setup_section(config, verdict, data, bench, criteria_text),
        "",
        *_route_history(decisions),
        *_research_summary(synthesis),
        "",
        "## Best variant",
        "",
        *_best_variant_section(
            config, verdict, best_variant, best_eval, figures, rows, bench, trades
        ),
        *_honesty_section(verdict, bench["name"], cash),
        *_charts_section(charts),
        *_caveats_section(config, data, bench["name"], cash),
        *_reproduce_section(config, n_records),
    ]
    return "\n".join(out)


def _criteria_rows(
    criteria: Any,
    verdict: dict[str, Any],
    best_eval: dict[str, Any] | None,
    *,
    cash: bool,
    trades: str,
) -> list:
    """The scorecard rows of the best variant's in-sample evaluation (none without one)."""
    if not best_eval:
        return []
    return criteria_rows(
        criteria,
        metrics=best_eval.get("metrics"),
        alpha=best_eval.get("alpha"),
        score=best_eval.get("score"),
        dsr=best_eval.get("dsr"),
        spa_pvalue=best_eval.get("spa_pvalue", verdict.get("spa_pvalue")),
        cash=cash,
        trades=trades,
    )


def _headline(
    verdict: dict[str, Any],
    criteria: Any,
    best_variant: dict[str, Any] | None,
    best_eval: dict[str, Any] | None,
    rows: list,
    holdout_per_symbol: dict[str, dict[str, Any]] | None,
    scope: Any,
) -> list[str]:
    """The verdict sentence, then the holdout's and its concentration across symbols."""
    vetoes = other_vetoes((best_eval or {}).get("vetoes"), (best_eval or {}).get("veto_kinds"))
    headline = [verdict_line(verdict, best_variant if best_eval else None, rows, vetoes=vetoes)]
    if (held := holdout_line(verdict, criteria)) is not None:
        headline.append(held)
        if (spread := concentration_line(holdout_per_symbol, scope=scope)) is not None:
            headline.append(spread)
    return headline


def _verdict_lines(config: dict[str, Any], verdict: dict[str, Any]) -> list[str]:
    """Directive, verdict, reason and the LLM masking state, in bold labels."""
    return [
        f"**Directive:** {config['directive']}  ",
        f"**Verdict:** {verdict['verdict']} after {verdict['iterations']} iteration(s), "
        f"{verdict['n_backtests']} backtests, {verdict['n_trials']} trials counted.  ",
        f"**Reason:** {verdict['reason']}",
        *_masking_lines(verdict.get("llm_masking")),
    ]


def _setup_section(
    config: dict[str, Any],
    verdict: dict[str, Any],
    data: dict[str, Any],
    bench: dict[str, Any],
    criteria_text: str,
) -> list[str]:
    """The set-up: universe, split, costs, benchmark, prices, memory and the gate's bars."""
    bname = bench["name"]
    cash = bname == "cash"
    return [
        "## Set-up",
        "",
        f"- Directive read as: {_directive_reading(config)}",
        f"- Universe: {', '.join(config['tickers'])} ({config['universe_source']}), timeframe "
        f"{config['timeframe']}, {config['start']} .. {config['end']}",
        f"- Split: in-sample {data['split']['insample_start']} .. {data['split']['insample_end']} "
        f"in {len(data['folds'])} walk-forward folds; sealed holdout "
        f"{data['split']['holdout_start']} .. {data['split']['holdout_end']}",
        f"- Costs: commission {config['costs']['commission_pct']}% and slippage "
        f"{config['costs']['slippage_pct']}% per side{_borrow_clause(config)}; market orders "
        "fill at the next bar's open",
        f"- Benchmark: {bench.get('description', bname)}"
        + (
            " — the absolute test: market exposure counts as edge here"
            if cash
            else "; same windows, one entry at the same costs"
        ),
        f"- Prices: {_prices(config)}",
        f"- Research memory: {_memory(config)}",
        f"- Gate criteria: {_criteria_sources(config, criteria_text)}; a pass also needs "
        f"fuzzy score >= "
        f"{verdict['score_threshold']}, deflated Sharpe >= {verdict['dsr_threshold']}"
        + (
            ""
            if cash
            else f", deflated alpha over {bname} >= {verdict.get('deflated_alpha_threshold', 0.95)}"
        )
        + f" and Hansen's SPA p-value over every trial <= {verdict.get('spa_threshold', 0.05)}",
    ]


def _route_history(decisions: list[dict[str, Any]]) -> list[str]:
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
    out += [f"{d['iteration']}. {d['reasoning']}" for d in decisions]
    return out


def _route_row(d: dict[str, Any]) -> str:
    """An iteration's row: its variants, passes and its best variant's figures."""
    evs = d["evaluations"]
    best = next((e for e in evs if e["variant_id"] == d["best_variant_id"]), None)
    return (
        f"| {d['iteration']} | {len(evs)} | {sum(e['passed'] for e in evs)} | "
        f"{d['best_variant_id'] or '–'} | {_f(best['score'] if best else None, 3)} | "
        f"{_f((best or {}).get('progress'), 3)} | "
        f"{_f(best['dsr'] if best else None, 3)} | "
        f"{_f(((best or {}).get('alpha') or {}).get('beta'))} | "
        f"{_f(((best or {}).get('alpha') or {}).get('t_stat'))} | "
        f"{_f(((best or {}).get('alpha') or {}).get('deflated_alpha'), 3)} | "
        f"{_f(d.get('spa_pvalue'), 3)} | "
        f"{(d.get('failure') or {}).get('failure_type', '–')} | "
        f"{(d.get('trajectory') or {}).get('status', '–')} | {d['decision']} |"
    )


def _research_summary(synthesis: dict[str, Any] | None) -> list[str]:
    """The research synthesis in a paragraph (nothing without one)."""
    if not synthesis:
        return []
    out = [
        "",
        "## Research summary",
        "",
        f"Regime **{synthesis['regime']}**, signal {synthesis['signal']:+.2f}, confidence "
        f"{synthesis['confidence']:.2f} over the domains with data ({synthesis['quality']} "
        "quality)"
        + (
            f", coverage {synthesis['coverage']:.2f} of domains"
            if synthesis.get("coverage") is not None
            else ""
        )
        + (" — research degraded" if synthesis.get("degraded") else "")
        + ". Recommended families: "
        + ", ".join(synthesis.get("recommended_families", []))
        + ".",
        "",
        synthesis.get("summary", ""),
        "",
    ]
    if synthesis.get("gaps"):
        out += ["Gaps: " + "; ".join(synthesis["gaps"]) + ".", ""]
    out += ["Details: `research/research.md`, `research/data_brief.md`."]
    return out


def _best_variant_section(
    config: dict[str, Any],
    verdict: dict[str, Any],
    best_variant: dict[str, Any] | None,
    best_eval: dict[str, Any] | None,
    figures: dict[str, Any],
    rows: list,
    bench: dict[str, Any],
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
    config: dict[str, Any],
    verdict: dict[str, Any],
    best_variant: dict[str, Any],
    best_eval: dict[str, Any],
) -> list[str]:
    """What the best variant is, where its code is, and its score at selection."""
    spec = best_variant["spec"]
    named = config.get("styles") or config.get("preferred_families") or []
    outside = (
        f" — **outside the directive** (it asked for {', '.join(named)})"
        if not within_directive(spec, named)
        else ""
    )
    return [
        f"`{best_variant['variant_id']}` — {spec['name']} ({spec['family']}): "
        f"{spec['approach']}{outside}",
        "",
        f"Code: [`strategies/{best_variant['variant_id']}.py`]"
        f"(strategies/{best_variant['variant_id']}.py) (lineage: parent "
        f"`{best_variant.get('parent_id') or '–'}`, route {best_variant.get('route', '–')}, "
        f"iteration {best_variant.get('iteration', '–')}); parameters: "
        + ", ".join(f"{k}={v}" for k, v in sorted(spec["parameters"].items())),
        "",
        f"Fuzzy score {_f(best_eval['score'], 3)} (graded progress "
        f"{_f(best_eval.get('progress'), 3)}); deflated Sharpe {_f(best_eval['dsr'], 3)} at "
        f"selection ({_f(verdict.get('best_dsr_all_trials'), 3)} over all {verdict['n_trials']} "
        "trials); fold Sharpes "
        + ", ".join(_f(s) for s in best_eval.get("fold_sharpes", []))
        + (f"; vetoes: {'; '.join(best_eval['vetoes'])}" if best_eval.get("vetoes") else ""),
        "",
    ]


def _figures_tables(
    verdict: dict[str, Any], figures: dict[str, Any], bench: dict[str, Any]
) -> list[str]:
    """The metrics rows per window (strategy and benchmark), then the alpha table if any."""
    bname = bench["name"]
    out = []
    for window, row in figures.items():
        out.append(_metrics_row(f"{window} (strategy)", row.get("metrics")))
        out.append(_metrics_row(f"{window} ({bname})", row.get("buy_and_hold")))
    if not figures:
        out.append(_metrics_row(f"in-sample ({bname})", verdict.get("buy_and_hold_in_sample")))
    if any(row.get("alpha") for row in figures.values()):
        out += ["", f"Against {bench.get('description', bname)}:", "", *ALPHA_HEADER]
        out += [_alpha_row(w, row.get("alpha")) for w, row in figures.items()]
    return out


def _honesty_section(verdict: dict[str, Any], bname: str, cash: bool) -> list[str]:
    """Trials counted, deflation, PBO and the reality check: what the search paid for looking."""
    pbo = verdict.get("pbo")
    out = [
        "",
        "## Statistical honesty",
        "",
        f"- Trials counted (every distinct variant × parameter set backtested or screened on "
        f"this data): {verdict['n_trials']}",
        *_effective_lines(verdict),
        f"- Deflated Sharpe of the best variant: {_f(verdict.get('best_dsr'), 3)} when it was "
        f"selected; {_f(verdict.get('best_dsr_all_trials'), 3)} deflated by all "
        f"{_deflation_n(verdict)} trials of the run",
        "- PBO (CSCV, probability that the run's in-sample choice is below the median out of "
        + (
            f"sample): {_f(pbo, 3)} over the {verdict.get('pbo_variants') or 'n/a'} variants "
            "the run tried"
            if pbo is not None
            else "sample): not computed (needs >= 8 variants with returns on shared dates)"
        ),
        f"- Deflated alpha of the best variant over {bname}: "
        f"{_f((verdict.get('best_alpha') or {}).get('deflated_alpha'), 3)} when it was selected; "
        f"{_f(verdict.get('best_deflated_alpha_all_trials'), 3)} deflated by all "
        f"{_deflation_n(verdict)} trials"
        + (" (reported only: against cash the deflated Sharpe is the test)" if cash else ""),
        f"- Reality check (Hansen's SPA, stationary bootstrap) of all "
        f"{verdict.get('spa_trials', 0)} trials with returns against {bname}: p = "
        f"{_f(verdict.get('spa_pvalue'), 3)} (a pass needs <= "
        f"{verdict.get('spa_threshold', 0.05)}): the chance that the best of them looks this "
        "good if none beats the benchmark" + _looks(verdict),
    ]
    ts = verdict.get("trial_sharpes") or {}
    if ts.get("threshold") is not None:
        out.append(
            f"- Deflation threshold: the best of {ts.get('n_trials')} pure-noise trials would be "
            f"expected to reach an annualised Sharpe of {_f(ts['threshold'])} "
            f"(best variant: {_f(ts.get('best'))}; {ts.get('n_with_sharpe')} trials had a Sharpe)"
        )
    return out


def _charts_section(charts: list[str]) -> list[str]:
    """The charts as markdown images (nothing without charts)."""
    if not charts:
        return []
    return ["", "## Charts", "", *[f"![{Path(c).stem}]({c})" for c in charts]]


def _caveats_section(
    config: dict[str, Any], data: dict[str, Any], bname: str, cash: bool
) -> list[str]:
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


def _reproduce_section(config: dict[str, Any], n_records: int | None) -> list[str]:
    """How to reproduce, resume, review and export the run, and what its files hold."""
    return [
        "",
        "## Reproduce and review",
        "",
        f"- Seed {config.get('seed')}; the config, package versions, git sha and data sha256s are "
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


def _criteria_sources(config: dict[str, Any], criteria_text: str) -> str:
    """The criteria and where each came from: the user's ``--criteria``, the defaults kept
    (the asset class's among them, said why), and whether ``--criteria-replace`` dropped the
    default rules."""
    if "criteria_replace" not in config:  # a run from before the option: the text is all
        return f"`{criteria_text}`"
    notes = [] if config.get("criteria_replace") else list(config.get("asset_notes") or [])
    said = _criteria_said(config)
    return said + (f" (asset-class defaults: {'; '.join(notes)})" if notes else "")


def _criteria_said(config: dict[str, Any]) -> str:
    """Which criteria are the user's and which the defaults'."""
    replace = bool(config["criteria_replace"])
    asset = config.get("asset_criteria") or ""
    src = criteria_sources(config.get("criteria_text"), replace=replace, defaults=asset)

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


def _prices(config: dict[str, Any]) -> str:
    if config.get("prices", "raw") == "adjusted":
        return (
            "adjusted (`--prices adjusted`): total return from `adj_close`, open/high/low/close "
            "scaled by the same factor, so dividends count"
        )
    return (
        "raw (the default; `--prices adjusted` for total return): split-adjusted closes "
        "without dividends"
    )


def _price_caveat(config: dict[str, Any]) -> str:
    if config.get("prices", "raw") == "adjusted":
        return (
            "Signals and fills use dividend-adjusted prices: past price levels are lower than "
            "the ones traded then, so fixed price levels and share counts are not historical."
        )
    return (
        "OHLC are split-adjusted but not dividend-adjusted in the Yahoo-style corpus; signals "
        "and fills use those prices, so returns leave out dividends (`--prices adjusted` "
        "counts them)."
    )


def _memory(config: dict[str, Any]) -> str:
    where = config.get("memory_dir")
    if where == "off":
        return "off (`--memory-dir off`): nothing recalled, nothing stored"
    place = f"`{where}`" if where else "the user cache dir (default, shared by runs)"
    return (
        f"{place}; what was recalled and why is in `research/recalled.json`. Memory is an "
        "input: reproduce a run exactly with `--memory-dir off` or a copy of that folder"
    )


def _rejected_warning(best_eval: dict[str, Any], figures: dict[str, Any]) -> list[str]:
    """Orders the broker refused (margin, size): the trades that did not happen are missing
    from every figure above, so a win rate can look better than the rule is."""
    counts = {"in-sample": ((best_eval.get("metrics") or {}).get("orders_rejected") or 0)}
    for window, row in figures.items():
        counts[window] = (row.get("metrics") or {}).get("orders_rejected") or 0
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


def _plan_block(config: dict[str, Any]) -> list[str]:
    """The resolved plan (swarm.plan.plan_summary) as JSON, heading the report."""
    plan = config.get("plan")
    if not plan:
        return []
    import json

    return ["## Plan", "", "```json", json.dumps(plan, indent=2), "```", ""]


def _directive_reading(config: dict[str, Any]) -> str:
    named = config.get("preferred_families") or []
    families = (
        f"families {', '.join(named)} (at least half of the first iteration; the others "
        "fill the rest)"
        if named
        else "no family named (one of each family first)"
    )
    bench = config.get("benchmark", "buy-and-hold")
    return (
        f"{families}; universe {', '.join(config['tickers'])} ({config['universe_source']}); "
        f"benchmark {bench}; timeframe {config['timeframe']}"
    )


def _sources(data: dict[str, Any]) -> str:
    parts = [
        f"{s} from {d['source']} (sha256 {d['sha256'][:12]}…)" for s, d in data["symbols"].items()
    ]
    return "; ".join(parts)


def _data_caveats(data: dict[str, Any]) -> list[str]:
    """A line per symbol whose data does not reach an edge of the requested window, and per
    bar ``--repair`` changed: the run's figures are of the data it had, not the one asked for."""
    out = []
    for symbol, d in data["symbols"].items():
        for line in (d.get("quality") or {}).get("coverage_warnings") or []:
            out.append(f"- Coverage: {symbol}: {line}.")
        for r in d.get("repairs") or []:
            where = f"line {r['line']} ({r['date']})" if r.get("line") else r["date"]
            out.append(
                f"- Repaired (`--repair`): {symbol} {where}: {r['detail']} -> {r['action']}."
            )
    return out


def _deflation_n(verdict: dict[str, Any]) -> str:
    """The trial count the deflation used, said as such."""
    eff = verdict.get("n_trials_effective")
    if verdict.get("deflated_by") == "effective" and eff is not None:
        return f"{eff} effective"
    return str(verdict["n_trials"])


def _effective_lines(verdict: dict[str, Any]) -> list[str]:
    """Raw and effective trial counts, in one or two sentences."""
    eff = verdict.get("n_trials_effective")
    if eff is None:
        return []
    used = "effective" if verdict.get("deflated_by") == "effective" else "raw"
    return [
        f"- Effective trials: {eff} of the {verdict['n_trials']} trials are genuinely different "
        "(clusters of in-sample return series, alpha series against a benchmark, whose average "
        f"correlation is at least {1 - CORRELATION_DISTANCE:g}: neighbouring parameter sets "
        "move together and count as one). The deflated Sharpe uses "
        f"the {used} count"
        + (
            ", and the dispersion of the clusters' Sharpes as its variance."
            if used == "effective"
            else "."
        )
    ]


def _masking_lines(m: dict[str, Any] | None) -> list[str]:
    """Masked or not, the cutoff, the leak counts, and the banner of an unmasked LLM run on
    data its model may remember (issue 29). Nothing for the rules brains."""
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


def _looks(verdict: dict) -> str:
    """How the reality check's p-value paid for being looked at every iteration."""
    looks = int(verdict.get("spa_looks") or 1)
    raw = verdict.get("spa_raw_pvalue")
    if raw is None:
        return ""
    return (
        f"; looked at {looks} time(s), once per iteration, so the last look's p = {_f(raw, 4)} "
        f"counts x {spa_look_factor(looks)} (look k spends "
        f"{verdict.get('spa_threshold', 0.05)} / (k (k + 1)))"
    )


def _borrow_pct(config: dict[str, Any]) -> float:
    """The run's borrow fee, percent a year (0 for runs recorded before the option)."""
    return float(config.get("costs", {}).get("borrow_pct", 0.0) or 0.0)


def _borrow_clause(config: dict[str, Any]) -> str:
    """The cost sentence's borrow part: the fee on shorts, or that there is none."""
    pct = _borrow_pct(config)
    if not pct:
        return ", no borrow fee on shorts"
    return (
        f", and a borrow fee of {pct:g}% a year on the market value of shorts, accrued per bar "
        "held short"
    )
