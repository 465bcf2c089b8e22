"""Milliseconds a rules-brain decision costs the decision family's replay: the LangGraph graph
against the same nodes called in process (``swarm.analyze.graph.run_in_process``).

    PYTHONPATH=. .venv/bin/python benchmarks/desk_replay.py [--ticker AAPL] [--dates 120] [--json]

Decides ``--dates`` weekly-spaced dates of ``--ticker`` (2013-2019, the corpus's bars, the
family's default debate rounds and floor) both ways, after one warm-up decision each, and checks
that every decision is the same. Prints ms a decision for each way and the speed-up; with
``--json`` one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backtest.data.csv import read_bars_csv  # noqa: E402
from swarm.analyze.nodes import Brain  # noqa: E402
from swarm.analyze.pipeline import decide  # noqa: E402
from swarm.analyze.replay import core_config  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "ohlcv" / "daily"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ticker", default="AAPL")
    p.add_argument("--dates", type=int, default=120)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    bars = read_bars_csv(DATA / f"{args.ticker}.csv").loc["2012-01-01":"2019-12-31"]
    days = list(bars.loc["2013-01-01":].index[::5])[: args.dates]
    cfg = core_config({"debate_rounds": 2, "conviction_floor": 0.2})
    figures, decisions = {}, {}
    for way, in_process in (("graph", False), ("in_process", True)):
        decide(args.ticker, days[0], bars, cfg, Brain(), in_process=in_process)  # warm-up
        t0 = time.perf_counter()
        decisions[way] = [
            decide(
                args.ticker, d, bars, cfg, Brain(), data_info={"sha256": "-"}, in_process=in_process
            )
            for d in days
        ]
        figures[way] = (time.perf_counter() - t0) / len(days) * 1000
    same = sum(
        a.model_dump() == b.model_dump()
        for a, b in zip(decisions["graph"], decisions["in_process"], strict=True)
    )
    out = {
        "ticker": args.ticker,
        "dates": len(days),
        "graph_ms": round(figures["graph"], 2),
        "in_process_ms": round(figures["in_process"], 2),
        "speedup": round(figures["graph"] / figures["in_process"], 2),
        "same_decisions": f"{same}/{len(days)}",
    }
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{args.ticker}, {len(days)} dates: graph {out['graph_ms']} ms a decision, in process "
        f"{out['in_process_ms']} ms ({out['speedup']}x); the same decision {out['same_decisions']}"
    )


if __name__ == "__main__":
    main()
