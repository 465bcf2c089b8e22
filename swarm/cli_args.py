"""Checks of the data arguments shared by ``swarm.develop`` and ``swarm.research``.

Each raises UserInputError with one line: the argument, what is wrong, what to do.
"""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path
from typing import Literal

from swarm.errors import UserInputError

SOURCES = ("auto", "yfinance", "csv", "synthetic")
# Where the fundamental subagents read statements (swarm.research.inputs): the corpus file
# under --alt-data (offline), SEC EDGAR company facts or yfinance (online, cached / not).
FUNDAMENTALS = ("corpus", "edgar", "yfinance")
# Screened parameter sets per tuning step (--screen-size). Measured on 5 tech symbols x 3
# in-sample folds (2012-2019) on 2 shared cores: 500 sets in 1.9-2.3 s (1,000 in 3.9-4.6 s)
# against 5-6 s for the iteration's own 75 Backtrader jobs, and a 1.3-2.8 MB series file.
SCREEN_SIZE = 500
TPE_SCREEN_SIZE = 100  # --sampler tpe's default (default_screen_size)
TIMEFRAMES = ("1d", "1h")
ALT_OFF = "off"  # --alt-data off: no alternative data, not even the folder found above --data-dir


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one UserInputError line (the CLIs print it, exit 2)."""

    def error(self, message: str) -> None:  # one line, no usage dump
        """Raise UserInputError: one line, no usage dump."""
        raise UserInputError(f"{message} (see --help)")


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    """The data arguments both entry points take; ``check_data_args`` validates them."""
    p.add_argument("--start", default="2012-01-01", help="first date, ISO (default 2012-01-01)")
    p.add_argument("--end", default=None, help="last date, ISO (default today)")
    p.add_argument(
        "--timeframe", default=None, help="bar size: 1d or 1h (default: the directive's, else 1d)"
    )
    p.add_argument(
        "--data-dir", type=Path, help="folder of SYMBOL.csv files (date,open,high,low,close,volume)"
    )
    p.add_argument("--source", default="auto", help="auto (default), yfinance, csv or synthetic")
    p.add_argument("--offline", action="store_true", help="never touch the network (no yfinance)")
    p.add_argument(
        "--news-file", type=Path, help="CSV of dated headlines (date,datetime,ticker,headline)"
    )
    p.add_argument(
        "--alt-data",
        type=Path,
        metavar="DIR|off",
        help="folder laid out like the corpus (fundamentals/, analyst/, news/, options/, "
        "social/): point-in-time alternative data for the research swarm. Default: the nearest "
        "such folder at or above --data-dir (for the corpus, ../shared/data/), said on stderr; "
        "off: none",
    )
    p.add_argument(
        "--fundamentals",
        default="corpus",
        help="where the fundamental subagents read statements: corpus (default: the file under "
        "--alt-data, offline), edgar (SEC company facts; needs SEC_EDGAR_USER_AGENT, cached) or "
        "yfinance (no filing dates: conservative lags)",
    )
    p.add_argument(
        "--holdout", type=float, default=0.2, help="sealed holdout fraction (default 0.2)"
    )


def resolve_alt_data(alt: Path | str | None, data_dir: Path | None) -> tuple[Path | None, bool]:
    """(the alt-data folder, whether it was found rather than given). ``alt``: ``--alt-data``
    as given (None: not given; "off": none). Not given, the nearest folder at or above
    ``data_dir`` laid out like the corpus (``altdata.corpus.find_alt_root``), if any: with the
    corpus's ``--data-dir ../shared/data/ohlcv/daily`` the research reads ``../shared/data/``.
    Every corpus file in the folder is read once here: a bad one is a UserInputError naming
    the file and the line, before any run folder exists."""
    from altdata.corpus import AltDataFileError, check_alt_data, find_alt_root

    if alt is not None and str(alt) == ALT_OFF:
        return None, False
    if alt is not None:
        folder, found = Path(alt), False
        if not folder.is_dir():
            raise UserInputError(
                f"--alt-data: {folder} is not a folder; pass a folder laid out like "
                "../shared/data/ (fundamentals/, analyst/, news/, options/, social/), or off"
            )
        folder = folder.resolve()
    else:
        folder = find_alt_root(data_dir) if data_dir is not None and data_dir.is_dir() else None
        found = folder is not None
    if folder is not None:
        try:
            check_alt_data(folder)
        except AltDataFileError as exc:
            how = "found above --data-dir; --alt-data off reads none" if found else "given"
            raise UserInputError(f"--alt-data ({how}): {exc}") from None
    return folder, found


def alt_data_line(alt: Path | None, found: bool) -> str | None:
    """The progress line that says which alternative data a run reads (None: none)."""
    if alt is None:
        return None
    if found:
        return (
            f"alt data: {alt} (the nearest folder at or above --data-dir laid out like the "
            "corpus; --alt-data off leaves it out)"
        )
    return f"alt data: {alt} (--alt-data)"


def check_fundamentals(args: argparse.Namespace) -> str:
    """--fundamentals: a known source, and EDGAR's User-Agent when it may go online."""
    choice = getattr(args, "fundamentals", "corpus")
    if choice not in FUNDAMENTALS:
        raise UserInputError(f"--fundamentals: {choice!r} is not one of {', '.join(FUNDAMENTALS)}")
    if choice == "edgar" and not args.offline:
        from altdata.edgar import EdgarSettings
        from altdata.errors import AltDataError

        try:
            EdgarSettings.from_env().check_user_agent()
        except AltDataError as exc:
            raise UserInputError(f"--fundamentals edgar: {exc}") from None
    return choice


