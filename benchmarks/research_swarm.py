"""Wall time of the research swarm, offline: 6 tickers x 10 years of daily bars.

    .venv/bin/python benchmarks/research_swarm.py [--data-dir DIR] [--repeat 3]

Measures, end to end through the code the develop graph runs:

1. ``graph``: the LangGraph research graph (swarm.nodes.research.build_research_graph:
   data extractor -> 15 subagents via Send -> 3 synthesizers -> leader), the same node
   functions as the develop graph, including feature bundles, the run-folder writes and
   the leader's memory step (a fresh store in a temp dir: recall + store);
2. ``direct``: the same underlying functions without LangGraph and without memory
   (compute_features + run_swarm + synthesize_domain x 3 + lead), to show the
   orchestration and memory overhead.

Data loading (CSV parsing) is excluded from both; the graph is compiled before timing.
Target: <= 5 s on 2 cores. Prints one line per measurement, the graph figure last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from backtest.data import load_universe  # noqa: E402
from backtest.splits import split_holdout  # noqa: E402
from experiments.runfolder import RunFolder  # noqa: E402
from swarm.progress import Progress  # noqa: E402
from swarm.research.__main__ import ResearchConfig, ResearchRunContext  # noqa: E402

TICKERS = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "INTC"]
# 12.5 years loaded; the sealed 20% holdout leaves 10 years in-sample for research.
START, END = date(2007, 7, 1), date(2019, 12, 31)


def _context(data, split, out: Path, mem: Path) -> ResearchRunContext:
    cfg = ResearchConfig(
        tickers=TICKERS,
        start=START,
        end=END,
        timeframe="1d",
        source="csv",
        data_dir=None,
        news_file=None,
        offline=True,
        preferred_families=["momentum"],
        holdout_frac=0.2,
        memory_dir=mem,
        out=out,
        seed=0,
    )
    run = RunFolder.create(out, f"bench-{time.time_ns()}")
    return ResearchRunContext(
        config=cfg,
        run=run,
        data=data,
        split=split,
        progress=Progress(quiet=True),
    )


def bench_graph(data, split, tmp: Path) -> float:
    from swarm.nodes.research import build_research_graph

    graph = build_research_graph()
    ctx = _context(data, split, tmp / "out", tmp / f"mem-{time.time_ns()}")
    t0 = time.perf_counter()
    state = graph.invoke(
        {"symbols": ctx.symbols, "research_round": 0, "feedback": []},
        config={"max_concurrency": 8},
        context=ctx,
    )
    elapsed = time.perf_counter() - t0
    assert len(state["findings"]) == 15 * len(TICKERS), len(state["findings"])
    assert state["synthesis"].recommended_families
    return elapsed


def bench_direct(data, split) -> float:
    from swarm.research.data_extractor import brief_symbol, build_data_brief
    from swarm.research.features import compute_features
    from swarm.research.models import Domain
    from swarm.research.subagents import ResearchContext, run_swarm
    from swarm.research.synthesis import lead, synthesize_domain

    t0 = time.perf_counter()
    insample = {s: split.insample_bars(d.bars) for s, d in data.items()}
    brief = build_data_brief(
        [
            brief_symbol(
                s, b, quality=data[s].quality.model_dump(mode="json"), sha256=data[s].sha256
            )
            for s, b in insample.items()
        ]
    )
    bundles = {s: compute_features(s, b) for s, b in insample.items()}
    swarm = run_swarm(bundles, ResearchContext())
    sheets = [
        synthesize_domain(d, swarm.findings, failed=swarm.failed_specializations(d)) for d in Domain
    ]
    lead(sheets, brief)
    elapsed = time.perf_counter() - t0
    assert len(swarm.findings) == 15 * len(TICKERS)
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=REPO.parent / "shared/data/ohlcv/daily")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not args.data_dir.is_dir():
        print(f"error: --data-dir {args.data_dir} is not a folder", file=sys.stderr)
        return 2
    data = load_universe(TICKERS, start=START, end=END, data_dir=args.data_dir, source="csv")
    calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
    split = split_holdout(calendar, holdout_frac=0.2)
    n_bars = sum(len(split.insample_bars(d.bars)) for d in data.values())
    years = (split.insample_end - split.insample_start).days / 365.25
    print(
        f"research swarm: {len(TICKERS)} tickers x {years:.1f} years of in-sample daily bars "
        f"({split.insample_start}..{split.insample_end}, {n_bars} bars), 15 subagents, "
        f"offline, {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="bench-research-") as tmp:
        bench_direct(data, split)  # warm imports and TA-Lib
        bench_graph(data, split, Path(tmp))
        direct = [bench_direct(data, split) for _ in range(args.repeat)]
        graph = [bench_graph(data, split, Path(tmp)) for _ in range(args.repeat)]
    print(
        f"direct (features + 15 subagents + 3 synthesizers + leader, no memory): "
        f"median {statistics.median(direct):.2f} s, min {min(direct):.2f} s"
    )
    print(
        f"graph (LangGraph Send, same nodes, run-folder writes, memory recall+store): "
        f"median {statistics.median(graph):.2f} s, min {min(graph):.2f} s (target <= 5 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
