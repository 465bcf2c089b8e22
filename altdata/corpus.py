"""Alternative data from a folder laid out like the corpus (``../shared/data/``), point in time.

``fundamentals/``, ``analyst/``, ``news/``, ``options/`` and ``social/``, each file with its
corpus columns; every table gets ``known_at`` from its availability rule (the data README's):

* annual statements: the first NYSE session strictly after period end + 90 days, at its open;
* earnings surprises: after the report date's close (``post``, or no release time), or at its
  open (``pre``);
* analyst rating actions and headlines: their timestamp (New York offset);
* CBOE put/call ratios: after the day's close (market-wide: no ticker);
* cashtag tweets: their creation time (UTC);
* GICS sectors: a static reference (as of about 2017), known from the start: a sector map, not
  a signal.

A missing folder or file is not an error: ``AltData.table`` returns None and ``missing`` says
which folder to add. ``find_alt_root`` finds the layout above a ``--data-dir``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from altdata.errors import AltDataError
from altdata.pit import KNOWN_AT, TICKER, AltTable
from altdata.sessions import session_after, session_close, session_on_or_after, session_open
from altdata.statements import StatementsFeed

FOLDERS = ("fundamentals", "analyst", "news", "options", "social")
# "Known after the close": a row released after a session's close reaches the next bar, never
# the bar that decides at that close. Half an hour is a conservative publication delay.
AFTER_CLOSE = pd.Timedelta(minutes=30)
LAYOUT_MIN = 2  # folders of the five that make a folder "laid out like the corpus"


def _sessions_utc(days: pd.Series, at: Callable[[object], pd.Timestamp]) -> pd.Series:
    """``at(day)`` for each day, computed once per distinct day."""
    moments = {d: at(d) for d in days.unique()}
    return pd.Series(pd.DatetimeIndex([moments[d] for d in days], tz="UTC"), index=days.index)


def _statements(frame: pd.DataFrame) -> pd.Series:
    ends = pd.to_datetime(frame["period_end"]) + pd.Timedelta(days=90)
    return _sessions_utc(ends, lambda d: session_open(session_after(d)))


def _surprises(frame: pd.DataFrame) -> pd.Series:
    pre = frame["release_time"].astype(str).str.strip().str.lower().eq("pre")
    day = pd.to_datetime(frame["report_date"])  # a report dated on a holiday: the next session
    close = _sessions_utc(day, lambda d: session_close(session_on_or_after(d)) + AFTER_CLOSE)
    opens = _sessions_utc(day, lambda d: session_open(session_on_or_after(d)))
    return opens.where(pre, close)


def _stamped(column: str) -> Callable[[pd.DataFrame], pd.Series]:
    def known(frame: pd.DataFrame) -> pd.Series:
        return pd.to_datetime(frame[column], utc=True, format="mixed")

    return known


def known_after_close(days: pd.Series) -> pd.Series:
    """Rows dated by day only (a filing date, a daily statistic): known after that day's
    close, or the next session's when the day is no session."""
    days = pd.to_datetime(days)
    return _sessions_utc(days, lambda d: session_close(session_on_or_after(d)) + AFTER_CLOSE)


def _after_close(column: str) -> Callable[[pd.DataFrame], pd.Series]:
    def known(frame: pd.DataFrame) -> pd.Series:
        return known_after_close(frame[column])

    return known


