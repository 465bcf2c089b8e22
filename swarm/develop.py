"""python -m swarm.develop --directive "momentum alpha in tech"

Runs the whole loop — research swarm, strategy development, parallel backtests,
quality gate, routing — to a verdict, and prints the run folder's path last.
Exit codes: 0 on any verdict, 2 on bad input (one line saying what to fix),
1 on an internal failure (the run folder is kept, with error.json).

    python -m swarm.develop --resume RUN_DIR

continues an interrupted run (killed, crashed, Ctrl-C) from its last checkpoint, with
the config recorded in its manifest; a finished run is only reported.

From Python, ``from swarm import develop; develop(directive=..., **options)`` runs the same
loop and returns the run's ``experiments.run_result.RunResult``; it never exits, it raises
the errors whose messages the CLI prints (``swarm.errors``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backtest.cli_args import BORROW_HELP, borrow_pct
from swarm.api_options import namespace_of
from swarm.cli_args import OneLineParser, add_data_arguments, add_screen_arguments
from swarm.develop_config import config_from_args
from swarm.errors import RunFailedError, RunInterrupted, UserInputError
from swarm.llm.cli_args import LLMHelp, add_llm_arguments

if TYPE_CHECKING:
    from experiments.run_result import RunResult
    from swarm.run import Outcome, Prepared

__all__ = ["RESUME_COMPATIBLE", "build_parser", "config_from_args", "develop", "main"]


def _family_names() -> str:
    from strategies.regime import REGIME_FILTERS
    from swarm.families import registry

    return ", ".join([*registry().known(), *REGIME_FILTERS])


def build_parser() -> argparse.ArgumentParser:
    """The develop command's parser, its arguments added by concern in --help order."""
    p = OneLineParser(prog="python -m swarm.develop", description=__doc__.split("\n\n")[0])
    _add_search_arguments(p)
    add_screen_arguments(p)
    _add_gate_and_cost_arguments(p)
    _add_validation_arguments(p)
    _add_execution_arguments(p)
    add_llm_arguments(p, LLM_HELP)
    _add_mode_arguments(p)
    return p


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    """What to look for, where, and how wide the search is."""
    p.add_argument("--directive", help='what to look for, e.g. "momentum alpha in tech"')
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue an interrupted run from its last checkpoint (config from its manifest; "
        "only --workers and --quiet may be given with it)",
    )
    p.add_argument("--tickers", help="comma-separated symbols; overrides the directive's universe")
    add_data_arguments(p)
    p.add_argument(
        "--variants", type=int, default=5, help="strategy variants per iteration (default 5)"
    )
    p.add_argument("--max-iterations", type=int, default=10, help="iteration limit (default 10)")
    p.add_argument(
        "--families",
        help="comma-separated families to try, e.g. decision_pipeline (the analyst -> debate "
        "-> trader -> risk pipeline replayed weekly) or momentum,trend (default: all block "
        "families; a directive saying 'analyst', 'debate' or 'agents decide' names the pipeline); "
        "index_regime / vix_regime ask for the regime filter (SPY.csv, QQQ.csv / VIX.csv in "
        "--data-dir), like 'regime filtered' in the directive. Choices: " + _family_names(),
    )
    p.add_argument(
        "--decision-cache",
        type=Path,
        help="the decision pipeline's cache (default: the user cache dir, shared by runs)",
    )
    p.add_argument("--folds", type=int, default=3, help="walk-forward folds in-sample (default 3)")


