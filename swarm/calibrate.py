"""python -m swarm.calibrate --runs N [--kinds A,B] [--workers W] [--seed S] [--out DIR]

Calibrates the quality gate: for i = 1..N and every scenario it generates a seeded universe
(``swarm.calibration.synthetic_universe``), runs the full develop loop on it (research swarm,
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
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gate.criteria import CRITERIA_HELP, CRITERIA_REPLACE_HELP
from swarm.calibration.jobs import LoopOptions, RunSpec, base_universe
from swarm.calibration.jobs import plan_runs as _plan
from swarm.calibration.report import (
    TARGET_FDR,
    TARGET_POWER,
    rate_line,
    run_line,
    summarise,
)
from swarm.calibration.resume import RECORDS, append_record, finished, other_source, plan_key
from swarm.calibration.runner import (
    LoopResult,
    failed_record,
    run_all,
    run_config,
    run_loop,
    run_one,
)
from swarm.calibration.scenarios import (
    ALIASES,
    DEFAULT_DIRECTIVE,
    DEFAULT_SCENARIOS,
    MAX_BASE_SEED,
    MAX_RUNS,
    SCENARIOS,
    SEED_STRIDE,
    Scenario,
    parse_kinds,
    scenario_for,
    universe_seed,
)
from swarm.calibration.stats import clopper_pearson_interval, rate_summary, wilson_interval
from swarm.calibration.synthetic_universe import UniverseSpec
from swarm.cli_args import add_screen_arguments

# The names this module has always offered (the tests and other callers import them here).
__all__ = [
    "ALIASES",
    "DEFAULT_DIRECTIVE",
    "DEFAULT_SCENARIOS",
    "MAX_BASE_SEED",
    "MAX_RUNS",
    "SCENARIOS",
    "SEED_STRIDE",
    "TARGET_FDR",
    "TARGET_POWER",
    "LoopOptions",
    "LoopResult",
    "RunSpec",
    "Scenario",
    "_plan",
    "base_universe",
    "build_parser",
    "clopper_pearson_interval",
    "failed_record",
    "main",
    "parse_kinds",
    "rate_line",
    "rate_summary",
    "run_all",
    "run_config",
    "run_line",
    "run_loop",
    "run_one",
    "scenario_for",
    "summarise",
    "universe_seed",
    "wilson_interval",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        print(f"error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The calibrate command's parser: runs per scenario, workers, seed, output and scenarios."""
    p = _Parser(prog="python -m swarm.calibrate", description=__doc__.split("\n\n")[0])
    # Accepted and ignored, so `python -m swarm.develop --calibrate ...` can pass its argv on.
    p.add_argument("--calibrate", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=20, help="runs per scenario (default 20)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="runs in parallel (default: 1; each run's backtests share the cores)",
    )
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a new temp dir)")
    p.add_argument(
        "--kinds",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma list of scenarios (default all of {', '.join(DEFAULT_SCENARIOS)}; also "
        f"{', '.join(n for n in SCENARIOS if n not in DEFAULT_SCENARIOS)}; "
        + ", ".join(f"{a} = {n}" for a, n in ALIASES.items())
        + ")",
    )
    _add_universe_arguments(p)
    p.add_argument("--variants", type=int, default=None, help="develop --variants (default 5)")
    p.add_argument(
        "--max-iterations", type=int, default=None, help="develop --max-iterations (default 10)"
    )
    p.add_argument(
        "--criteria", default=None, help="develop --criteria (default the lab's): " + CRITERIA_HELP
    )
    p.add_argument(
        "--criteria-replace",
        action="store_true",
        help="develop --criteria-replace: " + CRITERIA_REPLACE_HELP,
    )
    add_screen_arguments(p)  # develop's screen options (--screen-size ... --sampler, --param-space)
    p.add_argument(
        "--resume",
        action="store_true",
        help="finish the calibration in --out: its finished runs (records.jsonl, or run folders "
        "with a verdict on the same universe and options) are kept, the rest run",
    )
    p.add_argument(
        "--figures",
        action="store_true",
        help="draw each run's charts and tear sheet (off by default: ~30 s a run after its "
        "verdict, which they do not change)",
    )
    p.add_argument("--keep-checkpoints", action="store_true", help="keep each run's checkpoints")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _add_universe_arguments(p: argparse.ArgumentParser) -> None:
    """The synthetic universes' shape and the strength of each planted edge."""
    p.add_argument("--symbols", type=int, default=3, help="symbols per universe (default 3)")
    p.add_argument("--years", type=float, default=8.0, help="years of bars (default 8)")
    p.add_argument(
        "--strength",
        type=float,
        default=UniverseSpec.regime_sharpe,
        help="planted momentum: annualised Sharpe of the hidden drift inside a regime "
        f"(default {UniverseSpec.regime_sharpe:g})",
    )
    p.add_argument(
        "--regime-days",
        type=float,
        default=UniverseSpec.regime_days,
        help="planted momentum: expected regime length in bars "
        f"(default {UniverseSpec.regime_days:g})",
    )
    p.add_argument(
        "--reversion-share",
        type=float,
        default=UniverseSpec.reversion_share,
        help="planted reversion: share of the daily variance that reverts "
        f"(default {UniverseSpec.reversion_share:g})",
    )
    p.add_argument(
        "--reversion-half-life",
        type=float,
        default=UniverseSpec.reversion_half_life,
        help="planted reversion: half-life of a deviation in bars "
        f"(default {UniverseSpec.reversion_half_life:g})",
    )
    p.add_argument(
        "--earnings-strength",
        type=float,
        default=UniverseSpec.pead_sharpe,
        help="planted earnings drift: annualised Sharpe of the drift after a report whose "
        f"surprise is {UniverseSpec.pead_threshold_pct:g}%% or more either way, for "
        f"{UniverseSpec.pead_days} bars (default {UniverseSpec.pead_sharpe:g})",
    )
    p.add_argument(
        "--drift",
        type=float,
        default=None,
        help="override every scenario's expected annual return (default: the scenario's own)",
    )


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _out_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--out`` / ``--resume`` together, or None: a resume needs the
    folder, and a folder holding records is only ever finished, never mixed with new ones."""
    if args.resume and args.out is None:
        return "--resume: no --out given; pass --out DIR, the folder of the calibration to finish"
    if args.resume and not args.out.is_dir():
        return f"--resume: {args.out} is not a folder; pass the --out of the calibration to finish"
    if not args.resume and args.out is not None and (args.out / RECORDS).exists():
        return (
            f"--out: {args.out} holds a calibration's records ({RECORDS}); add --resume to "
            "finish it, or choose another --out"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    """CLI: run every scenario's seeded runs, a line per run, then the rates against their targets;
    2 on bad options."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        _plan(args, Path())  # every option checked before any folder is made
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = _out_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    # A temp dir by default: the synthetic data and the runs are throwaway.
    out = (args.out or Path(tempfile.mkdtemp(prefix="swarm-calibration-"))).resolve()
    planned = _plan(args, out)
    out.mkdir(parents=True, exist_ok=True)
    done = finished(planned, out) if args.resume else {}
    specs = [s for s in planned if plan_key(s) not in done]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    workers = args.workers or 1
    names = parse_kinds(args.kinds)
    t0 = time.monotonic()
    _say(
        args.quiet,
        f"[calibrate] {len(specs)} runs ({args.runs} per scenario: {', '.join(names)}) "
        f"into {out}; {workers} in parallel, {planned[0].workers} backtest process(es) each"
        + (f"; every drift overridden to {args.drift:g}/yr" if args.drift is not None else ""),
    )
    records: list[dict[str, Any]] = list(done.values())
    if args.resume:
        _say(args.quiet, f"[calibrate] resuming: {len(done)} of {len(planned)} runs already done")
        other = other_source(done.values())
        if other:
            _say(False, f"[calibrate] warning: {other}")
        for rec in records:
            print(run_line(rec), flush=True)
    by_run = {(s.kind, s.index): s for s in specs}

    def collect(rec: dict[str, Any]) -> None:
        records.append(rec)
        append_record(out, by_run[(rec["kind"], rec["index"])], rec)
        print(run_line(rec), flush=True)
        elapsed = time.monotonic() - t0
        ran = len(records) - len(done)
        left = (len(specs) - ran) * elapsed / ran
        _say(
            args.quiet,
            f"[calibrate] {len(records)}/{len(planned)} done, {elapsed:.0f}s elapsed, "
            f"~{left:.0f}s left ({rec['kind']} #{rec['index']}: {rec['verdict']})",
        )

    if specs:
        run_all(specs, workers, collect)

    order = list(SCENARIOS)
    records.sort(key=lambda r: (r["index"], order.index(r["kind"])))
    summary = summarise(records, args, out, time.monotonic() - t0, base_universe(args))
    (out / "calibration.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print()
    for line in summary["lines"]:
        print(line)
    print(f"summary: {out / 'calibration.json'}")
    return 1 if any(r["verdict"] == "ERROR" for r in records) else 0


if __name__ == "__main__":
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
