"""``python -m swarm.develop``'s arguments checked and turned into a RunConfig.

Every argument is validated up front, so bad input never creates a half run: each problem
is one UserInputError line (the argument, what is wrong, what to do); ``swarm.develop``
prints it and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from backtest.cli_args import borrow_problem
from swarm.cli_args import check_data_args, parse_tickers, screen_options
from swarm.errors import UserInputError
from swarm.llm.settings import mask_mode, parse_llm_arg
from swarm.sizing import normalised


def config_from_args(args: argparse.Namespace):
    """Validate every argument up front, so bad input never creates a half run."""
    from gate.criteria import criteria_from_text
    from gate.errors import CriteriaError
    from swarm.asset_defaults import defaults_for
    from swarm.plan import plan_summary

    directive = (args.directive or "").strip()
    if not directive:
        raise UserInputError(
            '--directive: empty; say what to look for, e.g. "momentum alpha in tech"'
        )
    timeframe_arg = args.timeframe  # None: the directive's (check_data_args fills in 1d)
    start, end = check_data_args(args)
    _check_search_args(args)
    sizing = normalised(args.sizing)  # --sizing: one UserInputError line when bad
    _check_execution_args(args)
    llm_settings = _llm_settings(args)
    plan = _resolve_plan(args, directive, timeframe_arg, llm_settings, start, end)
    replace = bool(getattr(args, "criteria_replace", False))
    if replace and not (args.criteria or "").strip():
        raise UserInputError(
            "--criteria-replace: no --criteria to replace the defaults with; add --criteria "
            '"sharpe>=0.8,..." or drop --criteria-replace'
        )
    styles, families = _styles_and_families(args, plan)
    asset = defaults_for(plan.tickers, families)  # crypto's drawdown cap, pairs against cash
    try:
        criteria = criteria_from_text(args.criteria, replace=replace, base=asset.criteria)
    except CriteriaError as exc:
        raise UserInputError(f"--criteria: {exc}") from None
    benchmark = _benchmark(args.benchmark, plan.benchmark or asset.benchmark)
    summary = plan_summary(plan, start=start, end=end, benchmark=benchmark, families=families)
    config = _run_config(
        args,
        directive=directive,
        plan=plan,
        summary=summary,
        styles=styles,
        families=families,
        start=start,
        end=end,
        sizing=sizing,
        replace=replace,
        llm_settings=llm_settings,
        benchmark=benchmark,
        asset=asset,
    )
    from swarm.families import registry

    registry().preflight(config)  # a named family's own inputs, e.g. earnings_drift's data
    return config, criteria


def _check_search_args(args: argparse.Namespace) -> None:
    """The search's size, folds, prices and costs, each in range (the first bad one raises)."""
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
    borrow_problem_text = borrow_problem(args.borrow_cost)
    if borrow_problem_text is not None:
        raise UserInputError(f"--borrow-cost: {borrow_problem_text}")


def _check_execution_args(args: argparse.Namespace) -> None:
    """Workers, executor (Ray installed when asked for) and the LLM token budget."""
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


def _llm_settings(args: argparse.Namespace):
    """The --llm* arguments as LLMSettings; an OpenAI run needs its key in the environment."""
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
            mask=mask_mode(getattr(args, "mask", None)),
            cutoff=getattr(args, "llm_cutoff", None),
            concurrency=getattr(args, "llm_concurrency", None),
        )
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    if llm_settings.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
        raise UserInputError("--llm openai:…: set OPENAI_API_KEY, or use --llm none")
    return llm_settings


def _resolve_plan(
    args: argparse.Namespace, directive: str, timeframe_arg, llm_settings, start, end
):
    """The directive read and resolved into a plan (universe, timeframe, families); a
    DirectiveError becomes the one-line UserInputError."""
    from swarm.directive import DirectiveError, parse_directive
    from swarm.plan import build_plan, llm_client_for_plan

    tickers_arg = parse_tickers(args.tickers) if args.tickers is not None else None
    try:
        # A portfolio family on one named symbol says so before any data is looked at.
        read = parse_directive(directive)
        named = tickers_arg or read.explicit_tickers or None
        _check_portfolio_universe(_families(args.families, read.preferred_families), named)
        return build_plan(
            directive,
            data_dir=args.data_dir,
            source=args.source,
            offline=args.offline,
            timeframe=timeframe_arg,
            tickers=tickers_arg,
            llm=llm_client_for_plan(
                llm_settings, start=start, end=end, tickers=named, data_dir=args.data_dir
            )
            if llm_settings.enabled
            else None,
        )
    except DirectiveError as exc:
        raise UserInputError(str(exc)) from None


def _styles_and_families(args: argparse.Namespace, plan) -> tuple[list[str], list[str]]:
    """The run's styles (the plan's, plus a regime filter named in --families) and the
    families left to search; a regime filter asked for needs its index files."""
    families = _families(args.families, plan.preferred_families)
    _check_portfolio_universe(families, plan.tickers)
    from strategies.regime import REGIME_FILTERS, REGIME_STYLE
    from swarm.regime_data import check_regime_data

    # A regime filter named in --families is a style, as the directive's phrases make it.
    styles = list(
        dict.fromkeys([*plan.preferred_families, *(f for f in families if f in REGIME_FILTERS)])
    )
    families = [f for f in families if f not in REGIME_FILTERS or f == REGIME_STYLE]
    check_regime_data(  # a regime filter asked for needs its index files (swarm.regime_data)
        styles,
        data_dir=args.data_dir,
        source=args.source,
        timeframe=plan.timeframe,
    )
    return styles, families


