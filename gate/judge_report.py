"""The judge's run folder: the same files a develop run leaves, so the lab's readers
(``experiments.check``, the review notebook) read it too.

``manifest.json`` (options, data hashes, the split), ``strategies/<id>.py`` (each file as it
was judged), ``backtests/<id>/`` (every job with its returns), ``experiments.jsonl`` (a record
per file and symbol, and the holdout's), ``verdict.json`` (the lab's ``Verdict``: SUCCESS when
the best file passed the gate, else ABANDON), ``judge.json`` (the full ``JudgeResult``) and
``report.md`` (per file: status, vetoes, the per-criterion table).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from backtest.contracts import JobStatus
from experiments.records import (
    AlphaSummary,
    BacktestRecord,
    BenchmarkInfo,
    Figures,
    FoldRecord,
    HoldoutRecord,
    Verdict,
    append_record,
)
from experiments.runfolder import RunFolder, build_manifest, code_file, new_run_id, result_file
from experiments.scorecard import CriterionRow, scorecard_table
from gate.aggregate import aggregate_variant
from gate.contracts import Route
from gate.judge_input import job_symbols, variant_ids
from gate.judge_result import FileVerdict, JudgeResult, JudgeStatus
from strategies.portfolio import LABEL as PORTFOLIO

if TYPE_CHECKING:
    from gate.judge_run import Judged, JudgeOptions, Window

ENTRY_POINT = "gate.judge"


def open_run(o: JudgeOptions, w: Window) -> RunFolder:
    """A new run folder with its manifest and the sources judged."""
    stem = "-".join(f.path.stem for f in o.files)[:30]
    run = RunFolder.create(o.out, new_run_id(f"judge {stem}"))
    config = {
        "entry_point": ENTRY_POINT,
        "files": [str(f.path) for f in o.files],
        "tickers": o.tickers,
        "start": o.start.isoformat(),
        "end": o.end.isoformat(),
        "benchmark": o.benchmark,
        "trials_declared": o.trials,
        "alt_data": str(o.alt_data) if o.alt_data else None,
        "criteria": o.criteria.model_dump(mode="json"),
        "folds": o.n_folds,
        "holdout_frac": o.holdout_frac,
        "warmup_bars": o.warmup_bars,
        "costs": o.costs.model_dump(mode="json"),
        "lookahead_cuts": o.cuts,
        "data_dir": str(o.data_dir),
    }
    data = {
        "sha256": {s: d.sha256 for s, d in {**w.data, **w.indices}.items()},
        "split": w.split.model_dump(mode="json"),
        "folds": [f.model_dump(mode="json") for f in w.folds],
        "holdout_fold": w.holdout.model_dump(mode="json"),
    }
    manifest = build_manifest(
        run_id=run.root.name, config=config, data=data, seed=o.seed, argv=o.argv
    )
    run.write_json("manifest.json", manifest | {"entry_point": ENTRY_POINT})
    for f, vid in zip(o.files, variant_ids(o.files), strict=True):
        run.write_text(code_file(vid), f.code)
    return run


def write_outputs(run: RunFolder, o: JudgeOptions, j: Judged, result: JudgeResult) -> None:
    """Write the results, records, verdict, judge.json and report.md into the run folder."""
    for r in j.results + j.holdout_results:
        run.write_text(result_file(r.variant_id, r.symbol, r.fold), r.model_dump_json())
    _records(run, o, j, result)
    run.write_json("verdict.json", _verdict(j, result).model_dump(mode="json"))
    run.write_text("judge.json", result.model_dump_json(indent=2) + "\n")
    run.write_text("report.md", render(result))


def _records(run: RunFolder, o: JudgeOptions, j: Judged, result: JudgeResult) -> None:
    now = datetime.now(UTC).isoformat()
    common: dict[str, Any] = {"run_id": run.root.name, "iteration": 1, "recorded_at": now}
    for f, v, ev in zip(o.files, result.files, j.evaluations, strict=True):
        for symbol in job_symbols(f, o.tickers):
            rs = sorted(
                (r for r in j.results if r.variant_id == v.variant_id and r.symbol == symbol),
                key=lambda r: r.fold,
            )
            ok = [r for r in rs if r.status == JobStatus.OK]
            metrics, fold_sharpes, _ = aggregate_variant(
                ok, periods_per_year=j.window.periods_per_year
            )
            append_record(
                run.tracker,
                BacktestRecord(
                    **common,
                    route=Route.INITIAL,
                    variant_id=v.variant_id,
                    name=f.class_name,
                    family=f.scope,
                    trial_key=ev.trial_key,
                    code_sha256=ev.trial_key,
                    symbol=symbol,
                    symbols=o.tickers if symbol == PORTFOLIO else [symbol],
                    data_sha256=j.window.data_sha256(symbol),
                    folds=[
                        FoldRecord(fold=r.fold, status=r.status, error=r.error, metrics=r.metrics)
                        for r in rs
                    ],
                    fold_sharpes=fold_sharpes,
                    status="ok"
                    if rs and len(ok) == len(rs)
                    else ("error" if not ok else "partial"),
                    metrics=metrics,
                    gate_score=ev.score,
                    gate_alpha=ev.alpha,
                    gate_passed=ev.passed,
                    gate_vetoes=ev.vetoes,
                    gate_veto_kinds=ev.veto_kinds,
                    gate_decision=Route.SUCCESS if ev.passed else Route.ABANDON,
                ),
            )
    key = {v.variant_id: ev.trial_key for v, ev in zip(result.files, j.evaluations, strict=True)}
    for r in j.holdout_results:
        append_record(
            run.tracker,
            HoldoutRecord(
                **common,
                variant_id=r.variant_id,
                symbol=r.symbol,
                symbols=o.tickers if r.symbol == PORTFOLIO else [r.symbol],
                status=r.status,
                error=r.error,
                metrics=r.metrics,
                data_sha256=j.window.data_sha256(r.symbol),
                code_sha256=key[r.variant_id],
            ),
        )


def _verdict(j: Judged, result: JudgeResult) -> Verdict:
    best = next((v for v in result.files if v.variant_id == result.best), None)
    crit = j.evaluations[0] if j.evaluations else None
    success = best is not None and best.passed and best.status == JudgeStatus.OK
    h = result.holdout
    figures = (
        {
            "in_sample": Figures(
                metrics=best.metrics, buy_and_hold=result.benchmark_in_sample, alpha=best.alpha
            )
        }
        if best
        else {}
    )
    if h is not None:
        figures["holdout"] = Figures(metrics=h.metrics, buy_and_hold=h.benchmark, alpha=h.alpha)
    a = best.alpha if best else None
    return Verdict(
        verdict="SUCCESS" if success else "ABANDON",
        reason=_headline(result),
        iterations=1,
        best_variant=result.best,
        n_backtests=len(j.results) + len(j.holdout_results),
        n_trials=result.trials_counted,
        deflated_by="raw",
        best_dsr=best.dsr if best else None,
        best_score=best.score if best else None,
        score_threshold=_threshold(result, "fuzzy score"),
        dsr_threshold=_threshold(result, "deflated Sharpe"),
        figures=figures,
        benchmark=BenchmarkInfo(
            name=result.benchmark,
            description=result.benchmark_description,
            in_sample=result.benchmark_in_sample,
            holdout=h.benchmark if h else None,
        ),
        best_alpha=AlphaSummary(**a.model_dump(include=set(AlphaSummary.model_fields)))
        if a is not None
        else None,
        holdout_alpha=h.alpha if h else None,
        spa_pvalue=result.spa_pvalue,
        spa_trials=result.spa_trials,
        route_history=[Route.SUCCESS if success else Route.ABANDON] if crit else [],
    )


def _threshold(result: JudgeResult, name: str) -> float:
    for v in result.files:
        for c in v.criteria:
            if c.name == name:
                return c.threshold
    return 0.0


def _headline(result: JudgeResult) -> str:
    """One sentence: what was judged and what came of it."""
    if result.status == JudgeStatus.FAILED:
        bad = [v for v in result.files if v.status == JudgeStatus.FAILED]
        return "FAILED: " + "; ".join(
            f"{v.variant_id}: {'; '.join(v.vetoes[:2]) or 'did not run'}" for v in bad
        )
    passed = [v.variant_id for v in result.files if v.passed]
    if passed:
        return f"PASSED the gate: {', '.join(passed)} (in-sample, every criterion)"
    return f"judged clean, not passed: the best, {result.best}, missed " + ", ".join(
        _rows(v)[i].miss()
        for v in result.files
        if v.variant_id == result.best
        for i, c in enumerate(v.criteria)
        if not c.passed
    )


def _rows(v: FileVerdict) -> list[CriterionRow]:
    return [
        CriterionRow(
            name=c.name,
            value=c.value,
            op=c.op,
            threshold=c.threshold,
            passed=c.passed,
            margin=c.margin,
            attainment=c.attainment,
        )
        for c in v.criteria
    ]


def render(result: JudgeResult) -> str:
    """report.md: the headline, the trial caveat, then per file its status and the table."""
    lines = [
        f"# Judge: {', '.join(v.variant_id for v in result.files)}",
        "",
        f"**{_headline(result)}**",
        "",
        f"Tickers {', '.join(result.tickers)}; {result.start} .. {result.end}; in-sample "
        f"{result.split.insample_start} .. {result.split.insample_end} in {len(result.folds)} "
        f"walk-forward fold(s); holdout {result.split.holdout_start} .. "
        f"{result.split.holdout_end} (sealed, opened once). Benchmark: "
        f"{result.benchmark_description}.",
        "",
        f"Trials: {result.trials_declared} declared, {result.trials_counted} counted. "
        f"Caveat: {result.caveat}.",
    ]
    if result.spa_pvalue is not None or result.spa_trials:
        lines += ["", f"SPA p-value over the {result.spa_trials} files: {result.spa_pvalue}"]
    for v in result.files:
        look = v.lookahead
        word = (
            "not run"
            if look is None
            else "INTEGRITY ERROR"
            if look.integrity
            else "BIASED"
            if look.biased
            else "clean"
            if look.checked
            else "could not run"
        )
        lines += [
            "",
            f"## {v.variant_id} ({v.class_name}, {v.scope}{', exported' if v.exported else ''})",
            "",
            f"Status **{v.status.value}**; gate {'passed' if v.passed else 'not passed'}; "
            f"lookahead check: {word}" + (f" ({look.n_cuts} cuts)" if look is not None else ""),
        ]
        if look is not None and look.mismatches:
            lines.append(f"First mismatch: {look.mismatches[0]}")
        lines += [f"- veto: {x}" for x in v.vetoes] + [f"- error: {x}" for x in v.errors]
        lines += ["", *scorecard_table(_rows(v))]
    h = result.holdout
    if h is not None:
        m, a = h.metrics, h.alpha
        lines += [
            "",
            f"## Holdout ({h.variant_id}, {h.start} .. {h.end}, opened once)",
            "",
            f"Sharpe {_f(m.sharpe if m else None)}, total return "
            f"{_f(m.total_return_pct if m else None)}%, trades {m.n_trades if m else '–'}; "
            f"benchmark Sharpe {_f(h.benchmark.sharpe if h.benchmark else None)}; alpha "
            f"{_f(a.alpha_annual_pct if a else None)}% a year, beta {_f(a.beta if a else None)}, "
            f"HAC t {_f(a.t_stat if a else None)}. Reported, never fed back.",
        ]
    return "\n".join(lines) + "\n"


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"
