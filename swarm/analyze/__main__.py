"""python -m swarm.analyze --ticker NVDA --date 2019-06-03 --data-dir DIR

One grounded decision for a ticker and a date: four analysts, a bull/bear debate judged by a
research manager, a trader's ATR-anchored thesis, a risk team and judge, and a deterministic
risk engine that sizes or rejects. Only bars up to and including the date are read.

Writes OUT/<analysis_id>/ (decision.json, report.md, approval.html, book.json,
features.json, manifest.json) and prints the folder last on stdout. ``approval.html`` is the
approval screen: one offline page to read before approving the order. ``--book`` gives the risk engine the
account's open positions and cash (a JSON, or an earlier analysis folder's book.json, the
book after its decision). ``--review ANALYSIS_DIR`` classifies that decision's outcome once
its horizon has passed in the data (review.json, review.md) and stores the lesson in memory.
Exit codes: 0 done, 2 bad input (one line saying what to fix), 1 internal failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from swarm.cli_args import OneLineParser
from swarm.errors import UserInputError
from swarm.llm.cli_args import LLMHelp, add_llm_arguments

LLM_HELP = LLMHelp(
    llm="none (default), openai:MODEL or openai-compatible:MODEL",
    base_url="server URL for openai-compatible",
    quick="model for analysts, debaters, risk team",
    deep="model for manager, judge, reviewer, deep trader",
    structured="auto, json_schema or function_calling",
    budget="token budget of the analysis",
    output="per call (default 512)",
    cache="replay cache (default OUT/.llm-cache)",
    mask="mask LLM prompts (aliases, day offsets, rebased prices); default: on "
    "when the data is older than the model's cutoff; --no-mask: off",
    cutoff="the model's knowledge cutoff (default: documented per model family; "
    "unknown models are assumed to know every date)",
)


def build_parser() -> argparse.ArgumentParser:
    """The analyze command's parser: the decision's inputs, its limits, the brain and --review."""
    p = OneLineParser(prog="python -m swarm.analyze", description=__doc__.split("\n\n")[1])
    p.add_argument("--ticker", help="one symbol, e.g. NVDA")
    p.add_argument("--date", help="decision date, ISO (YYYY-MM-DD): the last bar it may read")
    p.add_argument("--data-dir", type=Path, help="folder of SYMBOL.csv files")
    p.add_argument(
        "--news-file", type=Path, help="CSV of dated headlines (date,datetime,ticker,headline)"
    )
    p.add_argument(
        "--alt-data",
        type=Path,
        metavar="DIR|off",
        help="folder laid out like the corpus (fundamentals/, analyst/, news/, options/, "
        "social/): point-in-time data for the fundamentals and sentiment analysts. Default: the "
        "nearest such folder at or above --data-dir (for the corpus, ../shared/data/); off: none",
    )
    p.add_argument(
        "--debate-rounds",
        type=int,
        default=2,
        help="bull/bear rounds (1..5, default 2: an opening and a rebuttal)",
    )
    p.add_argument("--risk-rounds", type=int, default=1, help="risk-team rounds (1..5, default 1)")
    p.add_argument(
        "--capital",
        type=float,
        default=None,
        help="account capital (default: the book's, else 100000)",
    )
    p.add_argument(
        "--book",
        type=Path,
        default=None,
        metavar="FILE|ANALYSIS_DIR",
        help="the account's open positions and cash (JSON, see docs/decision-desk.md), or an "
        "earlier analysis folder to continue from its book.json (default: an empty account)",
    )
    p.add_argument(
        "--risk-pct", type=float, default=1.0, help="%% of capital at risk at the stop (default 1)"
    )
    p.add_argument(
        "--horizon-days", type=int, default=10, help="bars the thesis has to play out (default 10)"
    )
    p.add_argument(
        "--out", type=Path, default=Path("runs"), help="where analysis folders go (default ./runs)"
    )
    p.add_argument(
        "--memory-dir", default=None, help="memory folder, or 'off' (default: user cache dir)"
    )
    p.add_argument("--review", type=Path, metavar="ANALYSIS_DIR", help="review a past analysis")
    add_llm_arguments(p, LLM_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


DEFAULT_CAPITAL = 100_000.0


def read_book(path: Path):
    """The ``--book`` file (or an analysis folder's ``book.json``) as a :class:`Book`; a
    missing file, bad JSON or a bad field is exit 2 naming the file and the field."""
    from pydantic import ValidationError

    from swarm.analyze.book import BOOK_FILE, Book

    file = path / BOOK_FILE if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except OSError:
        hint = "an analysis folder without one" if path.is_dir() else "no such file"
        raise UserInputError(
            f"--book: {file}: cannot read it ({hint}); pass a book JSON such "
            'as {"positions": [{"ticker": "AAPL", "quantity": 100, '
            '"price": 150.0}], "cash": 85000}'
        ) from None
    try:
        return Book.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(the document)"
        raise UserInputError(
            f"--book: {file}: field {field}: {err['msg']}; fix that field "
            "(fields: capital, cash, loss_today, positions[ticker, quantity, "
            "price])"
        ) from None


def _capital(args: argparse.Namespace, book) -> float:
    if book is None or book.capital is None:
        return DEFAULT_CAPITAL if args.capital is None else args.capital
    if args.capital is not None and args.capital != book.capital:
        raise UserInputError(
            f"--capital: {args.capital:g} disagrees with the book's capital "
            f"{book.capital:g} ({args.book}); drop one of them"
        )
    return book.capital


def _config(args: argparse.Namespace, book=None):
    from pydantic import ValidationError

    from swarm.analyze.book import portfolio_of
    from swarm.analyze.contracts import AnalysisConfig, RiskLimits

    bounds = {
        "--debate-rounds": (args.debate_rounds, 1, 5),
        "--risk-rounds": (args.risk_rounds, 1, 5),
        "--risk-pct": (args.risk_pct, 0.01, 10),
        "--horizon-days": (args.horizon_days, 1, 250),
    }
    for flag, (value, lo, hi) in bounds.items():
        if not lo <= value <= hi:
            raise UserInputError(f"{flag}: {value:g} is out of range; use {lo:g}..{hi:g}")
    capital = _capital(args, book)
    if not capital > 0:
        raise UserInputError(f"--capital: {capital:g} must be positive, e.g. 100000")
    limits = RiskLimits()
    portfolio = (
        portfolio_of(book, capital=capital, short_margin=limits.short_margin) if book else None
    )
    try:
        return AnalysisConfig(
            debate_rounds=args.debate_rounds,
            risk_rounds=args.risk_rounds,
            capital=capital,
            risk_pct=args.risk_pct,
            horizon_days=args.horizon_days,
            limits=limits,
            **({"portfolio": portfolio} if portfolio else {}),
        )
    except ValidationError as exc:  # pragma: no cover - the bounds above catch these first
        raise UserInputError(f"options: {exc.errors()[0]['msg']}") from None


def _read_bars(ticker: str, data_dir: Path | None):
    from backtest.data import find_csv, read_bars_csv
    from backtest.errors import DataError, MissingSymbolError

    if data_dir is None:
        raise UserInputError("--data-dir: required; pass a folder of SYMBOL.csv files")
    if not data_dir.is_dir():
        raise UserInputError(
            f"--data-dir: {data_dir} is not a folder; pass a folder of SYMBOL.csv files"
        )
    try:
        path = find_csv(ticker, data_dir)
        bars = read_bars_csv(path)
    except MissingSymbolError as exc:
        raise UserInputError(f"--ticker: unknown ticker {ticker}: {exc.short}") from None
    except DataError as exc:
        raise UserInputError(str(exc)) from None
    if bars.empty:
        raise UserInputError(f"--ticker: {path} has no bars; pick another ticker")
    return bars, path


def _memory(spec: str | None):
    """The research memory, or None when switched off. Lazy: the store (and chromadb) is
    opened only to write, or to recall when neither its index (no record about the ticker)
    nor its review sidecar (``swarm.memory.sidecar``, current) can answer without it."""
    if spec is not None and spec.lower() in ("off", "none"):
        return None
    from swarm.memory import ResearchMemory

    if spec is not None and Path(spec).exists() and not Path(spec).is_dir():
        raise UserInputError(f"--memory-dir: {spec} is a file; pass a folder or 'off'")
    return ResearchMemory(Path(spec) if spec else None, lazy=True)


def _llm(args: argparse.Namespace):
    from swarm.analyze.nodes import Brain

    if args.llm in (None, "", "none"):
        return Brain()
    from swarm.llm.client import LLMClient
    from swarm.llm.mask import known_entities
    from swarm.llm.settings import mask_mode, parse_llm_arg

    try:
        settings = parse_llm_arg(
            args.llm,
            base_url=args.llm_base_url,
            quick_model=args.llm_quick_model,
            deep_model=args.llm_deep_model,
            structured=args.llm_structured,
            max_tokens=args.max_llm_tokens,
            cache_dir=args.llm_cache,
            max_output_tokens=args.llm_max_output_tokens,
            mask=mask_mode(getattr(args, "mask", None)),
            cutoff=getattr(args, "llm_cutoff", None),
            concurrency=getattr(args, "llm_concurrency", None),
        )
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    cache = args.llm_cache or (args.out / ".llm-cache")
    return Brain(llm=LLMClient(settings, cache_dir=cache), known=known_entities(args.data_dir))


def _folder(out: Path, name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    root = out / f"{stamp}-{name}"
    n = 1
    while root.exists():
        n += 1
        root = out / f"{stamp}-{name}-{n}"
    root.mkdir(parents=True)
    return root


def _write(root: Path, rel: str, text: str) -> None:
    tmp = root / f".{rel}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, root / rel)


def _progress(args: argparse.Namespace):
    from swarm.progress import Progress

    return Progress(quiet=args.quiet)


def analyze(args: argparse.Namespace, argv: list[str]) -> Path:
    """Validate every input before any folder exists; then decide and write the folder."""
    import pandas as pd

    from altdata.corpus import AltData
    from swarm.analyze.approval import APPROVAL_FILE
    from swarm.analyze.memory_notes import setup_query
    from swarm.analyze.pipeline import check_history, cut_at, decide
    from swarm.analyze.review import recall_reviews
    from swarm.cli_args import alt_data_line, resolve_alt_data
    from swarm.research.features import compute_features

    ticker, day = _ticker_and_date(args)
    book = read_book(args.book) if args.book is not None else None
    cfg = _config(args, book)
    bars, path = _read_bars(ticker, args.data_dir)
    first, last = bars.index[0].date(), bars.index[-1].date()
    if not first <= day <= last:
        raise UserInputError(
            f"--date: {day} is outside the data of {ticker} ({first}..{last}); "
            "pick a date inside it"
        )
    news = _read_news(args.news_file, day)
    alt_dir, found = resolve_alt_data(args.alt_data, args.data_dir)
    brain = _llm(args)
    progress = _progress(args)
    cut = cut_at(bars, pd.Timestamp(day))
    del bars  # nothing after the date from here on
    bundle = compute_features(ticker, cut)
    check_history(bundle, cfg.atr_period)  # before any output: too little history is bad input
    memory = _memory(args.memory_dir)
    as_of = str(cut.index[-1].date())
    query = setup_query(ticker, bundle.value("CLOSE"), bundle.value("EMA_20"))
    recalled = recall_reviews(memory, ticker, as_of, query=query) if memory is not None else []
    progress.stage(
        "data",
        f"{ticker}: {len(cut)} bars {first}..{as_of} from {path.name}; "
        f"{len(news)} headlines; {len(recalled)} past reviews recalled",
    )
    if (line := alt_data_line(alt_dir, found)) is not None:  # every input is checked by now
        progress.stage("data", line)
    info = {"source": path.name} | ({"requested_date": str(day)} if str(day) != as_of else {})
    decision = decide(
        ticker,
        pd.Timestamp(day),
        cut,
        cfg,
        brain,
        news=news,
        recalled=recalled,
        data_info=info,
        alt=AltData(alt_dir) if alt_dir is not None else None,
    )
    progress.stage(
        "decision", f"{decision.action.value} ({decision.status.value}): {decision.reason}"
    )
    root = _folder(args.out, f"analyze-{ticker.lower()}-{decision.date}")
    _write_decision_files(root, decision, book, cfg, brain, bundle, ticker)
    manifest = _manifest(args, argv, path, memory, brain, decision) | {
        "alt_data": str(alt_dir) if alt_dir is not None else None,
        "alt_data_found": found,
    }
    _write(
        root, "manifest.json", json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n"
    )
    progress.stage("written", f"{root / 'report.md'}; approval screen {root / APPROVAL_FILE}")
    return root


def _ticker_and_date(args: argparse.Namespace):
    """(ticker, decision date) of --ticker and --date, both required."""
    from swarm.cli_args import iso_date

    if not args.ticker or not args.ticker.strip():
        raise UserInputError("--ticker: required; give one symbol, e.g. --ticker NVDA")
    if not args.date:
        raise UserInputError("--date: required; give the decision date, e.g. --date 2019-06-03")
    ticker = args.ticker.strip().upper()
    day = iso_date("--date", args.date.strip())
    return ticker, day


def _read_news(news_file: Path | None, day) -> list[Any]:
    """The --news-file headlines dated up to ``day`` (none without the option)."""
    news: list[Any] = []
    if news_file is not None:
        from swarm.research.news import load_news_csv

        if not news_file.is_file():
            raise UserInputError(
                f"--news-file: {news_file} does not exist; pass a CSV of headlines"
            )
        try:
            news = [n for n in load_news_csv(news_file) if n.date <= day]
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserInputError(f"--news-file: cannot read {news_file}: {exc}") from None
    return news


def _write_decision_files(root: Path, decision, book, cfg, brain, bundle, ticker: str) -> None:
    """decision.json, report.md, the approval screen, the book after the decision, the LLM
    calls and features.json, into ``root``."""
    from swarm.analyze.approval import APPROVAL_FILE, render_approval
    from swarm.analyze.book import BOOK_FILE, Book, book_after
    from swarm.analyze.report import render_report

    _write(root, "decision.json", decision.model_dump_json(indent=2) + "\n")
    _write(root, "report.md", render_report(decision))
    _write(root, APPROVAL_FILE, render_approval(decision))
    after = book_after(
        book or Book(), decision, capital=cfg.capital, short_margin=cfg.limits.short_margin
    )
    _write(root, BOOK_FILE, after.model_dump_json(indent=2, exclude_none=True) + "\n")
    if brain.llm is not None:
        brain.llm.write_calls(root / "llm_calls.jsonl")
    snap = bundle.snapshot(bundle.keys)
    _write(
        root,
        "features.json",
        json.dumps(
            {"ticker": ticker, "as_of": bundle.as_of, "n_bars": bundle.n_bars, "features": snap},
            indent=2,
            sort_keys=True,
        )
        + "\n",
    )


def _manifest(
    args: argparse.Namespace, argv: list[str], path: Path, memory, brain, decision
) -> dict:
    """What the analysis read and ran with: argv, data files, memory, brain, LLM usage, masking."""
    return {
        "entry_point": "swarm.analyze",
        "argv": argv,
        "created_at": datetime.now(UTC).isoformat(),
        "data_dir": str(args.data_dir.resolve()),
        "data_file": str(path.resolve()),
        "news_file": str(args.news_file.resolve()) if args.news_file else None,
        "book": str(args.book.resolve()) if args.book else None,
        "memory": (
            {"available": False, "reason": "--memory-dir off"}
            if memory is None
            else memory.status()
        ),
        "brain": brain.name,
        "llm_usage": brain.llm.stats() | brain.llm.replay_stats() if brain.llm else None,
        "masking": decision.masking,
    }


def review(args: argparse.Namespace) -> Path:
    """--review: classify a past analysis's outcome once its horizon has passed, write review.json
    and review.md, store the lesson; returns the folder."""
    from swarm.analyze.contracts import Decision
    from swarm.analyze.report import render_review
    from swarm.analyze.review import (
        HorizonNotPassedError,
        critique_client,
        critique_with_llm,
        review_decision,
        store_review,
    )

    root = args.review
    try:
        decision = Decision.model_validate_json((root / "decision.json").read_text())
    except FileNotFoundError:
        raise UserInputError(
            f"--review: {root} has no decision.json; pass an analysis folder"
        ) from None
    except ValueError as exc:
        raise UserInputError(
            f"--review: {root}/decision.json is not a decision: {str(exc)[:120]}"
        ) from None
    data_dir = args.data_dir
    if data_dir is None:
        try:
            data_dir = Path(json.loads((root / "manifest.json").read_text())["data_dir"])
        except (OSError, ValueError, KeyError):
            raise UserInputError("--data-dir: required to review (the manifest has none)") from None
    bars, _ = _read_bars(decision.ticker, data_dir)
    try:
        rv = review_decision(decision, bars)
    except HorizonNotPassedError as exc:
        raise UserInputError(f"--review: {exc}") from None
    brain = _llm(args)
    if brain.llm is not None:
        llm = critique_client(brain.llm, decision, rv, bars, known=brain.known)
        rv = critique_with_llm(llm, decision, rv, log=[].append)
    memory = _memory(args.memory_dir)
    stored = memory is not None and memory.available and store_review(memory, rv)
    rv = rv.model_copy(update={"stored_in_memory": stored})
    _write(root, "review.json", rv.model_dump_json(indent=2) + "\n")
    _write(root, "review.md", render_review(rv))
    _progress(args).stage("review", f"{rv.outcome.value} -> {rv.tag.value}: {rv.exit_reason}")
    return root


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 done (the folder printed last), 2 bad input, 130 interrupted, 1 internal failure."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        root = review(args) if args.review is not None else analyze(args, argv)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal failure: say so in one line, keep the traceback
        print(f"internal error: {exc!r}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return 1
    print(root)
    return 0


if __name__ == "__main__":
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
