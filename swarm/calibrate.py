"""python -m swarm.calibrate --runs N [--workers W] [--seed S] [--out DIR]

Calibrates the quality gate: for i = 1..N it generates a seeded no-edge universe and a
seeded planted-edge universe (``backtest.synthetic_universe``), runs the full develop loop
on each (research swarm, strategy development, backtests, gate, routing: the same code path
as ``python -m swarm.develop``, fed through the CSV source), and reports

- the false-discovery rate: share of SUCCESS verdicts on no-edge data, and
- the power: share of SUCCESS verdicts on planted-edge data,

each with 95% confidence intervals (Wilson and Clopper-Pearson), one line per run on
stdout, progress on stderr, and ``calibration.json`` in the output folder.
Exit codes: 0 when every run finished (targets met or not), 1 when a run failed
internally, 2 on bad input. Also reachable as ``python -m swarm.develop --calibrate ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from backtest.synthetic_universe import UniverseSpec, write_universe

KINDS = ("null", "planted")
TARGET_FDR = 0.05
TARGET_POWER = 0.90
DEFAULT_DIRECTIVE = "momentum alpha"
SEED_STRIDE = 10_007  # keeps the seed blocks of different --seed values apart


@dataclass(frozen=True)
class RunSpec:
    kind: str
    index: int  # 1-based within its kind
    seed: int  # universe seed and the develop loop's --seed
    universe: UniverseSpec
    develop_args: tuple[str, ...]  # extra develop options (criteria, variants, iterations...)
    out: Path
    workers: int  # backtest processes of this run
    keep_checkpoints: bool = False


def universe_seed(base_seed: int, kind: str, index: int) -> int:
    """Distinct, reproducible seeds: no-edge and planted universes never share one."""
    return base_seed * SEED_STRIDE + 2 * index + (0 if kind == "null" else 1)


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Generate one universe, run the develop loop on it, return the verdict's essentials."""
    from swarm.develop import main as develop_main

    t0 = time.monotonic()
    name = f"{spec.kind}-{spec.index:03d}"
    data_dir = spec.out / "data" / name
    meta = write_universe(spec.universe, data_dir)
    argv = [
        "--directive", DEFAULT_DIRECTIVE,
        "--tickers", ",".join(meta["symbols"]),
        "--data-dir", str(data_dir),
        "--source", "csv",
        "--offline",
        "--start", meta["start"],
        "--end", meta["end"],
        "--seed", str(spec.seed),
        "--out", str(spec.out / "runs" / name),
        "--workers", str(spec.workers),
        "--quiet",
        *spec.develop_args,
    ]  # fmt: skip
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = develop_main(argv)
    lines = [ln for ln in stdout.getvalue().splitlines() if ln.strip()]
    run_dir = Path(lines[-1]) if lines else None
    record: dict[str, Any] = {
        "kind": spec.kind,
        "index": spec.index,
        "seed": spec.seed,
        "exit_code": code,
        "run_dir": str(run_dir) if run_dir else None,
        "strength": meta["strength"],
        "seconds": round(time.monotonic() - t0, 1),
    }
    verdict_path = run_dir / "verdict.json" if run_dir else None
    if code != 0 or verdict_path is None or not verdict_path.exists():
        record["verdict"] = "ERROR"
        record["error"] = (stderr.getvalue().strip().splitlines() or ["no verdict written"])[-1]
        return record
    v = json.loads(verdict_path.read_text(encoding="utf-8"))
    figures = v.get("figures") or {}
    insample = (figures.get("in-sample") or {}).get("metrics") or {}
    holdout = (figures.get("holdout") or {}).get("metrics") or {}
    record |= {
        "verdict": v["verdict"],
        "iterations": v.get("iterations"),
        "n_trials": v.get("n_trials"),
        "best_variant": v.get("best_variant"),
        "best_score": v.get("best_score"),
        "best_dsr": v.get("best_dsr"),
        "best_dsr_all_trials": v.get("best_dsr_all_trials"),
        "best_sharpe": insample.get("sharpe"),
        "best_trades": insample.get("n_trades"),
        "holdout_sharpe": holdout.get("sharpe"),
        "route_history": v.get("route_history"),
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


def rate_summary(records: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    done = [r for r in records if r["kind"] == kind and r["verdict"] != "ERROR"]
    k = sum(r["verdict"] == "SUCCESS" for r in done)
    n = len(done)
    return {
        "successes": k,
        "runs": n,
        "errors": sum(r["kind"] == kind and r["verdict"] == "ERROR" for r in records),
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


def run_line(r: dict[str, Any]) -> str:
    head = f"{r['kind']:<7} #{r['index']:03d} seed {r['seed']:<7} {r['verdict']:<8}"
    if r["verdict"] == "ERROR":
        return f"{head} {r.get('error', '')} ({r['seconds']:.0f}s)"
    strength = r.get("strength") or {}
    trades = "-" if r.get("best_trades") is None else str(r["best_trades"])
    return (
        f"{head} iters {r['iterations']:>2}  trials {r['n_trials']:>3}  "
        f"best sharpe {_f(r['best_sharpe']):>5} trades {trades:>4} score {_f(r['best_score'])} "
        f"DSR {_f(r['best_dsr'], '.3f')}  holdout sharpe {_f(r['holdout_sharpe']):>5}  "
        f"(universe momentum-rule sharpe "
        f"{_f(strength.get('portfolio_momentum_long_sharpe'))}; {r['seconds']:.0f}s)"
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
    p.add_argument("--runs", type=int, default=20, help="runs per kind (default 20)")
    p.add_argument(
        "--workers", type=int, default=None,
        help="runs in parallel (default: 1; each run's backtests share the cores)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a new temp dir)")
    p.add_argument("--kinds", default="null,planted", help="null,planted (default both)")
    p.add_argument("--symbols", type=int, default=3, help="symbols per universe (default 3)")
    p.add_argument("--years", type=float, default=8.0, help="years of bars (default 8)")
    p.add_argument(
        "--strength", type=float, default=UniverseSpec.regime_sharpe,
        help="planted edge: annualised Sharpe of the hidden drift inside a regime "
        f"(default {UniverseSpec.regime_sharpe:g})",
    )  # fmt: skip
    p.add_argument(
        "--regime-days", type=float, default=UniverseSpec.regime_days,
        help=f"planted edge: expected regime length in bars (default {UniverseSpec.regime_days:g})",
    )  # fmt: skip
    p.add_argument(
        "--drift", type=float, default=0.0,
        help="common expected annual return of every universe (default 0: no edge)",
    )  # fmt: skip
    p.add_argument("--variants", type=int, default=None, help="develop --variants (default 5)")
    p.add_argument(
        "--max-iterations", type=int, default=None, help="develop --max-iterations (default 10)"
    )
    p.add_argument("--criteria", default=None, help="develop --criteria (default the lab's)")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep each run's checkpoints")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _plan(args: argparse.Namespace, out: Path) -> list[RunSpec]:
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"--kinds: {args.kinds!r}; use null, planted or null,planted")
    if args.runs < 1:
        raise ValueError(f"--runs: {args.runs} must be at least 1")
    if args.symbols < 1 or args.years < 2:
        raise ValueError("--symbols must be >= 1 and --years >= 2")
    workers = args.workers or 1
    if workers < 1:
        raise ValueError(f"--workers: {workers} must be at least 1")
    extra: list[str] = []
    if args.variants is not None:
        extra += ["--variants", str(args.variants)]
    if args.max_iterations is not None:
        extra += ["--max-iterations", str(args.max_iterations)]
    if args.criteria:
        extra += ["--criteria", args.criteria]
    per_run = max(1, (os.cpu_count() or 1) // workers)
    base = UniverseSpec(
        n_symbols=args.symbols,
        years=args.years,
        start=date(2012, 1, 2),
        drift_annual=args.drift,
        regime_sharpe=args.strength,
        regime_days=args.regime_days,
    )
    specs = []
    for i in range(1, args.runs + 1):
        for kind in kinds:  # interleaved, so partial results cover both kinds
            seed = universe_seed(args.seed, kind, i)
            specs.append(
                RunSpec(
                    kind=kind,
                    index=i,
                    seed=seed,
                    universe=replace(base, kind=kind, seed=seed),  # type: ignore[arg-type]
                    develop_args=tuple(extra),
                    out=out,
                    workers=per_run,
                    keep_checkpoints=args.keep_checkpoints,
                )
            )
    return specs


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    # A temp dir by default: the synthetic data and the runs are throwaway.
    out = (args.out or Path(tempfile.mkdtemp(prefix="swarm-calibration-"))).resolve()
    try:
        specs = _plan(args, out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    workers = args.workers or 1
    t0 = time.monotonic()
    _say(
        args.quiet,
        f"[calibrate] {len(specs)} runs ({args.runs} per kind: {args.kinds}) into {out}; "
        f"{workers} in parallel, {specs[0].workers} backtest process(es) each",
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
            "kind": spec.kind, "index": spec.index, "seed": spec.seed, "verdict": "ERROR",
            "error": repr(exc), "seconds": 0.0,
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

    records.sort(key=lambda r: (r["index"], r["kind"]))
    summary = summarise(records, args, out, time.monotonic() - t0, specs[0].universe)
    (out / "calibration.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print()
    for line in summary["lines"]:
        print(line)
    print(f"summary: {out / 'calibration.json'}")
    return 1 if any(r["verdict"] == "ERROR" for r in records) else 0


def summarise(
    records: list[dict[str, Any]],
    args: argparse.Namespace,
    out: Path,
    seconds: float,
    universe: UniverseSpec,
) -> dict[str, Any]:
    kinds = [k for k in KINDS if any(r["kind"] == k for r in records)]
    rates = {k: rate_summary(records, k) for k in kinds}
    lines = []
    if "null" in rates:
        s = rates["null"]
        ok = s["rate"] is not None and s["rate"] <= TARGET_FDR
        lines.append(
            rate_line("false-discovery rate", "no-edge data", s, f"<= {TARGET_FDR:.0%}")
            + (" -> met" if ok else " -> NOT met")
        )
    if "planted" in rates:
        s = rates["planted"]
        ok = s["rate"] is not None and s["rate"] >= TARGET_POWER
        lines.append(
            rate_line("power", "planted-edge data", s, f">= {TARGET_POWER:.0%}")
            + (" -> met" if ok else " -> NOT met")
        )
    lines.append(f"runtime: {seconds:.0f}s for {len(records)} runs")
    return {
        "created": datetime.now(UTC).isoformat(),
        "argv": sys.argv,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "directive": DEFAULT_DIRECTIVE,
        "universe": asdict(universe)
        | {"start": universe.start.isoformat(), "kind": None, "seed": None},
        "out": str(out),
        "seconds": round(seconds, 1),
        "false_discovery": rates.get("null"),
        "power": rates.get("planted"),
        "lines": lines,
        "runs": records,
    }


if __name__ == "__main__":
    sys.exit(main())