def _run_config(
    args: argparse.Namespace,
    *,
    directive: str,
    plan,
    summary,
    styles: list[str],
    families: list[str],
    start,
    end,
    sizing,
    replace: bool,
    llm_settings,
    benchmark,
    asset,
):
    """The RunConfig of the checked arguments and the resolved plan."""
    from swarm.config import RunConfig

    return RunConfig(
        directive=directive,
        styles=plan.styles,
        plan=summary,
        tickers=plan.tickers,
        universe_source=plan.universe_source,
        preferred_families=styles,
        start=start,
        end=end,
        timeframe=plan.timeframe,
        data_dir=args.data_dir.resolve() if args.data_dir else None,
        source=args.source,
        news_file=args.news_file.resolve() if args.news_file else None,
        alt_data=args.alt_data.resolve() if args.alt_data else None,
        alt_data_found=bool(getattr(args, "alt_data_found", False)),
        fundamentals=args.fundamentals,
        variants=args.variants,
        limits={"max_iterations": args.max_iterations},
        seed=args.seed,
        out=args.out,
        llm=args.llm,
        costs={
            "commission_pct": args.commission,
            "slippage_pct": args.slippage,
            "borrow_pct": float(args.borrow_cost),
        },
        sizing=sizing,
        criteria_text=args.criteria,
        criteria_replace=replace,
        asset_class=asset.asset_class,
        asset_criteria=asset.criteria,
        asset_notes=asset.why,
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
        ledger_dir=_folder_or_off(args.ledger_dir, "--ledger-dir"),
        fresh_ledger=bool(args.fresh_ledger),
        figures=not getattr(args, "no_figures", False),
        **validation_options(args),
        prices=args.prices,
        repair_data=args.repair,
        allow_universe_expansion=args.allow_universe_expansion,
        **screen_options(args),
    )


def validation_options(args: argparse.Namespace) -> dict[str, object]:
    """The RunConfig fields of --validation, --cpcv-groups and --cpcv-test-groups (checked:
    the CPCV flags need --validation cpcv, and k must be below N)."""
    from gate.cpcv import N_GROUPS, N_TEST_GROUPS, check_settings

    validation = str(args.validation).strip().lower()
    if validation not in ("walk-forward", "cpcv"):
        raise UserInputError(f"--validation: {args.validation!r}; use walk-forward or cpcv")
    n, k = args.cpcv_groups, args.cpcv_test_groups
    if validation != "cpcv" and (n, k) != (N_GROUPS, N_TEST_GROUPS):
        raise UserInputError(
            "--cpcv-groups/--cpcv-test-groups: they set up CPCV; add --validation cpcv"
        )
    if (bad := check_settings(n, k)) is not None:
        raise UserInputError(f"--cpcv-groups/--cpcv-test-groups: {bad}")
    return {"validation": validation, "cpcv_groups": n, "cpcv_test_groups": k}


def _families(option: str | None, from_directive: list[str]) -> list[str]:
    """--families (checked), else the directive's families when it names the pipeline (a
    run with it is opt-in: its decisions cost a pipeline call per ticker and week), a
    portfolio family ("cross-sectional", "relative strength", "rotation") or a family of
    ``swarm/families/`` ("earnings drift", "analyst upgrades", "tweet sentiment", "put/call")."""
    from strategies.decision_family import FAMILY
    from strategies.portfolio import portfolio_families
    from strategies.regime import REGIME_FILTERS
    from swarm.families import registry

    if option is None:  # self-proposing plugins (alt-data families) are opt-in too
        own = {kind for plugin in registry() if plugin.self_proposing for kind in plugin.kinds}
        opted = {FAMILY.value, *portfolio_families(), *own}
        return list(from_directive) if opted & set(from_directive) else []
    names = [n.strip().lower().replace("-", "_") for n in option.split(",") if n.strip()]
    if not names:
        raise UserInputError("--families: empty; give names like decision_pipeline or momentum")
    known = registry().known()
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
        if asked[0] == "low_volatility":  # the one-symbol design is not built
            raise UserInputError(
                f"--directive: low volatility holds the calmest of a universe's symbols and "
                f"the universe has {len(tickers)} symbol; scaling one symbol's exposure down "
                f"as its volatility rises is not a family yet: give at least {MIN_SYMBOLS} "
                "tickers (e.g. 'low volatility ETFs'), or use --families momentum,trend"
            )
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


def _memory_dir(args: argparse.Namespace) -> str | None:
    return _folder_or_off(args.memory_dir, "--memory-dir")


def _folder_or_off(option: str | Path | None, name: str) -> str | None:
    """A folder option that may be 'off': None (the default place), "off" or a resolved path."""
    value = str(option or "").strip()  # the Python API may pass a Path
    if not value:
        return None
    if value.lower() in ("off", "none"):
        return "off"
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{name}: {value} is a file; pass a folder or 'off'")
    return str(path.resolve())
