"""python -m swarm.develop --directive "momentum alpha in tech"

Runs the whole loop — research swarm, strategy development, parallel backtests,
quality gate, routing — to a verdict, and prints the run folder's path last.
Exit codes: 0 on any verdict, 2 on bad input (one line saying what to fix),
1 on an internal failure (the run folder is kept, with error.json).

    python -m swarm.develop --resume RUN_DIR

continues an interrupted run (killed, crashed, Ctrl-C) from its last checkpoint, with
the config recorded in its manifest; a finished run is only reported.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from pathlib import Path

from swarm.cli_args import (
    OneLineParser,
    add_data_arguments,
    add_screen_arguments,
    check_data_args,
    parse_tickers,
    screen_options,
)
from swarm.errors import UserInputError
from swarm.llm.settings import parse_llm_arg


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m swarm.develop", description=__doc__.split("\n\n")[0])
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
        "--data-dir), like 'regime filtered' in the directive",
    )
    p.add_argument(
        "--decision-cache",
        type=Path,
        help="the decision pipeline's cache (default: the user cache dir, shared by runs)",
    )
    p.add_argument("--folds", type=int, default=3, help="walk-forward folds in-sample (default 3)")
    add_screen_arguments(p)
    p.add_argument(
        "--prices",
        default="raw",
        help="raw (default: split-adjusted, no dividends) or adjusted (total return from "
        "adj_close, OHLC scaled by the same factor)",
    )
    p.add_argument(
        "--criteria", help='gate criteria, e.g. "sharpe>=1.0,max_drawdown_pct<=20,min_trades>=30"'
    )
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
        "--llm",
        default="none",
        help="none (default: rules brains only), openai:MODEL or openai-compatible:MODEL",
    )
    p.add_argument("--llm-base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    p.add_argument(
        "--llm-quick-model", help="model for the 15 research subagents (default: --llm's)"
    )
    p.add_argument(
        "--llm-deep-model", help="model for synthesis, strategy development, failure analysis"
    )
    p.add_argument(
        "--llm-structured",
        default="auto",
        help="structured-output method: auto (default), json_schema or function_calling",
    )
    p.add_argument(
        "--max-llm-tokens", type=int, help="token budget for the run (ABANDON when spent)"
    )
    p.add_argument(
        "--llm-max-output-tokens", type=int, default=512, help="per-call output limit (default 512)"
    )
    p.add_argument(
        "--llm-cache", type=Path, help="shared record/replay cache (default: in the run)"
    )
    p.add_argument(
        "--allow-universe-expansion",
        action="store_true",
        help="a RESEARCH round may add related symbols from --data-dir (same sector, the "
        "index ETFs) to the universe; the report says so",
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
    return p


def config_from_args(args: argparse.Namespace):
    """Validate every argument up front, so bad input never creates a half run."""
    from gate.criteria import parse_criteria
    from gate.errors import CriteriaError
    from swarm.config import RunConfig
    from swarm.directive import parse_directive

    directive = (args.directive or "").strip()
    if not directive:
        raise UserInputError(
            '--directive: empty; say what to look for, e.g. "momentum alpha in tech"'
        )
    plan = parse_directive(directive)
    tickers, universe_source = plan.tickers, plan.universe_source
    if args.tickers is not None:
        tickers = parse_tickers(args.tickers)
        universe_source = "--tickers"
    start, end = check_data_args(args)
    if args.variants < 1:
        raise UserInputError(f"--variants: {args.variants} must be at least 1 (default 5)")
    if args.max_iterations < 1:
        raise UserInputError(
            f"--max-iterations: {args.max_iterations} must be at least 1 (default 10)"
        )
    if not 1 <= args.folds <= 10:
        raise UserInputError(f"--folds: {args.folds} must be between 1 and 10 (default 3)")
    if args.prices not in ("raw", "adjusted"):
        raise UserInputError(f"--prices: {args.prices!r}; use raw (default) or adjusted")
    if args.commission < 0 or args.slippage < 0:
        raise UserInputError(
            "--commission/--slippage: costs are percentages and cannot be negative"
        )
    if args.workers is not None and args.workers < 1:
        raise UserInputError(f"--workers: {args.workers} must be at least 1")
    if args.executor not in ("process", "serial", "ray"):
        raise UserInputError(f"--executor: {args.executor!r}; use process, serial or ray")
    if args.executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UserInputError(
                "--executor ray: Ray is not installed; pip install '.[ray]'"
            ) from None
    if args.max_llm_tokens is not None and args.max_llm_tokens < 1:
        raise UserInputError(f"--max-llm-tokens: {args.max_llm_tokens} must be at least 1")
    try:
        llm_settings = parse_llm_arg(
            args.llm,
            base_url=args.llm_base_url,
            quick_model=args.llm_quick_model,
            deep_model=args.llm_deep_model,
            structured=args.llm_structured,
            max_tokens=args.max_llm_tokens,
            cache_dir=args.llm_cache.resolve() if args.llm_cache else None,
            max_output_tokens=args.llm_max_output_tokens,
        )
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    if llm_settings.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
        raise UserInputError("--llm openai:…: set OPENAI_API_KEY, or use --llm none")
    try:
        criteria = parse_criteria(args.criteria)
    except CriteriaError as exc:
        raise UserInputError(f"--criteria: {exc}") from None
    benchmark = _benchmark(args.benchmark, plan.benchmark)
    families = _families(args.families, plan.preferred_families)
    _check_portfolio_universe(families, tickers)
    from strategies.regime import REGIME_FILTERS, REGIME_STYLE
    from swarm.regime_data import check_regime_data

    # A regime filter named in --families is a style, as the directive's phrases make it.
    styles = list(dict.fromkeys([*plan.preferred_families,
                                 *(f for f in families if f in REGIME_FILTERS)]))  # fmt: skip
    families = [f for f in families if f not in REGIME_FILTERS or f == REGIME_STYLE]
    check_regime_data(  # a regime filter asked for needs its index files (swarm.regime_data)
        styles, data_dir=args.data_dir, source=args.source, timeframe=args.timeframe,
    )  # fmt: skip
    config = RunConfig(
        directive=directive,
        tickers=tickers,
        universe_source=universe_source,
        preferred_families=styles,
        start=start,
        end=end,
        timeframe=args.timeframe,
        data_dir=args.data_dir.resolve() if args.data_dir else None,
        source=args.source,
        news_file=args.news_file.resolve() if args.news_file else None,
        variants=args.variants,
        limits={"max_iterations": args.max_iterations},
        seed=args.seed,
        out=args.out,
        llm=args.llm,
        costs={"commission_pct": args.commission, "slippage_pct": args.slippage},
        criteria_text=args.criteria,
        holdout_frac=args.holdout,
        n_folds=args.folds,
        workers=args.workers,
        executor=args.executor,
        ray_address=args.ray_address,
        llm_settings=llm_settings,
        offline=args.offline,
        benchmark=benchmark,
        families=families,
        decision_cache_dir=args.decision_cache.resolve() if args.decision_cache else None,
        memory_dir=_memory_dir(args),
        prices=args.prices,
        allow_universe_expansion=args.allow_universe_expansion,
        **screen_options(args),
    )
    return config, criteria


def _families(option: str | None, from_directive: list[str]) -> list[str]:
    """--families (checked), else the directive's families when it names the pipeline (a
    run with it is opt-in: its decisions cost a pipeline call per ticker and week) or a
    portfolio family ("cross-sectional", "relative strength", "rotation")."""
    from strategies.decision_family import FAMILY
    from strategies.families import known_families
    from strategies.portfolio import portfolio_families
    from strategies.regime import REGIME_FILTERS

    if option is None:
        opted = {FAMILY.value, *portfolio_families()}
        return list(from_directive) if opted & set(from_directive) else []
    names = [n.strip().lower().replace("-", "_") for n in option.split(",") if n.strip()]
    if not names:
        raise UserInputError("--families: empty; give names like decision_pipeline or momentum")
    known = known_families()
    for name in names:
        if name not in known and name not in REGIME_FILTERS:
            raise UserInputError(
                f"--families: {name!r} is not a family; use one or more of {', '.join(known)}, "
                f"or a regime filter ({', '.join(REGIME_FILTERS)})"
            )
    return list(dict.fromkeys(names))


def _check_portfolio_universe(families: list[str], tickers: list[str] | None) -> None:
    """A portfolio family ranks symbols against each other: one symbol cannot be ranked."""
    from strategies.portfolio import MIN_SYMBOLS, portfolio_families

    asked = [f for f in families if f in portfolio_families()]
    if asked and tickers is not None and len(tickers) < MIN_SYMBOLS:
        raise UserInputError(
            f"--families: {asked[0]} is a portfolio family (it ranks the universe's symbols "
            f"against each other) and the universe has {len(tickers)} symbol: give at least "
            f"{MIN_SYMBOLS} tickers, e.g. --tickers AAPL,MSFT,NVDA"
        )


def _benchmark(option: str | None, from_directive: str | None) -> str:
    """--benchmark, else what the directive said, else the universe's buy & hold."""
    from backtest.benchmark import BUY_AND_HOLD, normalise_name

    if option is None:
        return normalise_name(from_directive) if from_directive else BUY_AND_HOLD
    if not option.strip():
        raise UserInputError("--benchmark: empty; use buy-and-hold, cash or a symbol like SPY")
    name = normalise_name(option)
    if not re.fullmatch(r"[A-Za-z0-9^._=-]{1,20}", name):
        raise UserInputError(
            f"--benchmark: {option!r} is neither buy-and-hold, cash nor a symbol; "
            "use e.g. --benchmark SPY"
        )
    return name