def iso_date(arg: str, value: str) -> date:
    """``value`` as a date, or UserInputError naming ``arg``."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UserInputError(f"{arg}: {value!r} is not an ISO date; use YYYY-MM-DD") from None


def parse_tickers(text: str | None) -> list[str]:
    """The comma-separated symbols, upper-cased; UserInputError when there are none."""
    tickers = [t.strip().upper() for t in (text or "").split(",") if t.strip()]
    if not tickers:
        raise UserInputError("--tickers: empty; give symbols like AAPL,MSFT")
    return tickers


def check_data_args(args: argparse.Namespace) -> tuple[date, date]:
    """--start/--end, --timeframe, --source, --data-dir, --news-file, --holdout; returns the dates."""
    start = iso_date("--start", args.start)
    end = iso_date("--end", args.end) if args.end else date.today()
    if end <= start:
        raise UserInputError(
            f"--end {end} is not after --start {start}; swap them or widen the range"
        )
    args.timeframe = args.timeframe or "1d"
    if args.timeframe not in TIMEFRAMES:
        raise UserInputError(f"--timeframe: {args.timeframe!r} is not supported; use 1d or 1h")
    if args.source not in SOURCES:
        raise UserInputError(f"--source: {args.source!r} is not one of {', '.join(SOURCES)}")
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise UserInputError(
            f"--data-dir: {args.data_dir} is not a folder; pass a folder of SYMBOL.csv files"
        )
    if args.source == "csv" and args.data_dir is None:
        raise UserInputError("--source csv needs --data-dir DIR with SYMBOL.csv files")
    if args.news_file is not None and not args.news_file.is_file():
        raise UserInputError(
            f"--news-file: {args.news_file} does not exist; pass a CSV of headlines"
        )
    args.alt_data, args.alt_data_found = resolve_alt_data(
        getattr(args, "alt_data", None), args.data_dir
    )
    check_fundamentals(args)
    if not 0.05 <= args.holdout < 0.5:
        raise UserInputError(f"--holdout: {args.holdout} must be in [0.05, 0.5) (default 0.2)")
    return start, end


def add_screen_arguments(p: argparse.ArgumentParser) -> None:
    """TUNE through the screen and the deflation's trial count (develop and calibrate)."""
    p.add_argument(
        "--screen-size",
        type=int,
        default=None,
        metavar="N",
        help=f"parameter sets a TUNE iteration screens around the best before Backtrader "
        f"confirms the top ones (default {SCREEN_SIZE}, or {TPE_SCREEN_SIZE} with --sampler tpe, "
        "whose model costs O(N) per draw: 500 TPE draws take ~35 s a TUNE step, 100 ~1 s; "
        "0 = --no-screen)",
    )
    p.add_argument(
        "--no-screen",
        action="store_true",
        help="TUNE proposes its few parameter moves directly, as before the screen",
    )
    p.add_argument(
        "--deflate-by",
        default=None,
        help="the deflated Sharpe's trial count: effective (clusters of correlated trials; the "
        "default with --sampler random) or raw (every trial; the default with --sampler tpe, "
        "whose draws crowd where earlier draws scored well, so clustering them would "
        "understate the search)",
    )
    p.add_argument(
        "--sampler",
        choices=("random", "tpe"),
        default="random",
        help="how the screen draws its --screen-size sets around a screenable parent: random "
        "(default: a Latin hypercube within 6 grid steps) or tpe (Optuna's TPE on the in-sample "
        "Sharpe, seeded from --seed, in the same box); where the screen does not apply, TUNE "
        "moves on the grid at random either way. Every drawn set is a trial",
    )
    p.add_argument(
        "--param-space",
        type=Path,
        metavar="FILE",
        help="a .toml or .json file of narrower parameter ranges per family (low, high, step; "
        "see docs/param_space.toml); tuning, the screen and mutation stay inside it",
    )


