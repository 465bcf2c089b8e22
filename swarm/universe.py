"""A plan's universe resolved against the data that exists.

The directive's words (``swarm.directive``) name a universe; this module turns it into
symbols the run can load, from what the source holds at the plan's timeframe:

* ``--data-dir DIR``: the CSV files there (``SYMBOL.csv``, ``SYMBOL_1h.csv``,
  ``BTCUSD_bitstamp_1d.csv`` …, as ``backtest.data.csv.find_csv`` finds them), plus the
  parquet cache when the source is ``auto``;
* no folder, offline (or ``--source csv``): the parquet cache;
* no folder, online or synthetic: anything (yfinance or the generator can try any symbol),
  so the built-in lists stand.

A sector or industry word takes the built-in list's names that have data; when none do, the
GICS table beside the data (``<corpus>/fundamentals/sp500_securities_gics.csv``, read at run
time, never copied) gives that sector's or sub-industry's names that have data. A coin word
takes one series per coin (``BTC-USD`` before ``BTCUSD`` before ``BTCUSDT``). A universe with
no data, or a ticker with none, is a ``DirectiveError`` naming the word, what the data holds,
and the nearest symbols. The default universe is used only when the directive names none.
"""

from __future__ import annotations

import csv
import difflib
from dataclasses import dataclass, field
from pathlib import Path

from swarm.directive import ASSET_CLASSES, DEFAULT_UNIVERSE, SECTORS, DirectiveError, Plan

GICS_FILE = "sp500_securities_gics.csv"
# Each sector or industry word as a GICS sector, or a substring of the sub-industry.
GICS: dict[str, tuple[str, str]] = {
    "tech": ("sector", "Information Technology"),
    "semis": ("sub", "Semiconductor"),
    "software": ("sub", "Software"),
    "internet": ("sub", "Internet"),
    "hardware": ("sub", "Hardware"),
    "banks": ("sub", "Banks"),
    "financials": ("sector", "Financials"),
    "energy": ("sector", "Energy"),
    "healthcare": ("sector", "Health Care"),
    "pharma": ("sub", "Pharmaceuticals"),
    "biotech": ("sub", "Biotechnology"),
    "utilities": ("sector", "Utilities"),
    "staples": ("sector", "Consumer Staples"),
    "discretionary": ("sector", "Consumer Discretionary"),
    "retail": ("sub", "Retail"),
    "industrials": ("sector", "Industrials"),
    "materials": ("sector", "Materials"),
    "realestate": ("sector", "Real Estate"),
    "telecom": ("sector", "Telecommunications Services"),
}
ETFS = (
    "SPY",
    "QQQ",
    "IWM",
    "DIA",
    "XLK",
    "XLF",
    "XLE",
    "XLV",
    "XLY",
    "XLP",
    "XLI",
    "XLU",
    "XLB",
    "SMH",
    "SOXX",
    "VTI",
    "VOO",
    "EFA",
    "EEM",
    "TLT",
    "GLD",
)
COINS = ("BTC", "ETH", "LTC", "XRP", "SOL", "ADA", "DOGE", "BNB")
_COIN_WORDS = {"bitcoin": ("BTC",), "ether": ("ETH",), "crypto": COINS}


@dataclass
class Inventory:
    """The symbols a source holds at one timeframe (None: any symbol may load)."""

    symbols: list[str] | None
    where: str
    gics_file: Path | None = None
    missing: list[str] = field(default_factory=list)

    def has(self, symbol: str) -> bool:
        """Whether the inventory holds ``symbol`` (always, when it cannot list its symbols)."""
        return self.symbols is None or symbol.upper() in {s.upper() for s in self.symbols}

    def spelled(self, symbol: str) -> str:
        """The symbol as the data spells it."""
        if self.symbols is None:
            return symbol
        return next((s for s in self.symbols if s.upper() == symbol.upper()), symbol)

    def describe(self) -> str:
        """Where the data is and what it holds (the first 12 symbols)."""
        if self.symbols is None:
            return self.where
        shown = ", ".join(self.symbols[:12])
        more = f", … {len(self.symbols)} symbols" if len(self.symbols) > 12 else ""
        return f"{self.where} holds {shown or 'nothing'}{more}"


def _intraday(path: Path) -> bool:
    """Whether a plain SYMBOL.csv holds bars with times of day (read its first data lines)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            fh.readline()
            stamps = [fh.readline().split(",")[0].strip() for _ in range(3)]
    except OSError:
        return False
    return any(len(s) > 15 and s[10] in " T" and s[11:16] != "00:00" for s in stamps)


def csv_symbols(data_dir: Path, timeframe: str) -> list[str]:
    """The symbols ``find_csv`` finds in ``data_dir`` at ``timeframe``."""
    out: list[str] = []
    for path in sorted(data_dir.glob("*.csv")):
        stem = path.stem
        parts = stem.split("_")
        if len(parts) > 1 and parts[-1] in ("1d", "1h"):
            if parts[-1] == timeframe:
                out.append(parts[0])
        elif (timeframe == "1h") == _intraday(path):
            out.append(stem)
    return list(dict.fromkeys(out))


def find_gics(data_dir: Path | None) -> Path | None:
    """The GICS table beside the data folder (``ohlcv/daily`` -> ``fundamentals/``)."""
    if data_dir is None:
        return None
    for base in (data_dir, data_dir.parent, data_dir.parent.parent):
        path = base / "fundamentals" / GICS_FILE
        if path.is_file():
            return path
    return None


def inventory(
    *,
    data_dir: Path | None,
    source: str,
    timeframe: str,
    offline: bool,
    cache_dir: Path | None = None,
) -> Inventory:
    """What the run's source chain can load at ``timeframe`` (see the module docstring)."""
    cached: list[str] = []
    if source in ("auto", "csv"):
        from backtest.data import default_cache_dir

        root = (cache_dir or default_cache_dir()) / "ohlcv"
        if root.is_dir():
            cached = [p.stem.rsplit("_", 1)[0] for p in sorted(root.glob(f"*_{timeframe}.parquet"))]
    if data_dir is not None and source in ("auto", "csv"):
        symbols = csv_symbols(data_dir, timeframe)
        extra = [s for s in cached if s not in symbols] if source == "auto" else []
        where = f"--data-dir {data_dir} ({timeframe})" + (" and the cache" if extra else "")
        return Inventory(symbols + extra, where, find_gics(data_dir))
    if source == "csv" or (source == "auto" and offline):
        return Inventory(cached, f"the cache ({timeframe}, offline)")
    return Inventory(None, f"the {source} source (any symbol may load)")