def main(argv: list[str] | None = None) -> int:
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
        if args.resume is not None:
            _check_resume_args(argv)
            if args.workers is not None and args.workers < 1:
                raise UserInputError(f"--workers: {args.workers} must be at least 1")
            from swarm.run import prepare_resume

            prepared = prepare_resume(args.resume, quiet=args.quiet, workers=args.workers)
        else:
            config, criteria = config_from_args(args)
            from swarm.run import prepare

            prepared = prepare(config, criteria, argv=argv, quiet=args.quiet)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from swarm.run import execute

    root = prepared.run.root
    if prepared.resumed:
        _set_aside_error(root)
    try:
        outcome = execute(prepared)
    except KeyboardInterrupt:
        print(
            f"interrupted; partial results kept in {root}; continue with "
            f"`python -m swarm.develop --resume {root}`",
            file=sys.stderr,
        )
        print(root)
        return 130
    except UserInputError as exc:  # found only once the checkpoint is read (e.g. on --resume)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # an internal failure: keep the folder and say where it is
        prepared.run.write_json(
            "error.json", {"error": repr(exc), "traceback": traceback.format_exc()}
        )
        print(
            f"internal error: {exc!r}; run folder kept, traceback in {root / 'error.json'}; "
            f"after a fix, continue with `python -m swarm.develop --resume {root}`",
            file=sys.stderr,
        )
        print(root)
        return 1
    if outcome.already_finished:
        verdict = outcome.state.get("verdict")
        print(
            f"run already finished: {verdict.verdict if verdict else '?'} after "
            f"{verdict.iterations if verdict else '?'} iteration(s); nothing to resume",
            file=sys.stderr,
        )
    print(root)
    return 0


def _memory_dir(args: argparse.Namespace) -> str | None:
    value = (args.memory_dir or "").strip()
    if not value:
        return None
    if value.lower() in ("off", "none"):
        return "off"
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise UserInputError(f"--memory-dir: {value} is a file; pass a folder or 'off'")
    return str(path.resolve())


RESUME_COMPATIBLE = ("--resume", "--workers", "--quiet")


def _check_resume_args(argv: list[str]) -> None:
    """A resumed run keeps its recorded config: other options would silently not apply."""
    extra = sorted({a.split("=")[0] for a in argv if a.startswith("--")} - set(RESUME_COMPATIBLE))
    if extra:
        raise UserInputError(
            f"--resume: {', '.join(extra)} cannot be changed on resume (the run's config is "
            "in its manifest.json); give only --resume RUN_DIR [--workers N] [--quiet]"
        )


def _set_aside_error(root: Path) -> None:
    """A previous crash's error.json is history once the run continues: keep it, renamed."""
    error = root / "error.json"
    if error.exists():
        n = 1
        while (root / f"error.{n}.json").exists():
            n += 1
        error.rename(root / f"error.{n}.json")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