def screen_options(args: argparse.Namespace) -> dict[str, object]:
    """The RunConfig fields of ``add_screen_arguments`` (checked)."""
    sampler = getattr(args, "sampler", "random")
    size = args.screen_size if args.screen_size is not None else default_screen_size(sampler)
    if size < 0 or size > 20_000:
        raise UserInputError(f"--screen-size: {size} must be between 0 and 20000 (0 = --no-screen)")
    if args.deflate_by not in (None, "effective", "raw"):
        raise UserInputError(f"--deflate-by: {args.deflate_by!r}; use effective or raw")
    screen_size = 0 if args.no_screen else size
    if sampler == "tpe":
        _check_tpe(screen_size)
    return {
        "screen_size": screen_size,
        "deflate_by": args.deflate_by or default_deflation(sampler),
        "sampler": sampler,
        "param_space": _param_space(getattr(args, "param_space", None)),
    }


def default_screen_size(sampler: str) -> int:
    """The sets a TUNE step screens when ``--screen-size`` is not given. Random draws cost
    nothing to make; TPE refits its model on every draw, O(draws) each, so its sweep is
    O(N^2): 500 draws took 35 s on 3 symbols x 3 folds (97 % in Optuna), 100 draws about 1 s.
    TPE is meant to need fewer draws for the same search."""
    return TPE_SCREEN_SIZE if sampler == "tpe" else SCREEN_SIZE


def default_deflation(sampler: str) -> Literal["effective", "raw"]:
    """The DSR's trial count when ``--deflate-by`` is not given. Random draws spread over the
    box, so clusters of correlated trials measure the search. TPE crowds its draws where
    earlier draws scored well: on a calibration null its clusters were a third of random's at
    the same seed (56-66 against 181 of ~3,400 trials) and one null's DSR passed 0.95 by
    them, so a TPE run is deflated by every trial it drew."""
    return "raw" if sampler == "tpe" else "effective"


def _check_tpe(screen_size: int) -> None:
    """TPE draws the screen's sets: it needs the screen, and Optuna installed."""
    if screen_size == 0:
        raise UserInputError(
            "--sampler tpe: TPE draws the screen's sets and the screen is off; drop "
            "--no-screen / --screen-size 0, or use --sampler random"
        )
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise UserInputError(
            "--sampler tpe: Optuna is not installed; pip install optuna (or pip install -e .)"
        ) from None


def _param_space(path: Path | None):
    """--param-space FILE read and checked (the code's grid without it)."""
    from strategies.param_space import ParamSpace, ParamSpaceError, load_param_space
    from swarm.families import registry

    if path is None:
        return ParamSpace()
    try:
        return load_param_space(path.expanduser().resolve(), registry().grid_parameters())
    except ParamSpaceError as exc:
        raise UserInputError(f"--param-space: {exc}") from None