def _add_gate_and_cost_arguments(p: argparse.ArgumentParser) -> None:
    """Prices, the gate's criteria and benchmark, costs and sizing."""
    from gate.criteria import CRITERIA_HELP, CRITERIA_REPLACE_HELP

    p.add_argument(
        "--prices",
        default="raw",
        help="raw (default: split-adjusted, no dividends) or adjusted (total return from "
        "adj_close, OHLC scaled by the same factor)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="mend broken bars instead of refusing them (exit 2 without it): drop rows with a "
        "non-positive price and earlier copies of a repeated date, widen high/low to hold "
        "open/close; each change is printed and kept in manifest.json and report.md",
    )
    p.add_argument("--criteria", help=CRITERIA_HELP)
    p.add_argument("--criteria-replace", action="store_true", help=CRITERIA_REPLACE_HELP)
    p.add_argument(
        "--benchmark",
        help="what a pass must beat: buy-and-hold (default: the universe, equal weight), a "
        "symbol such as SPY, or cash (the absolute test); a directive may say 'vs SPY', "
        "'absolute return' or 'market neutral'",
    )
    p.add_argument(
        "--commission", type=float, default=0.1, help="commission %% per side (default 0.1)"
    )
    p.add_argument(
        "--slippage", type=float, default=0.05, help="slippage %% per side (default 0.05)"
    )
    p.add_argument("--borrow-cost", type=borrow_pct, default=0.0, help=BORROW_HELP)
    p.add_argument(
        "--sizing",
        help="fix the position sizing of every catalogue strategy the run writes: BLOCK or "
        "BLOCK:FRACTION, BLOCK fixed_fraction, fixed_risk or volatility_target, FRACTION the "
        "share of equity a position may take (0.1..0.95, steps of 0.05), e.g. "
        "fixed_fraction:0.5 (default: the search chooses; swarm.sizing)",
    )


def _add_validation_arguments(p: argparse.ArgumentParser) -> None:
    """How the search's choice is validated besides the walk-forward folds."""
    from gate.cpcv import N_GROUPS, N_TEST_GROUPS

    p.add_argument(
        "--validation",
        default="walk-forward",
        help="walk-forward (default: the folds alone) or cpcv: also the combinatorial purged "
        "cross-validation of the search's choice over the run's trials (the paths' Sharpe "
        "distribution in verdict.json, report.md and charts/cpcv_sharpes.png)",
    )
    p.add_argument(
        "--cpcv-groups",
        type=int,
        default=N_GROUPS,
        help=f"with --validation cpcv: contiguous groups of the in-sample dates (default {N_GROUPS})",
    )
    p.add_argument(
        "--cpcv-test-groups",
        type=int,
        default=N_TEST_GROUPS,
        help="with --validation cpcv: groups each split tests, 1 .. groups - 1 "
        f"(default {N_TEST_GROUPS})",
    )


def _add_execution_arguments(p: argparse.ArgumentParser) -> None:
    """Where backtests run, the seed, and where runs and memory go."""
    p.add_argument(
        "--workers", type=int, default=None, help="backtest processes (default: all cores)"
    )
    p.add_argument(
        "--executor",
        default="process",
        help="process (default), serial, or ray (pip install '.[ray]')",
    )
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local one)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--out", type=Path, default=Path("runs"), help="where run folders go (default ./runs)"
    )
    p.add_argument(
        "--memory-dir",
        help="research memory store (default: the user cache dir, shared by runs); 'off' "
        "disables it. Memory is an input: exact reproduction needs the same memory state",
    )
    p.add_argument(
        "--ledger-dir",
        help="the trial ledger across runs (default: the user data dir): every run on the same "
        "data (symbols' files, window, timeframe, prices) is counted, and the deflated Sharpe "
        "and alpha count the earlier runs' trials too; 'off' neither reads nor records it",
    )
    p.add_argument(
        "--fresh-ledger",
        action="store_true",
        help="do not count earlier runs on this data (the report says so); the run is still "
        "recorded for the runs after it",
    )
    p.add_argument(
        "--no-figures",
        action="store_true",
        help="draw no charts and no tear sheet (report.md says so): faster batch runs; the "
        "verdict and every figure in it are the same",
    )


