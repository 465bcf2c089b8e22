"""python -m swarm.calibrate --runs N [--kinds A,B] [--workers W] [--seed S] [--out DIR]

Calibrates the quality gate: for i = 1..N and every scenario it generates a seeded universe
(``backtest.synthetic_universe``), runs the full develop loop on it (research swarm,
strategy development, backtests, gate, routing: the same code path as
``python -m swarm.develop``, fed through the CSV source), and reports

- per null scenario (no timing edge: zero drift, equity-like drift, a bull market) the
  false-discovery rate: the share of SUCCESS verdicts, where every SUCCESS is false, and
- per planted scenario (a known edge on top of a drift) the power: the share of SUCCESS,

plus both pooled, each with 95% confidence intervals (Wilson and Clopper-Pearson), one
line per run on stdout, progress on stderr, and ``calibration.json`` in the output folder.
Exit codes: 0 when every run finished (targets met or not), 1 when a run failed
internally, 2 on bad input. Also reachable as ``python -m swarm.develop --calibrate ...``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from backtest.synthetic_universe import Kind, UniverseSpec, write_universe
from swarm.cli_args import add_screen_arguments, screen_options
from swarm.errors import UserInputError

TARGET_FDR = 0.05
TARGET_POWER = 0.90
# Names no family: a directive's families fill half of the first iteration, and a planted
# edge must be found by the search, not announced to it (a "momentum" directive would
# crowd out the reversion scenario's family and help the momentum one).
DEFAULT_DIRECTIVE = "alpha"
SEED_STRIDE = 10_007  # keeps the seed blocks of different --seed values apart
MAX_RUNS = 999  # runs per scenario: the seed blocks of two scenarios must not overlap


@dataclass(frozen=True)
class Scenario:
    """A named kind of universe: what generates it, and whether an edge is in it."""

    name: str
    universe_kind: Kind  # "null": no edge; "planted" / "reversion": a known edge
    drift_annual: float  # common expected simple return a year
    slot: int  # fixes the scenario's seeds (universe_seed); never renumber one
    edge: str  # what a rule could find in it, for the summary lines
    n_symbols: int | None = None  # None: --symbols; a cross-sectional edge needs a broad universe

    @property
    def is_null(self) -> bool:
        return self.universe_kind == "null"

    @property
    def what(self) -> str:
        d = self.drift_annual
        return f"{self.edge}, " + ("zero drift" if d == 0 else f"{d:.0%}/yr drift")


# Order = the summary's order. The zero-drift planted kind is the pre-scenario "planted".
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("null-zero", "null", 0.0, 0, "no edge"),
        Scenario("null-drift", "null", 0.05, 2, "no edge"),
        Scenario("null-bull", "null", 0.20, 4, "no edge"),
        Scenario("planted-momentum", "planted", 0.05, 3, "regime momentum"),
        Scenario("planted-reversion", "reversion", 0.05, 5, "short-horizon reversion"),
        Scenario("planted-momentum-zero", "planted", 0.0, 1, "regime momentum"),
        # 10 symbols: broad enough that the portfolio families get a slot unasked (and the
        # null beside it says what that slot costs in false discoveries).
        Scenario(
            "planted-cross-sectional",
            "cross_sectional",
            0.05,
            6,
            "cross-sectional momentum",
            n_symbols=10,
        ),
        Scenario("null-drift-10", "null", 0.05, 7, "no edge", n_symbols=10),
    )
}
DEFAULT_SCENARIOS = (
    "null-zero",
    "null-drift",
    "null-bull",
    "planted-momentum",
    "planted-reversion",
)
# The two kinds before scenarios existed; they keep their seeds (slots 0 and 1).
ALIASES = {"null": "null-zero", "planted": "planted-momentum-zero"}


@dataclass(frozen=True)
class LoopOptions:
    """The develop options calibration may change (None: the develop loop's default)."""

    variants: int | None = None
    max_iterations: int | None = None
    criteria: str | None = None
    screen_size: int | None = None  # 0 = --no-screen
    deflate_by: str | None = None


@dataclass(frozen=True)
class RunSpec:
    kind: str  # the scenario's name
    index: int  # 1-based within its scenario
    seed: int  # universe seed and the develop loop's --seed
    universe: UniverseSpec
    options: LoopOptions
    out: Path
    workers: int  # backtest processes of this run
    keep_checkpoints: bool = False


def universe_seed(base_seed: int, scenario: str, index: int) -> int:
    """Distinct, reproducible seeds: no two scenarios (or indices, or base seeds) share one.

    Scenarios pair up by slot into blocks of ``2 * (MAX_RUNS + 1)`` seeds inside a base
    seed's ``SEED_STRIDE``; slots 0 and 1 (``null``/``planted`` before scenarios) keep the
    seeds they always had: ``base * SEED_STRIDE + 2 * index + (0 or 1)``.
    """
    if not 1 <= index <= MAX_RUNS:
        raise ValueError(f"run index {index} must be in 1..{MAX_RUNS}")
    slot = SCENARIOS[ALIASES.get(scenario, scenario)].slot
    return base_seed * SEED_STRIDE + 2 * (index + (MAX_RUNS + 1) * (slot // 2)) + slot % 2


def run_config(spec: RunSpec, meta: dict[str, Any], data_dir: Path) -> tuple[Any, Any]:
    """The (RunConfig, Criteria) ``python -m swarm.develop`` builds for this run's options:
    directive ``alpha`` on the universe's symbols from its CSV folder, offline, quiet."""
    from backtest.benchmark import BUY_AND_HOLD, normalise_name
    from gate.criteria import parse_criteria
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
        workers=spec.workers,
        llm_settings=parse_llm_arg("none"),
        offline=True,
        benchmark=normalise_name(plan.benchmark) if plan.benchmark else BUY_AND_HOLD,
        # Families stay open unless the directive names the decision pipeline (it does not).
        families=[],
        # Every run on its own: the universes share symbol names (SYNA, ...), so a shared
        # memory would let earlier runs (and runs in parallel) steer later ones.
        memory_dir="off",
        **{k: v for k, v in (("screen_size", opts.screen_size), ("deflate_by", opts.deflate_by))
           if v is not None},
    )  # fmt: skip
    return config, parse_criteria(opts.criteria)


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
    from swarm.run import execute, prepare

    try:
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


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Generate one universe, run the develop loop on it, return the verdict's essentials."""
    t0 = time.monotonic()
    name = f"{spec.kind}-{spec.index:03d}"
    data_dir = spec.out / "data" / name
    meta = write_universe(spec.universe, data_dir)
    result = run_loop(*run_config(spec, meta, data_dir))
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
        "seconds": round(time.monotonic() - t0, 1),
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
        "benchmark": v.get("benchmark"),
    }
    if not spec.keep_checkpoints:  # the loop's resume checkpoints: large, useless here
        for p in run_dir.glob("checkpoint*"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
    return record


# ------------------------------------------------------------------------- statistics


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good coverage at small n)."""
    if n <= 0:
        return (0.0, 1.0)
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (conservative) binomial interval."""
    if n <= 0:
        return (0.0, 1.0)
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return (lo, hi)


def rate_summary(records: list[dict[str, Any]], kinds: str | Iterable[str]) -> dict[str, Any]:
    """SUCCESS share of the finished runs of one scenario, or of several pooled."""
    wanted = {kinds} if isinstance(kinds, str) else set(kinds)
    mine = [r for r in records if r["kind"] in wanted]
    done = [r for r in mine if r["verdict"] != "ERROR"]
    k = sum(r["verdict"] == "SUCCESS" for r in done)
    n = len(done)
    return {
        "successes": k,
        "runs": n,
        "errors": len(mine) - n,
        "rate": k / n if n else None,
        "wilson95": wilson_interval(k, n),
        "clopper_pearson95": clopper_pearson_interval(k, n),
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def rate_line(label: str, what: str, s: dict[str, Any], target: str) -> str:
    wl, wh = s["wilson95"]
    cl, ch = s["clopper_pearson95"]
    return (
        f"{label}: {s['successes']}/{s['runs']} SUCCESS on {what} = {_pct(s['rate'])} "
        f"(95% CI Wilson {_pct(wl)}-{_pct(wh)}, Clopper-Pearson {_pct(cl)}-{_pct(ch)}); "
        f"target {target}"
    )


def _f(x: Any, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


_KIND_WIDTH = max(len(name) for name in SCENARIOS)


def _benchmark_part(r: dict[str, Any]) -> str:
    """The best variant against its benchmark, when the verdict had those figures."""
    alpha = r.get("best_alpha") or {}
    parts = []
    if alpha:
        parts.append(
            f"alpha {_f(alpha.get('alpha_annual_pct'), '.1f')}%/yr beta {_f(alpha.get('beta'))} "
            f"alpha t {_f(alpha.get('t_stat'))} deflated alpha "
            f"{_f(alpha.get('deflated_alpha'), '.3f')}"
        )
    if r.get("spa_pvalue") is not None:
        parts.append(f"SPA p {_f(r['spa_pvalue'], '.3f')}")
    return "  " + "  ".join(parts) if parts else ""


def run_line(r: dict[str, Any]) -> str:
    head = f"{r['kind']:<{_KIND_WIDTH}} #{r['index']:03d} seed {r['seed']:<7} {r['verdict']:<8}"
    if r["verdict"] == "ERROR":
        return f"{head} {r.get('error', '')} ({r['seconds']:.0f}s)"
    strength = r.get("strength") or {}
    rule = "reversion" if r.get("universe_kind") == "reversion" else "momentum"
    trades = "-" if r.get("best_trades") is None else str(r["best_trades"])
    return (
        f"{head} iters {r['iterations']:>2}  trials {r['n_trials']:>3}"
        + (f" ({r['n_trials_effective']} eff)" if r.get("n_trials_effective") is not None else "")
        + "  "
        f"best sharpe {_f(r['best_sharpe']):>5} trades {trades:>4} score {_f(r['best_score'])} "
        f"DSR {_f(r['best_dsr'], '.3f')}  holdout sharpe {_f(r['holdout_sharpe']):>5}"
        f"{_benchmark_part(r)}  (universe: {rule} rule sharpe "
        f"{_f(strength.get(f'portfolio_{rule}_long_sharpe'))}, buy&hold "
        f"{_f(strength.get('portfolio_buy_hold_sharpe'))}; {r['seconds']:.0f}s)"
    )


# ------------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        print(f"error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m swarm.calibrate", description=__doc__.split("\n\n")[0])
    # Accepted and ignored, so `python -m swarm.develop --calibrate ...` can pass its argv on.
    p.add_argument("--calibrate", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=20, help="runs per scenario (default 20)")
    p.add_argument(
        "--workers", type=int, default=None,
        help="runs in parallel (default: 1; each run's backtests share the cores)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a new temp dir)")
    p.add_argument(
        "--kinds", default=",".join(DEFAULT_SCENARIOS),
        help=f"comma list of scenarios (default all of {', '.join(DEFAULT_SCENARIOS)}; also "
        f"{', '.join(n for n in SCENARIOS if n not in DEFAULT_SCENARIOS)}; "
        + ", ".join(f"{a} = {n}" for a, n in ALIASES.items()) + ")",
    )  # fmt: skip
    p.add_argument("--symbols", type=int, default=3, help="symbols per universe (default 3)")
    p.add_argument("--years", type=float, default=8.0, help="years of bars (default 8)")
    p.add_argument(
        "--strength", type=float, default=UniverseSpec.regime_sharpe,
        help="planted momentum: annualised Sharpe of the hidden drift inside a regime "
        f"(default {UniverseSpec.regime_sharpe:g})",
    )  # fmt: skip
    p.add_argument(
        "--regime-days", type=float, default=UniverseSpec.regime_days,
        help="planted momentum: expected regime length in bars "
        f"(default {UniverseSpec.regime_days:g})",
    )  # fmt: skip
    p.add_argument(
        "--reversion-share", type=float, default=UniverseSpec.reversion_share,
        help="planted reversion: share of the daily variance that reverts "
        f"(default {UniverseSpec.reversion_share:g})",
    )  # fmt: skip
    p.add_argument(
        "--reversion-half-life", type=float, default=UniverseSpec.reversion_half_life,
        help="planted reversion: half-life of a deviation in bars "
        f"(default {UniverseSpec.reversion_half_life:g})",
    )  # fmt: skip
    p.add_argument(
        "--drift", type=float, default=None,
        help="override every scenario's expected annual return (default: the scenario's own)",
    )  # fmt: skip
    p.add_argument("--variants", type=int, default=None, help="develop --variants (default 5)")
    p.add_argument(
        "--max-iterations", type=int, default=None, help="develop --max-iterations (default 10)"
    )
    p.add_argument("--criteria", default=None, help="develop --criteria (default the lab's)")
    add_screen_arguments(p)  # develop's --screen-size / --no-screen / --deflate-by, passed on
    p.add_argument("--keep-checkpoints", action="store_true", help="keep each run's checkpoints")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def parse_kinds(text: str) -> list[str]:
    """Scenario names from a comma list (aliases resolved, duplicates dropped, order kept)."""
    names: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name = ALIASES.get(item, item)
        if name not in SCENARIOS:
            raise ValueError(
                f"--kinds: unknown scenario {item!r}; choose from {', '.join(SCENARIOS)} "
                f"(or {', '.join(ALIASES)})"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError(f"--kinds: {text!r} names no scenario; e.g. --kinds null-zero,null-bull")
    return names


def scenario_for(name: str, drift_override: float | None = None) -> Scenario:
    """The scenario as run: its own drift unless ``--drift`` overrides it."""
    s = SCENARIOS[ALIASES.get(name, name)]
    return s if drift_override is None else replace(s, drift_annual=drift_override)


def _plan(args: argparse.Namespace, out: Path) -> list[RunSpec]:
    names = parse_kinds(args.kinds)
    if not 1 <= args.runs <= MAX_RUNS:
        raise ValueError(f"--runs: {args.runs} must be between 1 and {MAX_RUNS}")
    if args.symbols < 1 or args.years < 2:
        raise ValueError("--symbols must be >= 1 and --years >= 2")
    workers = args.workers or 1
    if workers < 1:
        raise ValueError(f"--workers: {workers} must be at least 1")
    try:
        screen = screen_options(args)
    except UserInputError as exc:
        raise ValueError(str(exc)) from None
    options = LoopOptions(
        variants=args.variants, max_iterations=args.max_iterations, criteria=args.criteria or None,
        screen_size=screen["screen_size"], deflate_by=screen["deflate_by"],
    )  # fmt: skip
    per_run = max(1, (os.cpu_count() or 1) // workers)
    base = base_universe(args)
    specs = []
    for i in range(1, args.runs + 1):
        for name in names:  # interleaved, so partial results cover every scenario
            scenario = scenario_for(name, args.drift)
            seed = universe_seed(args.seed, name, i)
            universe = replace(
                base, kind=scenario.universe_kind, seed=seed, drift_annual=scenario.drift_annual,
                n_symbols=scenario.n_symbols or base.n_symbols,
            )  # fmt: skip
            specs.append(
                RunSpec(
                    kind=name,
                    index=i,
                    seed=seed,
                    universe=universe,
                    options=options,
                    out=out,
                    workers=per_run,
                    keep_checkpoints=args.keep_checkpoints,
                )
            )
    return specs


def base_universe(args: argparse.Namespace) -> UniverseSpec:
    """The options every scenario's universe shares (kind, seed and drift come per run)."""
    spec = UniverseSpec(
        n_symbols=args.symbols,
        years=args.years,
        start=date(2012, 1, 2),
        regime_sharpe=args.strength,
        regime_days=args.regime_days,
        reversion_share=args.reversion_share,
        reversion_half_life=args.reversion_half_life,
    )
    if not 0.0 < spec.reversion_share < 1.0:
        raise ValueError(f"--reversion-share: {spec.reversion_share} must be between 0 and 1")
    if spec.reversion_half_life <= 0:
        raise ValueError(f"--reversion-half-life: {spec.reversion_half_life} must be > 0")
    return spec


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        _plan(args, Path())  # every option checked before any folder is made
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # A temp dir by default: the synthetic data and the runs are throwaway.
    out = (args.out or Path(tempfile.mkdtemp(prefix="swarm-calibration-"))).resolve()
    specs = _plan(args, out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    workers = args.workers or 1
    names = parse_kinds(args.kinds)
    t0 = time.monotonic()
    _say(
        args.quiet,
        f"[calibrate] {len(specs)} runs ({args.runs} per scenario: {', '.join(names)}) "
        f"into {out}; {workers} in parallel, {specs[0].workers} backtest process(es) each"
        + (f"; every drift overridden to {args.drift:g}/yr" if args.drift is not None else ""),
    )
    records: list[dict[str, Any]] = []

    def collect(rec: dict[str, Any]) -> None:
        records.append(rec)
        print(run_line(rec), flush=True)
        elapsed = time.monotonic() - t0
        left = (len(specs) - len(records)) * elapsed / len(records)
        _say(
            args.quiet,
            f"[calibrate] {len(records)}/{len(specs)} done, {elapsed:.0f}s elapsed, "
            f"~{left:.0f}s left ({rec['kind']} #{rec['index']}: {rec['verdict']})",
        )

    def failed(spec: RunSpec, exc: BaseException) -> dict[str, Any]:
        return {
            "kind": spec.kind, "index": spec.index, "seed": spec.seed,
            "universe_kind": spec.universe.kind, "drift_annual": spec.universe.drift_annual,
            "verdict": "ERROR", "error": repr(exc), "seconds": 0.0,
        }  # fmt: skip

    if workers == 1:
        for spec in specs:
            try:
                collect(run_one(spec))
            except Exception as exc:  # one broken run must not lose the others
                collect(failed(spec, exc))
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_one, s): s for s in specs}
            for fut in as_completed(futures):
                try:
                    collect(fut.result())
                except Exception as exc:
                    collect(failed(futures[fut], exc))

    order = list(SCENARIOS)
    records.sort(key=lambda r: (r["index"], order.index(r["kind"])))
    summary = summarise(records, args, out, time.monotonic() - t0, base_universe(args))
    (out / "calibration.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print()
    for line in summary["lines"]:
        print(line)
    print(f"summary: {out / 'calibration.json'}")
    return 1 if any(r["verdict"] == "ERROR" for r in records) else 0


def _target_line(label: str, what: str, s: dict[str, Any], *, null: bool) -> str:
    if null:
        ok = s["rate"] is not None and s["rate"] <= TARGET_FDR
        target = f"<= {TARGET_FDR:.0%}"
    else:
        ok = s["rate"] is not None and s["rate"] >= TARGET_POWER
        target = f">= {TARGET_POWER:.0%}"
    return rate_line(label, what, s, target) + (" -> met" if ok else " -> NOT met")


def summarise(
    records: list[dict[str, Any]],
    args: argparse.Namespace,
    out: Path,
    seconds: float,
    universe: UniverseSpec,
) -> dict[str, Any]:
    """Per-scenario and pooled rates, the summary lines, and every run, for calibration.json.

    Null scenarios give false-discovery rates (target <= TARGET_FDR), planted ones power
    (target >= TARGET_POWER); the pooled lines appear once a side has two scenarios.
    """
    present = [n for n in SCENARIOS if any(r["kind"] == n for r in records)]
    scenarios = {n: scenario_for(n, args.drift) for n in present}
    rates = {n: rate_summary(records, n) for n in present}
    nulls = [n for n in present if scenarios[n].is_null]
    planted = [n for n in present if not scenarios[n].is_null]
    pooled_fdr = rate_summary(records, nulls) if nulls else None
    pooled_power = rate_summary(records, planted) if planted else None

    def what(n: str) -> str:
        return f"{n} ({scenarios[n].what})"

    lines = []
    for label, names, pooled, null in (
        ("false-discovery rate", nulls, pooled_fdr, True),
        ("power", planted, pooled_power, False),
    ):
        lines += [_target_line(label, what(n), rates[n], null=null) for n in names]
        if pooled is not None and len(names) > 1:
            side = "nulls" if null else "planted"
            lines.append(_target_line(label, f"all {side} (pooled)", pooled, null=null))
    lines.append(f"runtime: {seconds:.0f}s for {len(records)} runs")
    return {
        "created": datetime.now(UTC).isoformat(),
        "argv": sys.argv,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "directive": DEFAULT_DIRECTIVE,
        "universe": asdict(universe)
        | {"start": universe.start.isoformat(), "kind": None, "seed": None, "drift_annual": None},
        "scenarios": {
            n: {
                "universe_kind": sc.universe_kind,
                "drift_annual": sc.drift_annual,
                "null": sc.is_null,
                "edge": sc.edge,
            }
            for n, sc in scenarios.items()
        },
        "out": str(out),
        "seconds": round(seconds, 1),
        "rates": rates,
        "false_discovery": pooled_fdr,
        "power": pooled_power,
        "lines": lines,
        "runs": records,
    }


if __name__ == "__main__":
    sys.exit(main())
