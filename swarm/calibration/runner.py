"""Running calibration: one run generates its universe and runs the develop loop on it
(``swarm.run.prepare`` + ``execute``, the same path as ``python -m swarm.develop``); all runs
go in this process or in a pool of spawned ones, each record handed on as it finishes."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from backtest.lifeline import die_with_parent
from swarm.calibration.jobs import RunSpec
from swarm.calibration.scenarios import DEFAULT_DIRECTIVE
from swarm.calibration.synthetic_universe import write_universe


def run_config(spec: RunSpec, meta: dict[str, Any], data_dir: Path) -> tuple[Any, Any]:
    """The (RunConfig, Criteria) ``python -m swarm.develop`` builds for this run's options:
    directive ``alpha`` on the universe's symbols from its CSV folder, offline, quiet; the
    scenario's ``--families``, and its earnings reports' folder as ``--alt-data``."""
    from backtest.benchmark import BUY_AND_HOLD, normalise_name
    from gate.criteria import criteria_from_text
    from swarm.config import RunConfig
    from swarm.directive import parse_directive
    from swarm.llm.settings import parse_llm_arg

    plan = parse_directive(DEFAULT_DIRECTIVE)
    opts = spec.options
    config = RunConfig(
        directive=DEFAULT_DIRECTIVE,
        tickers=list(meta["symbols"]),
        universe_source="--tickers",
        preferred_families=plan.preferred_families,
        start=date.fromisoformat(meta["start"]),
        end=date.fromisoformat(meta["end"]),
        data_dir=data_dir.resolve(),
        source="csv",
        variants=opts.variants if opts.variants is not None else 5,
        limits={"max_iterations": opts.max_iterations if opts.max_iterations is not None else 10},
        seed=spec.seed,
        out=spec.out / "runs" / f"{spec.kind}-{spec.index:03d}",
        criteria_text=opts.criteria,
        criteria_replace=opts.criteria_replace,
        workers=spec.workers,
        llm_settings=parse_llm_arg("none"),
        offline=True,
        benchmark=normalise_name(plan.benchmark) if plan.benchmark else BUY_AND_HOLD,
        # Families stay open unless the scenario names some (the directive names none).
        families=list(spec.families),
        alt_data=Path(meta["alt_data"]).resolve() if meta.get("alt_data") else None,
        # Every run on its own: the universes share symbol names (SYNA, ...), so a shared
        # memory would let earlier runs (and runs in parallel) steer later ones.
        memory_dir="off",
        # Nothing re-runs a calibration's synthetic data, and a seed repeated in a later
        # calibration must give the same verdict: no trial ledger across runs.
        ledger_dir="off",
        # Charts and tear sheets are drawn after the verdict, ~30 s a run, and nobody reads
        # 180 of them: off unless --figures.
        figures=spec.figures,
        # The desk's decisions are cached in the calibration's folder, not the user's cache.
        decision_cache_dir=(spec.out / "decisions").resolve()
        if "decision_pipeline" in spec.families
        else None,
        **{
            k: v
            for k, v in (
                ("screen_size", opts.screen_size),
                ("deflate_by", opts.deflate_by),
                ("sampler", opts.sampler),
                ("param_space", opts.param_space),
            )
            if v is not None
        },
    )
    return config, criteria_from_text(opts.criteria, replace=opts.criteria_replace)


@dataclass(frozen=True)
class LoopResult:
    """What one develop loop ended with: 0 and a verdict, 2 on bad input, 1 on a crash."""

    code: int
    run_dir: Path | None
    verdict: Any = None  # experiments.records.Verdict when code == 0
    error: str | None = None


def run_loop(config: Any, criteria: Any) -> LoopResult:
    """``swarm.run.prepare`` + ``execute``: the develop loop's own path, without its CLI."""
    import traceback

    from swarm.errors import UserInputError
    from swarm.families import registry
    from swarm.run import execute, prepare

    try:
        registry().preflight(config)  # a named family's own inputs, as develop checks them
        prepared = prepare(config, criteria, argv=["swarm.calibrate"], quiet=True)
    except UserInputError as exc:
        return LoopResult(2, None, error=f"error: {exc}")
    try:
        outcome = execute(prepared)
    except Exception as exc:  # an internal failure: keep the folder, like the CLI does
        prepared.run.write_json(
            "error.json", {"error": repr(exc), "traceback": traceback.format_exc()}
        )
        return LoopResult(1, prepared.run.root, error=f"internal error: {exc!r}")
    verdict = outcome.state.get("verdict")
    return LoopResult(0, prepared.run.root, verdict=verdict)