def _static(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(pd.Timestamp("1990-01-01", tz="UTC"), index=frame.index)


@dataclass(frozen=True)
class Dataset:
    """One corpus file: where it is, whether rows belong to a ticker, when a row is known."""

    name: str
    source: str  # relative to the alt-data root
    per_ticker: bool
    known_at: Callable[[pd.DataFrame], pd.Series]
    rule: str
    dates: tuple[str, ...] = ()  # the columns the rule reads as dates (checked row by row)


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "statements",
            "fundamentals/annual_statements_2012_2016.csv",
            True,
            _statements,
            "first NYSE session after period end + 90 days, at the open",
            ("period_end",),
        ),
        Dataset(
            "sectors",
            "fundamentals/sp500_securities_gics.csv",
            True,
            _static,
            "static reference (GICS as of about 2017)",
        ),
        Dataset(
            "surprises",
            "analyst/earnings_surprises_2012_2019.csv",
            True,
            _surprises,
            "report date: at the open when released pre-market, else after the close",
            ("report_date",),
        ),
        Dataset(
            "ratings",
            "analyst/benzinga_rating_actions_2011_2020.csv",
            True,
            _stamped("datetime"),
            "the action's timestamp",
            ("datetime",),
        ),
        Dataset(
            "headlines",
            "news/benzinga_headlines_nvda_tsla_goog_amzn_2011_2020.csv",
            True,
            _stamped("datetime"),
            "the headline's timestamp",
            ("datetime",),
        ),
        Dataset(
            "headlines_subset",
            "news/benzinga_analyst_ratings_subset.csv",
            True,
            _stamped("datetime"),
            "the headline's timestamp",
            ("datetime",),
        ),
        Dataset(
            "business_news",
            "news/bbc_business_rss_2022_2024.csv",
            False,
            _stamped("datetime_utc"),
            "the item's timestamp (UTC); market-wide",
            ("datetime_utc",),
        ),
        Dataset(
            "put_call",
            "options/cboe_putcall_daily_2006_2019.csv",
            False,
            _after_close("date"),
            "after the day's close; market-wide",
            ("date",),
        ),
        Dataset(
            "tweets",
            "social/stocknet_tweets_2014_2016.csv",
            True,
            _stamped("created_at_utc"),
            "the tweet's creation time (UTC)",
            ("created_at_utc",),
        ),
    )
}


FEED_TABLES = ("statements", "statements_quarterly")  # what an online statements source serves


def load(root: Path, dataset: Dataset) -> AltTable:
    """``dataset`` read from ``root``, stamped with ``known_at`` and sorted by it. Raises
    ``AltDataFileError`` naming the file (and the row) when it cannot be read, a column the
    rule needs is missing, or a date does not parse."""
    path = root / dataset.source
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:  # pandas' parser errors included
        raise AltDataFileError(
            f"{path}: not a readable CSV ({' '.join(str(exc).split())})"
        ) from None
    missing = [
        c for c in ((TICKER,) if dataset.per_ticker else ()) + dataset.dates if c not in frame
    ]
    if missing:
        raise AltDataFileError(
            f"{path}: no {', '.join(map(repr, missing))} column (the corpus columns are "
            "expected; see the data README)"
        )
    if dataset.per_ticker:
        _check_tickers(path, frame[TICKER])
    for column in dataset.dates:
        _check_dates(path, frame[column])
    try:
        known = dataset.known_at(frame)
    except KeyError as exc:
        raise AltDataFileError(
            f"{path}: missing column {exc} (the corpus columns are expected)"
        ) from None
    except ValueError as exc:  # a value the rule cannot read (a release time, say)
        raise AltDataFileError(f"{path}: {' '.join(str(exc).split())[:300]}") from None
    frame[KNOWN_AT] = known
    frame = frame.dropna(subset=[KNOWN_AT]).sort_values(KNOWN_AT, kind="stable")
    return AltTable(
        dataset.name, dataset.source, frame.reset_index(drop=True), dataset.per_ticker, dataset.rule
    )


class AltDataFileError(AltDataError, ValueError):
    """A file of an alt-data folder that cannot be read as the corpus's: the message names the
    file, the row (its line in the file) and the fix."""


