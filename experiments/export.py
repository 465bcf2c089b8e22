"""Export a variant as a standalone strategy: plain backtrader, a CSV, nothing of ours.

    python -m experiments.export RUN_DIR --to DIR [--variant ID]

writes ``strategy.py`` (the variant's code + a small runner), ``params.json`` and a
README with the figures recorded for it and how it was found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from backtest.contracts import CostModel
from experiments.records import VARIANTS, Figures, Manifest, VariantEntry, Verdict
from experiments.scorecard import (
    ROUND_TRIPS,
    TRADE_LABELS,
    criteria_of,
    criteria_rows,
    not_a_winner,
    other_vetoes,
    trades_kind,
)
from strategies.family_api import whole_universe
from strategies.regime import index_symbols

RUNNER = '''

# ---------------------------------------------------------------------------
# Runner (added by experiments.export): plain backtrader on a CSV with a header
# date,open,high,low,close,volume[,...]. Same execution model as the lab: market
# orders fill at the next bar's open, commission and slippage per side.
# ---------------------------------------------------------------------------


def _csv_feed(path, fromdate=None, todate=None):
    import csv
    import datetime as _dt

    with open(path, newline="") as fh:
        header = [h.strip().lower() for h in next(csv.reader(fh))]
    cols = {name: header.index(name) for name in ("date", "open", "high", "low", "close", "volume")}
    return bt.feeds.GenericCSVData(
        dataname=path, dtformat="%Y-%m-%d", datetime=cols["date"], open=cols["open"],
        high=cols["high"], low=cols["low"], close=cols["close"], volume=cols["volume"],
        openinterest=-1, nullvalue=float("nan"),
        fromdate=_dt.datetime.fromisoformat(fromdate) if fromdate else None,
        # Daily bars are stamped at the session end: include the whole last day.
        todate=_dt.datetime.combine(_dt.date.fromisoformat(todate), _dt.time.max) if todate else None,
    )


def _aligned_feeds(paths, fromdate=None, todate=None, names=None):
    """A portfolio's feeds on the dates every CSV has, as the lab feeds them (pandas); named
    after the files unless ``names`` says otherwise."""
    import os

    import pandas as pd

    frames = {}
    for k, path in enumerate(paths):
        df = pd.read_csv(path)
        df.columns = [c.strip().lower() for c in df.columns]
        df = df.set_index(pd.to_datetime(df["date"]))[["open", "high", "low", "close", "volume"]]
        if fromdate:
            df = df.loc[pd.Timestamp(fromdate):]
        if todate:
            df = df.loc[: pd.Timestamp(todate)]
        name = names[k] if names else os.path.splitext(os.path.basename(path))[0]
        frames[name] = df.astype("float64")
    common = None
    for df in frames.values():
        common = df.index if common is None else common.intersection(df.index)
    return [
        (name, bt.feeds.PandasData(dataname=df.loc[common], openinterest=None))
        for name, df in frames.items()
    ]


def _gated(strategy_cls, trade_start):
    """Orders before ``trade_start`` are dropped: earlier bars only warm up indicators."""
    import datetime as _dt

    start = _dt.date.fromisoformat(trade_start)

    class Gated(strategy_cls):
        def buy(self, *args, **kwargs):
            return None if self.data.datetime.date(0) < start else super().buy(*args, **kwargs)

        def sell(self, *args, **kwargs):
            return None if self.data.datetime.date(0) < start else super().sell(*args, **kwargs)

    return Gated


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description="Run this strategy with plain backtrader.")
    parser.add_argument(
        "--data", required=True, action="append",
        help="CSV: date,open,high,low,close,volume; a portfolio strategy takes one per symbol; "
        "a strategy reading an index (INDEX_FEEDS) takes its file(s) last, in that order",
    )
    parser.add_argument("--from", dest="fromdate", help="first bar to load (ISO date)")
    parser.add_argument("--to", dest="todate", help="last bar to load (ISO date)")
    parser.add_argument("--trade-start", help="no orders before this date (warm-up before it)")
    parser.add_argument("--cash", type=float, default=CASH)
    parser.add_argument("--commission-pct", type=float, default=COMMISSION_PCT)
    parser.add_argument("--slippage-pct", type=float, default=SLIPPAGE_PCT)
    args = parser.parse_args(argv)

    import collections
    import collections.abc
    import os

    # backtrader 1.9.78.123 still looks up collections.Iterable (removed in Python 3.10).
    collections.Iterable = getattr(collections, "Iterable", collections.abc.Iterable)
    if len(args.data) <= len(INDEX_FEEDS):
        parser.error(
            "--data: give the traded symbol's file(s), then one per index the strategy reads "
            "(" + ", ".join(f"{s}.csv" for s in INDEX_FEEDS) + "), in that order"
        )
    cerebro = bt.Cerebro(stdstats=False)
    if len(args.data) == 1:
        cerebro.adddata(_csv_feed(args.data[0], args.fromdate, args.todate))
    else:
        # The index feeds are read by name ("index:SPY"), never traded, fed after the others.
        traded = len(args.data) - len(INDEX_FEEDS)
        names = [os.path.splitext(os.path.basename(p))[0] for p in args.data[:traded]]
        names += ["index:" + s for s in INDEX_FEEDS]
        for name, feed in _aligned_feeds(args.data, args.fromdate, args.todate, names):
            cerebro.adddata(feed, name=name)
    strategy_cls = STRATEGY
    if args.trade_start:
        strategy_cls = _gated(strategy_cls, args.trade_start)
    cerebro.addstrategy(strategy_cls)
    cerebro.broker.setcash(args.cash)
    cerebro.broker.setcommission(commission=args.commission_pct / 100.0)
    cerebro.broker.set_slippage_perc(
        args.slippage_pct / 100.0, slip_open=True, slip_limit=True, slip_match=True, slip_out=False
    )
    cerebro.run()
    print(f"final_value={cerebro.broker.getvalue():.6f}")


if __name__ == "__main__":
    main()
'''


class ExportError(Exception):
    """Bad export request; the message says what to do."""


def standalone_source(
    code: str, class_name: str | None, *, costs: CostModel, banner: list[str] | None = None
) -> str:
    """The variant's code with the runner; ``banner`` (a non-winner's) heads it as comments."""
    top = "".join(f"# {line}\n" for line in banner or [])
    header = (
        f"\n\nSTRATEGY = {class_name}\n"
        # The index series the strategy reads by name (a regime filter's): extra --data files.
        f"INDEX_FEEDS = {tuple(index_symbols(code))!r}\n"
        f"CASH = {float(costs.cash)!r}\n"
        f"COMMISSION_PCT = {float(costs.commission_pct)!r}\n"
        f"SLIPPAGE_PCT = {float(costs.slippage_pct)!r}\n"
    )
    return top + code.rstrip() + "\n" + header + RUNNER


RUNNER_MARK = "# Runner (added by experiments.export)"
_HEADER = "\n\n\nSTRATEGY = "


def embedded_strategy(source: str) -> str | None:
    """The strategy code inside a file ``standalone_source`` wrote (its banner comments kept,
    the header and runner cut), or None when ``source`` is not such a file.

    The runner reads CSVs with ``csv``/``datetime``/``os`` and subclasses the strategy to gate
    its orders: all of it the static lint refuses, and none of it is the strategy.
    """
    cut = source.rfind(_HEADER)
    if cut < 0 or RUNNER_MARK not in source[cut:]:
        return None
    return source[:cut].rstrip() + "\n"


def write_export(
    dest: Path,
    *,
    variant: VariantEntry,
    class_name: str | None,
    costs: CostModel,
    figures: dict[str, Figures],
    lineage: list[str],
    run_dir: Path,
    banner: list[str] | None = None,
    trades: str = ROUND_TRIPS,
) -> Path:
    """Write ``variant`` (as variants.json holds it, with its code) into ``dest``: strategy.py,
    params.json and a README of ``figures`` (per window, as verdict.json holds them).

    ``banner``: ``scorecard.not_a_winner``'s lines for a variant that did not win (None
    for the winner); ``trades``: what its trade count counts (``scorecard.trades_kind``)."""
    if variant.code is None:
        raise ExportError(f"--variant: {variant.variant_id} has no source in variants.json")
    dest.mkdir(parents=True, exist_ok=True)
    _write(
        dest / "strategy.py",
        standalone_source(variant.code, class_name, costs=costs, banner=banner),
    )
    _write(
        dest / "params.json",
        json.dumps(variant.spec.parameters, indent=2, sort_keys=True) + "\n",
    )
    _write(dest / "README.md", _readme(variant, figures, lineage, run_dir, costs, banner, trades))
    return dest


def _write(path: Path, text: str) -> None:
    """Atomic: an export interrupted (or replayed by a resumed run) never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _readme(
    variant: VariantEntry,
    figures: dict[str, Figures],
    lineage: list[str],
    run_dir: Path,
    costs: CostModel,
    banner: list[str] | None,
    trades: str,
) -> str:
    """The exported folder's README: what the strategy is, how to run it, the lab's figures
    and the commands that reproduce its holdout."""
    spec = variant.spec
    lines = [
        f"# {spec.name} ({variant.variant_id})",
        "",
        *([f"> **{banner[0]}**", *(f"> {line}" for line in banner[1:]), ""] if banner else []),
        f"Family: {spec.family}. {spec.approach}",
        "",
        f"Found by the strategy lab in run `{Path(run_dir).name}`, iteration {variant.iteration}, "
        f"route {variant.route}. Lineage (oldest first): {' -> '.join(lineage)}.",
        "",
        *_run_it_lines(variant, costs),
        "",
        "## Figures recorded by the lab",
        "",
        f"| window | sharpe | CAGR % | max DD % | win rate % | {TRADE_LABELS[trades]} | "
        "benchmark sharpe | alpha % a year | beta | alpha HAC t |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _figures_lines(figures)
    lines += _reproduce_lines(figures)
    lines += [
        "",
        "In-sample figures come from walk-forward folds the search looked at"
        + (
            "; the holdout was\nsealed during the search and opened once for this strategy."
            if "holdout" in figures
            else "."
        )
        + " Parameters: `params.json`.",
        "",
    ]
    return "\n".join(lines)


def _run_it_lines(variant: VariantEntry, costs: CostModel) -> list[str]:
    """How to run the exported strategy: its --data files (an index last) and the lab's costs."""
    indices = index_symbols(variant.code or "")
    return [
        "## Run it",
        "",
        "    pip install backtrader==1.9.78.123",
        *(
            [
                "    python strategy.py --data AAPL.csv --data MSFT.csv --data NVDA.csv",
                "",
                "A portfolio strategy: one `--data` per symbol, in the universe's order (the",
                "feeds are aligned on the dates every file has, as the lab feeds them).",
            ]
            if whole_universe(variant.spec)
            else ["    python strategy.py --data AAPL.csv"]
        ),
        *(
            [
                "",
                "It reads an index it never trades (a regime filter): add "
                + ", ".join(f"`--data {s}.csv`" for s in indices)
                + " last, after the traded symbol(s).",
            ]
            if indices
            else []
        ),
        "",
        "Add `--from`/`--to` to select bars and `--trade-start DATE` to keep earlier bars for",
        "indicator warm-up only, as the lab does. Costs default to what the lab used: "
        f"commission {costs.commission_pct}% and slippage {costs.slippage_pct}% per side."
        + (
            f" The lab also charged a borrow fee of {costs.borrow_pct}% a year on shorts "
            "(backtest/borrow.py), which this plain-backtrader runner does not: its short "
            "trades look that much cheaper here."
            if costs.borrow_pct
            else ""
        ),
    ]


def _figures_lines(figures: dict[str, Figures]) -> list[str]:
    """One table row per window the lab recorded, or why there is none or no holdout."""
    lines: list[str] = []
    for window, row in figures.items():
        m, bh, a = row.metrics, row.buy_and_hold, row.alpha
        lines.append(
            f"| {window} | {_f(m.sharpe if m else None)} | {_f(m.cagr_pct if m else None)} | "
            f"{_f(m.max_drawdown_pct if m else None)} | {_f(m.win_rate_pct if m else None)} | "
            f"{m.n_trades if m else '–'} | {_f(bh.sharpe if bh else None)} | "
            f"{_f(a.alpha_annual_pct if a else None)} | {_f(a.beta if a else None)} | "
            f"{_f(a.t_stat if a else None)} |"
        )
    if not figures:
        lines.append("| (no figures recorded: the variant produced no result) |" + " |" * 9)
    elif "holdout" not in figures:
        lines += [
            "",
            "Only in-sample figures: the sealed holdout is opened once, for the run's winner.",
        ]
    return lines


def _reproduce_lines(figures: dict[str, Figures]) -> list[str]:
    """The command per symbol that reprints the holdout's final value (none without one).

    ``Figures.reproduce`` is the holdout's re-run recipe: from, trade_start, to and per symbol
    its ``--data`` file(s) and the final value."""
    lines: list[str] = []
    held = figures.get("holdout")
    repro = held.reproduce if held else None
    if repro:
        lines += [
            "",
            "## Reproduce the holdout, symbol by symbol",
            "",
            "Each command should print the final value the lab recorded (to rounding):",
            "",
        ]
        for symbol, run in sorted(repro["runs"].items()):
            data = run["data"] or symbol + ".csv"
            data = " --data ".join(data) if isinstance(data, list) else data  # a portfolio
            lines.append(
                f"    python strategy.py --data {data} --from {repro['from']} "
                f"--to {repro['to']} --trade-start {repro['trade_start']}   # {run['final_value']:.6f}"
            )
    return lines


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def lineage_of(variant_id: str, parents: Mapping[str, str | None]) -> list[str]:
    """``variant_id``'s ancestors and itself, oldest first; ``parents``: variant id -> parent id."""
    chain, seen = [], set()
    current: str | None = variant_id
    while current and current in parents and current not in seen:
        seen.add(current)
        chain.append(current)
        current = parents[current]
    return list(reversed(chain))


def variant_figures(variant: VariantEntry, verdict: Verdict) -> dict[str, Figures]:
    """The figures recorded for a variant: the winner's (in-sample and holdout, when the holdout
    was opened), otherwise its own in-sample aggregate against the run's in-sample benchmark."""
    if variant.variant_id == verdict.best_variant and verdict.figures:
        return verdict.figures
    own = variant.in_sample
    if own is None or own.metrics is None:
        return {}
    return {
        "in-sample": Figures(
            metrics=own.metrics, buy_and_hold=verdict.buy_and_hold_in_sample, alpha=own.alpha
        )
    }


def export_from_run(run_dir: Path, to: Path, variant_id: str | None = None) -> Path:
    """Write variant ``variant_id`` (default: the verdict's best variant) of a finished run into
    ``to``; returns the folder written."""
    run_dir = Path(run_dir)
    state_file = run_dir / "variants.json"
    verdict_file = run_dir / "verdict.json"
    if not state_file.exists() or not verdict_file.exists():
        raise ExportError(
            f"RUN_DIR: {run_dir} is not a finished run folder (no variants.json/verdict.json); "
            "pass the folder printed by `python -m swarm.develop`"
        )
    # Read through the models the run wrote them with (python -m experiments.check does too).
    try:
        variants = VARIANTS.validate_json(state_file.read_text())
        verdict = Verdict.model_validate_json(verdict_file.read_text())
        manifest = Manifest.model_validate_json((run_dir / "manifest.json").read_text())
        # The manifest keeps the config as JSON (older runs' too): only its costs are read.
        costs = CostModel.model_validate(manifest.config["costs"])
    except ValidationError as exc:
        raise ExportError(
            f"RUN_DIR: {run_dir} does not match the run-folder models ({exc.errors()[0]['loc']}: "
            f"{exc.errors()[0]['msg']}); `python -m experiments.check {run_dir}` names the record"
        ) from exc
    variant_id = variant_id or verdict.best_variant
    if not variant_id:
        raise ExportError(f"--variant: run {run_dir.name} has no winner; pass --variant ID")
    if variant_id not in variants:
        raise ExportError(
            f"--variant: {variant_id} is not in this run (e.g. {', '.join(list(variants)[:3])})"
        )
    variant = variants[variant_id]
    trades = trades_kind(variant.spec, len(manifest.config.get("tickers") or []))
    return write_export(
        Path(to),
        variant=variant,
        class_name=variant.class_name,
        costs=costs,
        figures=variant_figures(variant, verdict),
        lineage=lineage_of(variant_id, {k: v.parent_id for k, v in variants.items()}),
        run_dir=run_dir,
        banner=_banner(variant, verdict, manifest.config, trades),
        trades=trades,
    )


def _banner(
    variant: VariantEntry, verdict: Verdict, config: dict[str, Any], trades: str
) -> list[str] | None:
    """NOT A WINNER and the bars this variant failed, from its own in-sample figures;
    ``config`` is the manifest's (JSON, as the run recorded it)."""
    own = variant.in_sample
    rows = criteria_rows(
        criteria_of(config, config.get("criteria_text")),
        metrics=own.metrics if own else None,
        alpha=own.alpha if own else None,
        score=own.score if own else None,
        dsr=own.dsr if own else None,
        spa_pvalue=verdict.spa_pvalue,
        cash=verdict.benchmark is not None and verdict.benchmark.name == "cash",
        trades=trades,
    )
    vetoes = other_vetoes(own.vetoes if own else None)
    return not_a_winner(verdict, variant.variant_id, rows, vetoes)


def build_parser() -> argparse.ArgumentParser:
    """The export command's parser: RUN_DIR, --to and --variant."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run folder made by python -m swarm.develop"
    )
    parser.add_argument(
        "--to",
        type=Path,
        required=True,
        metavar="DIR",
        help="folder to write strategy.py, params.json and README.md into (made if missing)",
    )
    parser.add_argument(
        "--variant",
        default=None,
        metavar="ID",
        help="the variant to export, as in variants.json or experiments.jsonl (default: the "
        "run's best variant: its winner on SUCCESS, else marked NOT A WINNER)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI: export and print the folder; 2 with one error line when the run cannot be exported."""
    args = build_parser().parse_args(argv)
    try:
        dest = export_from_run(args.run_dir, args.to, args.variant)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