def run_name(spec: RunSpec) -> str:
    """The run's folder name under ``data/`` and ``runs/``: its scenario and index."""
    return f"{spec.kind}-{spec.index:03d}"


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Generate one universe, run the develop loop on it, return the verdict's essentials."""
    t0 = time.monotonic()
    data_dir = spec.out / "data" / run_name(spec)
    meta = write_universe(spec.universe, data_dir)
    result = run_loop(*run_config(spec, meta, data_dir))
    record = record_of(spec, meta, result, round(time.monotonic() - t0, 1))
    # the loop's resume checkpoints of a finished run: large, useless here
    if not spec.keep_checkpoints and result.run_dir and record["verdict"] != "ERROR":
        for p in result.run_dir.glob("checkpoint*"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
    return record


def _source_of(run_dir: Path | None) -> str | None:
    """The sha256 of the lab's source that made the run (its manifest's), if recorded."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (TypeError, OSError, ValueError):
        return None
    return (manifest.get("source") or {}).get("sha256")


def record_of(
    spec: RunSpec, meta: dict[str, Any], result: LoopResult, seconds: float | None
) -> dict[str, Any]:
    """The verdict's essentials of one finished loop (``seconds``: None when not measured)."""
    run_dir = result.run_dir
    record: dict[str, Any] = {
        "kind": spec.kind,
        "index": spec.index,
        "seed": spec.seed,
        "universe_kind": spec.universe.kind,
        "drift_annual": spec.universe.drift_annual,
        "exit_code": result.code,
        "run_dir": str(run_dir) if run_dir else None,
        "strength": meta["strength"],
        "seconds": seconds,
        "source": _source_of(run_dir),
    }
    if result.code != 0 or result.verdict is None:
        record["verdict"] = "ERROR"
        record["error"] = result.error or "no verdict written"
        return record
    v = result.verdict.model_dump(mode="json")
    figures = v.get("figures") or {}
    insample = (figures.get("in-sample") or {}).get("metrics") or {}
    holdout = (figures.get("holdout") or {}).get("metrics") or {}
    record |= {
        "verdict": v["verdict"],
        "iterations": v.get("iterations"),
        "n_trials": v.get("n_trials"),
        "n_trials_effective": v.get("n_trials_effective"),
        "best_variant": v.get("best_variant"),
        "best_score": v.get("best_score"),
        "best_dsr": v.get("best_dsr"),
        "best_dsr_all_trials": v.get("best_dsr_all_trials"),
        "best_sharpe": insample.get("sharpe"),
        "best_trades": insample.get("n_trades"),
        "holdout_sharpe": holdout.get("sharpe"),
        "route_history": v.get("route_history"),
        # The gate's benchmark figures, when this verdict.json has them.
        "best_alpha": v.get("best_alpha"),
        "spa_pvalue": v.get("spa_pvalue"),
        "spa_raw_pvalue": v.get("spa_raw_pvalue"),
        "spa_looks": v.get("spa_looks"),
        "benchmark": v.get("benchmark"),
    }
    return record


def failed_record(spec: RunSpec, exc: BaseException) -> dict[str, Any]:
    """The record of a run that raised outside the develop loop's own error handling."""
    return {
        "kind": spec.kind,
        "index": spec.index,
        "seed": spec.seed,
        "universe_kind": spec.universe.kind,
        "drift_annual": spec.universe.drift_annual,
        "verdict": "ERROR",
        "error": repr(exc),
        "seconds": 0.0,
    }


def run_all(
    specs: Sequence[RunSpec], workers: int, collect: Callable[[dict[str, Any]], None]
) -> None:
    """Every run, here (``workers == 1``) or in a pool of spawned processes; ``collect`` gets
    each record as it finishes (a run that raised: its ``failed_record``)."""
    if workers == 1:
        for spec in specs:
            try:
                collect(run_one(spec))
            except Exception as exc:  # one broken run must not lose the others
                collect(failed_record(spec, exc))
    else:
        # The runs die with this process (killed or crashed), as the backtest pool's workers do.
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=mp.get_context("spawn"), initializer=die_with_parent
        ) as pool:
            futures = {pool.submit(run_one, s): s for s in specs}
            for fut in as_completed(futures):
                try:
                    collect(fut.result())
                except Exception as exc:
                    collect(failed_record(futures[fut], exc))