def _gics_names(path: Path | None, term: str) -> list[str]:
    if path is None or term not in GICS:
        return []
    kind, value = GICS[term]
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error):
        return []
    if kind == "sector":
        return [r["ticker"] for r in rows if r.get("gics_sector") == value]
    return [
        r["ticker"] for r in rows if value.lower() in (r.get("gics_sub_industry") or "").lower()
    ]


def _coin_series(inv: Inventory, coins: tuple[str, ...]) -> list[str]:
    """One series per coin the data holds: ``BTC-USD``, else ``BTCUSD``, else ``BTCUSDT``."""
    if inv.symbols is None:
        return [f"{c}-USD" for c in coins if c in ("BTC", "ETH")]
    out = []
    for coin in coins:
        for name in (f"{coin}-USD", f"{coin}USD", f"{coin}USDT"):
            if inv.has(name):
                out.append(inv.spelled(name))
                break
    return out


def _term_symbols(term: str, inv: Inventory) -> tuple[list[str], str]:
    """(the symbols with data for one universe word, where they came from)."""
    if term in _COIN_WORDS:
        return _coin_series(inv, _COIN_WORDS[term]), "built-in"
    if term == "etf":
        if inv.symbols is None:
            return list(SECTORS["etf"]), "built-in"
        return [inv.spelled(s) for s in ETFS if inv.has(s)], "built-in"
    builtin = [inv.spelled(s) for s in SECTORS.get(term, []) if inv.has(s)]
    if builtin:
        return builtin, "built-in"
    gics = [inv.spelled(s) for s in _gics_names(inv.gics_file, term) if inv.has(s)]
    return gics, "GICS"


def suggestions(word: str, inv: Inventory) -> str:
    """ "did you mean …" among the data's symbols, else a few of them."""
    if inv.symbols is None:
        return ""
    close = difflib.get_close_matches(word.upper(), inv.symbols, n=3, cutoff=0.5)
    if close:
        return f"; did you mean {', '.join(close)}?"
    return ""


def resolve_universe(plan: Plan, inv: Inventory) -> Plan:
    """The plan with ``tickers`` (and ``universe_source``) resolved against ``inv``.

    Raises DirectiveError naming the word, what the data holds and the nearest symbols."""
    notes = list(plan.notes)
    if plan.explicit_tickers:
        missing = [t for t in plan.explicit_tickers if not inv.has(t)]
        if missing:
            raise DirectiveError(
                f"--directive: {missing[0]} has no data at {plan.timeframe} in "
                f"{inv.describe()}{suggestions(missing[0], inv)} (understood: "
                f"{', '.join(plan.understood)}); name symbols the data holds, or pass --tickers"
            )
        tickers = [inv.spelled(t) for t in plan.explicit_tickers]
        return plan.model_copy(update={"tickers": tickers, "universe_source": "directive"})
    if plan.universe_terms:
        tickers: list[str] = []
        sources = []
        for term in plan.universe_terms:
            found, origin = _term_symbols(term, inv)
            if not found:
                label = "built-in list" if term in ASSET_CLASSES else "built-in list and GICS map"
                raise DirectiveError(
                    f"--directive: {term!r} has no symbols with data at {plan.timeframe} in "
                    f"{inv.describe()} (looked up in the {label}; understood: "
                    f"{', '.join(plan.understood)}); point --data-dir at a folder that holds "
                    f"them, name symbols it holds, or pass --tickers"
                )
            left_out = [s for s in SECTORS.get(term, []) if origin == "built-in" and not inv.has(s)]
            if left_out and term not in _COIN_WORDS and term != "etf":
                notes.append(f"{term}: no data for {', '.join(left_out)}; left out")
            tickers += [s for s in found if s not in tickers]
            sources.append(term)  # the memory's sector scope (swarm.memory.session)
            if origin == "GICS":
                notes.append(f"{term}: {', '.join(found)} from the GICS table {inv.gics_file}")
        return plan.model_copy(
            update={
                "tickers": tickers,
                "universe_source": "sector:" + "+".join(sources),
                "notes": notes,
            }
        )
    found = [inv.spelled(s) for s in DEFAULT_UNIVERSE if inv.has(s)]
    if not found:
        raise DirectiveError(
            "--directive: names no universe, and the default one "
            f"({', '.join(DEFAULT_UNIVERSE)}) has no data at {plan.timeframe} in "
            f"{inv.describe()}; name one (a sector, 'crypto', 'ETFs' or tickers the data "
            "holds) or pass --tickers"
        )
    notes.append(f"the directive names no universe: using the default {', '.join(found)}")
    return plan.model_copy(update={"tickers": found, "universe_source": "default", "notes": notes})