def _check_dates(path: Path, values: pd.Series) -> None:
    """Every value of a date column parses, or the first that does not (an empty one
    included: a row with no date cannot be placed in time) is named, with its line."""
    parsed = pd.to_datetime(values, errors="coerce", utc=True, format="mixed")
    bad = parsed.isna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        value = values.iloc[row]
        what = (
            "is empty" if pd.isna(value) or not str(value).strip() else f"{value!r} is not a date"
        )
        raise AltDataFileError(
            f"{path}: line {row + 2}: {values.name} {what}; fix or delete that row (ISO dates, "
            "e.g. 2015-06-01 or 2015-06-01T16:05:00-04:00)"
        )


# An exchange symbol as the corpus writes it: upper case, a class or market suffix allowed
# (BRK.B, BF-B, BTC-USD). A row whose ticker is not one would match no symbol: silently unused.
TICKER_FORM = re.compile(r"[A-Z][A-Z0-9]{0,9}(?:[.-][A-Z0-9]{1,4})?")


def _check_tickers(path: Path, values: pd.Series) -> None:
    """Every ticker is an upper-case symbol, or the first that is not (empty included) is
    named with its line: its rows would reach no symbol, a silent skip."""
    ok = values.map(lambda v: isinstance(v, str) and TICKER_FORM.fullmatch(v) is not None)
    if not ok.all():
        row = int((~ok).to_numpy().argmax())
        value = values.iloc[row]
        what = "is empty" if pd.isna(value) or not str(value).strip() else f"{value!r} is not"
        raise AltDataFileError(
            f"{path}: line {row + 2}: ticker {what} a symbol as the price files name them "
            "(upper case, e.g. AAPL or BRK.B, no spaces or $); fix or delete that row"
        )


def check_alt_data(root: Path) -> list[str]:
    """Read every corpus file under ``root`` once, before a run starts; ``AltDataFileError``
    on the first bad one. Returns the files found (relative to ``root``)."""
    found = []
    for dataset in DATASETS.values():
        if (root / dataset.source).is_file():
            load(root, dataset)
            found.append(dataset.source)
    return found


@dataclass
class AltData:
    """The alternative data under ``root`` (None: none), each table loaded once.

    ``statements``: an online source (``altdata.edgar``, ``altdata.yf_fundamentals``) that
    serves the ``statements`` tables in place of the corpus file; the other tables still come
    from ``root``."""

    root: Path | None
    statements: StatementsFeed | None = None
    _tables: dict[str, AltTable | None] = field(default_factory=dict, repr=False)

    def table(self, name: str) -> AltTable | None:
        """The named table (``DATASETS``), or None when its file is not under the root."""
        if self.statements is not None and name in FEED_TABLES:
            return self.statements.table(name)
        if name not in DATASETS:  # statements_quarterly: only an online source has it
            return None
        if name not in self._tables:
            ds = DATASETS[name]
            ok = self.root is not None and (self.root / ds.source).is_file()
            self._tables[name] = load(self.root, ds) if ok and self.root else None
        return self._tables[name]

    def missing(self, name: str) -> str:
        """Why ``name`` has no table, naming the folder to add."""
        if self.statements is not None and name in FEED_TABLES:
            return self.statements.missing(name)
        if name not in DATASETS:
            return f"no {name} without an online source (--fundamentals edgar or yfinance)"
        ds = DATASETS[name]
        folder = ds.source.split("/", 1)[0]
        if self.root is None:
            return (
                f"no alternative-data folder (pass --alt-data DIR laid out like the corpus, "
                f"with {folder}/{Path(ds.source).name})"
            )
        return f"{self.root / folder}/ has no {Path(ds.source).name}"


def is_layout(folder: Path) -> bool:
    """Whether ``folder`` has enough of the corpus's folders to be read as one."""
    return sum((folder / f).is_dir() for f in FOLDERS) >= LAYOUT_MIN


def find_alt_root(data_dir: Path | None) -> Path | None:
    """The nearest folder at or above ``data_dir`` laid out like the corpus, or None."""
    if data_dir is None:
        return None
    for folder in (data_dir.resolve(), *data_dir.resolve().parents):
        if is_layout(folder):
            return folder
    return None
