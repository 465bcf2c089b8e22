"""python -m swarm.research --tickers AAPL --start 2012-01-01 --end 2018-12-31 --out runs

The research swarm on its own: data extractor, 15 subagents, 3 synthesizers and the
leader (with memory), through the same LangGraph nodes as the develop loop. Research only
ever sees the in-sample window: the same holdout split as ``python -m swarm.develop``
(``--holdout``, default 0.2) is applied and the holdout stays sealed.

Writes ``OUT/<run_id>/research/`` (data_brief.md/.json, findings.json, fact_sheets.json,
synthesis.json, recalled.json, research.md, news/) plus a manifest, and prints the run
folder last on stdout. Exit codes: 0 done, 2 bad input (one line saying what to fix),
1 internal failure (the run folder is kept, with error.json).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from swarm.cli_args import OneLineParser, add_data_arguments, check_data_args, parse_tickers
from swarm.errors import UserInputError
from swarm.memo import RunMemo

FAMILIES = ("momentum", "mean_reversion", "breakout", "trend", "volatility")


def build_parser() -> argparse.ArgumentParser:
    """The research command's parser: tickers, data, style, memory, output."""
    p = OneLineParser(prog="python -m swarm.research", description=__doc__.split("\n\n")[1])
    p.add_argument("--tickers", required=True, help="comma-separated symbols, e.g. AAPL,MSFT")
    add_data_arguments(p)
    p.add_argument(
        "--style",
        default="",
        help=f"comma-separated families to recall lessons for ({', '.join(FAMILIES)})",
    )
    p.add_argument(
        "--memory-dir", type=Path, help="research memory folder (default: user cache dir)"
    )
    p.add_argument("--no-memory", action="store_true", help="neither recall nor store")
    p.add_argument(
        "--out", type=Path, default=Path("runs"), help="where run folders go (default ./runs)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for --source synthetic")
    p.add_argument(
        "--repair",
        action="store_true",
        help="mend broken bars instead of exiting 2 on them (as python -m swarm.develop "
        "--repair); each change is printed and kept in manifest.json",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


@dataclass(frozen=True)
class ResearchConfig:
    """What the research nodes read from ``ctx.config`` (a subset of swarm.config.RunConfig)."""

    tickers: list[str]
    start: date
    end: date
    timeframe: str
    source: str
    data_dir: Path | None
    news_file: Path | None
    offline: bool
    preferred_families: list[str]
    holdout_frac: float
    memory_dir: Path | bool | None
    out: Path
    seed: int
    alt_data: Path | None = None  # point-in-time alternative data (altdata.corpus)
    alt_data_found: bool = False  # found above --data-dir rather than given (cli_args)
    fundamentals: str = "corpus"  # where fundamental statements come from (cli_args.FUNDAMENTALS)
    repair_data: bool = False  # --repair (backtest.data.integrity)


@dataclass
class ResearchRunContext:
    """The attributes of swarm.context.RunContext the research nodes use, and no more."""

    config: ResearchConfig
    run: Any  # experiments.runfolder.RunFolder
    data: dict[str, Any]  # symbol -> backtest.data.LoadedBars
    split: Any  # backtest.splits.TimeSplit
    progress: Any  # swarm.progress.Progress
    news_items: list[Any] = field(default_factory=list)
    memo: RunMemo = field(default_factory=RunMemo)
    llm: Any = None  # the standalone research command runs the rules brains

    @property
    def symbols(self) -> list[str]:
        """The run's symbols, in data order."""
        return list(self.data)

    def insample_bars(self, symbol: str) -> pd.DataFrame:
        """The only window research may look at: the holdout stays sealed."""
        return self.split.insample_bars(self.data[symbol].bars)


def config_from_args(args: argparse.Namespace) -> ResearchConfig:
    """The checked arguments as a ResearchConfig (UserInputError on the first bad one)."""
    tickers = parse_tickers(args.tickers)
    start, end = check_data_args(args)
    style = [s.strip().lower() for s in args.style.split(",") if s.strip()]
    unknown = [s for s in style if s not in FAMILIES]
    if unknown:
        raise UserInputError(
            f"--style: unknown family {', '.join(unknown)}; use {', '.join(FAMILIES)}"
        )
    if args.memory_dir is not None and args.memory_dir.exists() and not args.memory_dir.is_dir():
        raise UserInputError(f"--memory-dir: {args.memory_dir} is a file; pass a folder")
    memory_dir: Path | bool | None = False if args.no_memory else args.memory_dir
    return ResearchConfig(
        tickers=tickers,
        start=start,
        end=end,
        timeframe=args.timeframe,
        source=args.source,
        data_dir=args.data_dir.resolve() if args.data_dir else None,
        news_file=args.news_file.resolve() if args.news_file else None,
        offline=args.offline,
        alt_data=args.alt_data.resolve() if args.alt_data else None,
        alt_data_found=bool(getattr(args, "alt_data_found", False)),
        fundamentals=args.fundamentals,
        preferred_families=style,
        holdout_frac=args.holdout,
        memory_dir=memory_dir,
        out=args.out,
        seed=args.seed,
        repair_data=args.repair,
    )


def _offline_fetch(symbol: str, **_: Any) -> pd.DataFrame:
    raise ConnectionError("--offline: network disabled")


def prepare(cfg: ResearchConfig, *, argv: list[str], quiet: bool = False) -> ResearchRunContext:
    """Load data and split time exactly as the develop loop does; input errors raise
    UserInputError before any run folder exists."""
    from backtest.data import load_universe
    from backtest.errors import BacktestError
    from backtest.splits import split_holdout
    from experiments.runfolder import RunFolder, build_manifest, new_run_id
    from swarm.progress import Progress
    from swarm.research.news import load_news_csv
    from swarm.run_prepare import report_data

    progress = Progress(quiet=quiet)
    try:
        data = load_universe(
            cfg.tickers,
            start=cfg.start,
            end=cfg.end,
            timeframe=cfg.timeframe,
            source=cfg.source,
            data_dir=cfg.data_dir,
            seed=cfg.seed,
            fetcher=_offline_fetch if cfg.offline else None,
            repair=cfg.repair_data,
        )
        calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
        split = split_holdout(calendar, holdout_frac=cfg.holdout_frac)
    except BacktestError as exc:
        raise UserInputError(str(exc)) from None
    news_items: list[Any] = []
    if cfg.news_file is not None:
        try:
            news_items = load_news_csv(cfg.news_file)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserInputError(f"--news-file: cannot read {cfg.news_file}: {exc}") from None
    report_data(progress, data, cfg)
    progress.stage(
        "data",
        f"in-sample {split.insample_start}..{split.insample_end}; holdout "
        f"{split.holdout_start}..{split.holdout_end} sealed (research never sees it)",
    )
    run = RunFolder.create(cfg.out, new_run_id(f"research {' '.join(cfg.tickers)}"))
    config_dump = {
        k: (str(v) if isinstance(v, Path | date) else v) for k, v in cfg.__dict__.items()
    }
    run.write_json(
        "manifest.json",
        build_manifest(
            run_id=run.root.name,
            config={"entry_point": "swarm.research", **config_dump},
            data={
                "split": split.model_dump(mode="json"),
                "symbols": {s: d.summary() for s, d in data.items()},
                "news_items": len(news_items),
            },
            seed=cfg.seed,
            argv=argv,
        ),
    )
    progress.stage("run", f"run folder {run.root}")
    return ResearchRunContext(
        config=cfg,
        run=run,
        data=data,
        split=split,
        progress=progress,
        news_items=news_items,
    )


def execute(ctx: ResearchRunContext) -> dict[str, Any]:
    """The research graph (same nodes as the develop graph) over the prepared context."""
    from swarm.nodes.research import build_research_graph

    graph = build_research_graph()
    initial = {"symbols": ctx.symbols, "research_round": 0, "feedback": []}
    return graph.invoke(initial, config={"max_concurrency": 8}, context=ctx)


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 done (the folder printed), 2 bad input, 130 interrupted, 1 internal failure (folder
    kept)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        cfg = config_from_args(args)
        ctx = prepare(cfg, argv=argv, quiet=args.quiet)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        execute(ctx)
    except KeyboardInterrupt:
        print(f"interrupted; partial research kept in {ctx.run.root}", file=sys.stderr)
        print(ctx.run.root)
        return 130
    except Exception as exc:  # an internal failure: keep the folder and say where it is
        ctx.run.write_json("error.json", {"error": repr(exc), "traceback": traceback.format_exc()})
        print(
            f"internal error: {exc!r}; run folder kept, traceback in {ctx.run.root / 'error.json'}",
            file=sys.stderr,
        )
        print(ctx.run.root)
        return 1
    print(ctx.run.root)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