LLM_HELP = LLMHelp(
    llm="none (default: rules brains only), openai:MODEL or openai-compatible:MODEL",
    base_url="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1",
    quick="model for the 15 research subagents (default: --llm's)",
    deep="model for synthesis, strategy development, failure analysis",
    structured="structured-output method: auto (default), json_schema or function_calling",
    budget="token budget for the run (ABANDON when spent)",
    output="per-call output limit (default 512)",
    cache="shared record/replay cache (default: in the run)",
    mask="mask LLM prompts (aliases, day offsets, scrubbed names); default: on when the "
    "data starts before the model's cutoff; --no-mask: off (the report carries a banner)",
    cutoff="the model's knowledge cutoff (default: documented per model family; unknown "
    "models are assumed to know every date)",
)


def _add_mode_arguments(p: argparse.ArgumentParser) -> None:
    """Modes that change what the command does: dry run, graph, calibration."""
    p.add_argument(
        "--allow-universe-expansion",
        action="store_true",
        help="a RESEARCH round may add related symbols from --data-dir (same sector, the "
        "index ETFs) to the universe; the report says so",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved plan as JSON (universe, timeframe, dates, families, benchmark, "
        "scope, words understood and ignored) and exit without running anything",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--print-graph", action="store_true", help="print the graph as mermaid and exit")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="calibrate the gate on seeded synthetic universes (three no-edge markets: zero "
        "drift, 5%%, 20%% a year; two planted edges): --calibrate --runs N [--kinds A,B] "
        "[--workers W] [--seed S] [--out DIR] (see python -m swarm.calibrate --help)",
    )


def develop(directive: str | None = None, **options: Any) -> RunResult:
    """Run the loop from Python and return the run folder's typed result; never exits.

    Options are the CLI's flags in snake_case (``python -m swarm.develop --help``):
    ``tickers`` (a list or "AAPL,MSFT"), ``data_dir``, ``start``/``end`` (ISO text or dates),
    ``variants``, ``max_iterations``, ``no_screen=True``, ``seed``, ``out``, ``memory_dir``,
    ``llm``, ``quiet``... Raises ``UserInputError`` on bad input (the CLI's exit 2, same
    message), ``RunFailedError`` on an internal failure (exit 1: the folder is kept, with
    error.json) and ``RunInterrupted`` (a KeyboardInterrupt) naming the folder to resume.
    """
    given = options if directive is None else {"directive": directive, **options}
    args, argv = namespace_of(build_parser(), given, api="develop")
    # Worker processes inherit it: the CLI sets it too, so a run is the same from both.
    os.environ.setdefault("PYTHONHASHSEED", "0")
    try:
        prepared = _prepare_new(args, argv)
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        raise RunInterrupted(NOT_STARTED) from None
    assert prepared is not None  # the API has no dry run
    _execute(prepared)
    from experiments.run_result import load_run

    return load_run(prepared.run.root)


NOT_STARTED = "interrupted before the run started: nothing to resume; run the same command again"


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 done, 2 bad input, 130 interrupted, 1 internal failure; --calibrate hands over to
    swarm.calibrate."""
    argv = sys.argv[1:] if argv is None else argv
    if "--calibrate" in argv:  # the gate's calibration has its own options
        from swarm.calibrate import main as calibrate_main

        return calibrate_main(argv)
    try:
        args = build_parser().parse_args(argv)
        if args.print_graph:
            from swarm.graph import mermaid

            print(mermaid())
            return 0
        prepared = (
            _prepare_resume(args, argv) if args.resume is not None else _prepare_new(args, argv)
        )
        if prepared is None:  # --dry-run: the plan is printed
            return 0
        outcome = _execute(prepared)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as exc:
        print(exc, file=sys.stderr)
        if exc.run_dir is not None:
            print(exc.run_dir)
        return 130
    except KeyboardInterrupt:  # while parsing or checking: no run folder yet
        print(NOT_STARTED, file=sys.stderr)
        return 130
    except RunFailedError as exc:
        print(exc, file=sys.stderr)
        print(exc.run_dir)
        return 1
    root = prepared.run.root
    if outcome.already_finished:
        verdict = outcome.state.get("verdict")
        print(
            f"run already finished: {verdict.verdict if verdict else '?'} after "
            f"{verdict.iterations if verdict else '?'} iteration(s); nothing to resume",
            file=sys.stderr,
        )
    print(root)
    return 0


def _prepare_new(args: argparse.Namespace, argv: list[str]) -> Prepared | None:
    """Every argument checked, data loaded, the run folder made; None on --dry-run."""
    config, criteria = config_from_args(args)
    if not args.quiet:
        for note in (config.plan or {}).get("notes", []):
            print(f"[plan] {note}", file=sys.stderr)
    if args.dry_run:  # the plan, and which alternative data the research would read
        alt = {"alt_data": str(config.alt_data) if config.alt_data else None}
        if config.alt_data is not None:
            alt["alt_data_found"] = config.alt_data_found
        print(json.dumps({**(config.plan or {}), **alt}, indent=2))
        return None
    from swarm.run import prepare

    return prepare(config, criteria, argv=argv, quiet=args.quiet)


def _prepare_resume(args: argparse.Namespace, argv: list[str]) -> Prepared:
    _check_resume_args(argv)
    if args.workers is not None and args.workers < 1:
        raise UserInputError(f"--workers: {args.workers} must be at least 1")
    from swarm.run import prepare_resume

    return prepare_resume(args.resume, quiet=args.quiet, workers=args.workers)


def _execute(prepared: Prepared) -> Outcome:
    """Run the graph; an interrupt or a crash leaves the folder resumable and says how."""
    from swarm.run import execute

    root = prepared.run.root
    if prepared.resumed:
        _set_aside_error(root)
    try:
        return execute(prepared)
    except KeyboardInterrupt:
        raise RunInterrupted(
            f"interrupted: {_saved(root)}; continue with `python -m swarm.develop --resume {root}`",
            root,
        ) from None
    except UserInputError:  # found only once the checkpoint is read (e.g. on --resume)
        raise
    except Exception as exc:  # an internal failure: keep the folder and say where it is
        prepared.run.write_json(
            "error.json", {"error": repr(exc), "traceback": traceback.format_exc()}
        )
        raise RunFailedError(root, exc) from exc


RESUME_COMPATIBLE = ("--resume", "--workers", "--quiet")


def _check_resume_args(argv: list[str]) -> None:
    """A resumed run keeps its recorded config: other options would silently not apply."""
    extra = sorted({a.split("=")[0] for a in argv if a.startswith("--")} - set(RESUME_COMPATIBLE))
    if extra:
        raise UserInputError(
            f"--resume: {', '.join(extra)} cannot be changed on resume (the run's config is "
            "in its manifest.json); give only --resume RUN_DIR [--workers N] [--quiet]"
        )


def _saved(root: Path) -> str:
    """What an interrupted run leaves for --resume, said in one phrase."""
    from swarm.run_checkpoint import CHECKPOINT_FILE

    try:
        with (root / "experiments.jsonl").open("rb") as fh:
            records = sum(1 for line in fh if line.strip())
    except OSError:
        records = 0
    if not (root / CHECKPOINT_FILE).exists():
        return f"the manifest is saved in {root}, no checkpoint yet (a resume starts over)"
    return f"{records} experiment record(s) and the last checkpoint are saved in {root}"


def _set_aside_error(root: Path) -> None:
    """A previous crash's error.json is history once the run continues: keep it, renamed."""
    error = root / "error.json"
    if error.exists():
        n = 1
        while (root / f"error.{n}.json").exists():
            n += 1
        error.rename(root / f"error.{n}.json")


class _CallableModule(types.ModuleType):
    """``from swarm import develop`` meets this module, not the function, once the module is
    imported (a package's submodule attribute shadows its lazy names), so the module itself
    runs ``develop`` when called: the same object and the same call either way."""

    def __call__(self, directive: str | None = None, **options: Any) -> RunResult:
        return develop(directive, **options)


_CallableModule.__call__.__doc__ = develop.__doc__
sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
