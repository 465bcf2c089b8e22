"""What a model could remember, taken out of its prompts: the Masker (issue 29).

A model trained on later text knows how NVDA did after June 2019. In a backtest that knowledge
is lookahead, so a masked prompt names no ticker, company or year and shows no price level:

- tickers become aliases (``ASSET-A``); other known tickers and company or product names
  become ``[ticker]`` / ``[entity]``;
- ISO dates become calendar-day offsets from the decision bar (``D-12``); years are removed;
- GICS sector and sub-industry names become ``[sector]``;
- prices are rebased to 100 at the window start and volumes scaled to 100 = the window's
  mean; raw fundamental amounts (revenue, assets...) are withheld, ratios stay. A scope of
  several symbols (a develop run) rebases each prompt by the one symbol it is about, and
  withholds keyed price levels from a prompt about several.

Everything here is a pure function of the text and a :class:`MaskContext`. The context (the
alias map, the scales) lives on the trusted side only: :func:`unmask_answer` maps an answer
back, and no mapping ever enters a prompt.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Evidence keys by unit. Price-denominated values are rebased; volumes scaled; raw amounts
# (they name a company by size) withheld. Everything else is a ratio and stays as it is.
PRICE_KEY = re.compile(
    r"^(?:CLOSE|OPEN|HIGH|LOW|SMA_|EMA_|WMA_|BBANDS_|ATR_|MACD|HIGHEST_|LOWEST_|SWING_|FORECAST_"
    r"|entry$|stop$|target$|atr$|risk_per_share$|rules_stop$|rules_target$|price$|exit_price$|exit$)",
    re.IGNORECASE,
)
VOLUME_KEY = re.compile(r"^(?:VOLUME|OBV$|AD$|ADOSC)", re.IGNORECASE)
AMOUNT_KEY = re.compile(
    r"(?:revenue|income|assets|liabilit|equity_total|cash|debt|market_?cap|shares_out|ebitda"
    r"|capex|amount|sales$)",
    re.IGNORECASE,
)
# A percent, a normalised value or a comparison under a price or volume family's prefix
# (BBANDS_WIDTH_20_2_pct, VOLUME_vs_SMA_20) is a ratio.
RATIO_KEY = re.compile(r"(?:pct|norm|ratio|zscore|_z$|_vs_)", re.IGNORECASE)
AMOUNT_MIN = 100_000.0  # a bare number this large in prose is an amount that could identify
REBASE_TO = 100.0
WINDOW_BARS = 252  # the longest lookback the features read (HIGHEST_252): the rebasing window

_KEYED = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)":\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\d])")
_ISO_DATE = re.compile(r"(?<!\d)((?:19|20)\d{2})-(\d{2})-(\d{2})(?:[T ][0-9:.+\-Z]+)?(?!\d)")
YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d{2}(?![\d]|\.\d|,\d)")
ALIAS_PREFIX = "ASSET-"

# Names the corpus's famous tickers trade under besides their legal names, and their best
# known products: enough for a model to recognise the company in a headline.
BUILTIN_NAMES = (
    "Apple",
    "iPhone",
    "iPad",
    "Mac",
    "Microsoft",
    "Windows",
    "Xbox",
    "Azure",
    "Nvidia",
    "NVIDIA",
    "GeForce",
    "Google",
    "Alphabet",
    "YouTube",
    "Android",
    "Amazon",
    "AWS",
    "Alexa",
    "Facebook",
    "Meta",
    "Instagram",
    "WhatsApp",
    "Oracle",
    "Intel",
    "Cisco",
    "IBM",
    "AMD",
    "Advanced Micro",
    "Netflix",
    "Adobe",
    "Salesforce",
    "Tesla",
    "Model 3",
    "Musk",
    "Qualcomm",
    "Texas Instruments",
    "Broadcom",
    "Yahoo",
    "Bitcoin",
    "Ethereum",
    "Nasdaq",
    "Dow Jones",
    "S&P",
    "Jensen Huang",
    "Tim Cook",
    "Bezos",
    "Zuckerberg",
    "Nadella",
)
BUILTIN_TICKERS = (
    "AAPL",
    "ADBE",
    "AMD",
    "AMZN",
    "AVGO",
    "CRM",
    "CSCO",
    "DIA",
    "DJI",
    "FB",
    "GOOG",
    "GOOGL",
    "GSPC",
    "IBM",
    "INTC",
    "IWM",
    "IXIC",
    "META",
    "MSFT",
    "NDX",
    "NFLX",
    "NVDA",
    "ORCL",
    "QCOM",
    "QQQ",
    "RUT",
    "SPY",
    "SQQQ",
    "TQQQ",
    "TSLA",
    "TXN",
    "VIX",
    "YHOO",
    "BTC",
    "ETH",
)
# Legal-name endings stripped to find the name a headline uses ("NVIDIA Corporation" -> NVIDIA).
_SUFFIXES = {
    "inc",
    "inc.",
    "corp",
    "corp.",
    "corporation",
    "company",
    "co",
    "co.",
    "plc",
    "ltd",
    "ltd.",
    "limited",
    "holdings",
    "group",
    "n.v.",
    "incorporated",
    "&",
    "the",
    "sa",
    "ag",
    "lp",
    "l.p.",
    "trust",
    "international",
    "technologies",
    "systems",
}
# Two-letter tickers that are words or market shorthand in capitals (headlines are title case,
# "MA" is a moving average): left in prompts, as one-letter tickers are (a capital "A").
WORD_TICKERS = frozenset(
    {
        "AN",
        "SO",
        "DE",
        "ES",
        "EL",
        "ED",
        "PM",
        "AM",
        "MA",
        "IT",
        "ON",
        "OR",
        "GO",
        "DO",
        "BE",
        "US",
        "TV",
        "PC",
        "AI",
        "OK",
    }
)
# Legal names that are ordinary words: scrubbed from prompts, never counted as a leak.
COMMON_WORDS = frozenset(
    {
        "target",
        "ball",
        "gap",
        "visa",
        "progressive",
        "public",
        "discovery",
        "general",
        "best",
        "united",
        "american",
        "international",
        "first",
        "global",
        "national",
        "southern",
        "eastern",
        "western",
        "news",
        "fox",
        "mac",
        "model",
        "meta",
        "windows",
        "alexa",
        "oracle",
        "amazon",
        "apple",
        "intel",
        "twitter",
        "realty",
        "equity",
        "key",
        "state",
        "republic",
        "prudential",
        "principal",
        "regions",
        "entergy",
        "ameren",
        "textron",
        "xerox",
    }
)


def is_price_key(key: str) -> bool:
    """Whether ``key`` holds a price level (rebased to 100 when masked), not a ratio."""
    return bool(PRICE_KEY.match(key)) and not RATIO_KEY.search(key)


def is_volume_key(key: str) -> bool:
    """Whether ``key`` holds a volume level (scaled to its window mean when masked), not a ratio."""
    return bool(VOLUME_KEY.match(key)) and not RATIO_KEY.search(key)


class KnownEntities(BaseModel):
    """Real tickers and names a prompt must not carry (and an answer must not bring in)."""

    model_config = ConfigDict(frozen=True)

    tickers: frozenset[str] = frozenset(BUILTIN_TICKERS)
    names: tuple[str, ...] = BUILTIN_NAMES
    # GICS sectors and sub-industries: scrubbed from prompts (with a price path they narrow
    # the company down), never counted as an answer's leak (a sector is not lookahead).
    sectors: tuple[str, ...] = ()

    def merged(
        self,
        *,
        tickers: Iterable[str] = (),
        names: Iterable[str] = (),
        sectors: Iterable[str] = (),
    ) -> KnownEntities:
        """These entities plus the given tickers, names and sectors (duplicates dropped, order
        kept)."""
        return KnownEntities(
            tickers=self.tickers | {t.upper() for t in tickers if t},
            names=tuple(dict.fromkeys([*self.names, *(n for n in names if n)])),
            sectors=tuple(dict.fromkeys([*self.sectors, *(n for n in sectors if n)])),
        )


def core_names(security: str) -> list[str]:
    """The names a legal name goes by: ``Amazon.com Inc.`` -> [Amazon.com Inc., Amazon.com,
    Amazon]; ``Alphabet Inc. (Class A)`` -> [..., Alphabet]."""
    full = re.sub(r"\(.*?\)", "", security).strip().strip(",")
    words = full.replace(",", " ").split()
    while len(words) > 1 and words[-1].lower() in _SUFFIXES:
        words.pop()
    while len(words) > 1 and words[0].lower() == "the":
        words.pop(0)
    core = " ".join(words)
    out = [full, core]
    if core.lower().endswith(".com"):
        out.append(core[:-4])
    return [n for n in dict.fromkeys(out) if len(n) >= 2]


def known_entities(data_dir: Path | None = None, gics_file: Path | None = None) -> KnownEntities:
    """The built-in names, the data folder's tickers (file names) and, when the corpus's GICS
    table sits beside the data (``fundamentals/sp500_securities_gics.csv``), its tickers,
    company names, sectors and sub-industries."""
    base = KnownEntities()
    tickers: list[str] = []
    names: list[str] = []
    sectors: list[str] = []
    if data_dir is not None and Path(data_dir).is_dir():
        tickers += [p.stem.split("_")[0] for p in Path(data_dir).glob("*.csv")]
    if gics_file is None and data_dir is not None:
        from swarm.universe import find_gics

        gics_file = find_gics(Path(data_dir))
    if gics_file is not None and Path(gics_file).is_file():
        with open(gics_file, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                tickers.append(row.get("ticker") or "")
                names += core_names(row.get("security") or "")
                sectors += [row.get("gics_sector") or "", row.get("gics_sub_industry") or ""]
    return base.merged(tickers=tickers, names=names, sectors=sectors)


class MaskContext(BaseModel):
    """The trusted side's map for one masked scope (a decision, a symbol's research, a run).

    ``aliases`` maps real tickers to the aliases prompts carry. ``anchor`` is the decision bar:
    dates become offsets from it. ``price_scale``/``volume_scale`` multiply real values into
    prompt values. ``prices`` are real price-like values the prompts may state in prose (the
    evidence), so a sentence's ``172.89`` is rebased like the JSON's. ``symbol_scales``
    (real ticker -> (price_scale, volume_scale)) serves a scope of several symbols: see
    :meth:`scoped`. ``withhold_levels``: keyed prices and volumes become null."""

    model_config = ConfigDict(frozen=True)

    aliases: dict[str, str] = Field(default_factory=dict)
    anchor: dt.date
    price_scale: float = Field(1.0, gt=0)
    volume_scale: float = Field(1.0, gt=0)
    prices: tuple[float, ...] = ()
    volumes: tuple[float, ...] = ()
    known: KnownEntities = Field(default_factory=KnownEntities)
    symbol_scales: dict[str, tuple[float, float]] = Field(default_factory=dict)
    withhold_levels: bool = False

    @property
    def reverse(self) -> dict[str, str]:
        """Alias -> real ticker."""
        return {a: t for t, a in self.aliases.items()}

    def scoped(self, text: str) -> MaskContext:
        """The context one prompt is masked (and its answer mapped back) under. With
        ``symbol_scales``: the scales of the one scope symbol the text names (or of the only
        symbol there is); a text about several symbols, or about one without scales, has
        its keyed price levels withheld, since no one scale rebases them all."""
        if not self.symbol_scales:
            return self
        named = [t for t in self.aliases if _word(t).search(text)]
        if not named and len(self.aliases) == 1:
            named = list(self.aliases)
        if len(named) == 1 and named[0] in self.symbol_scales:
            price_scale, volume_scale = self.symbol_scales[named[0]]
            return self.model_copy(
                update={"price_scale": price_scale, "volume_scale": volume_scale}
            )
        return self.model_copy(update={"withhold_levels": True})


def alias_for(index: int) -> str:
    """ASSET-A .. ASSET-Z, ASSET-AA ...: says nothing about the ticker it stands for."""
    letters = ""
    n = index
    while True:
        letters = chr(ord("A") + n % 26) + letters
        n = n // 26 - 1
        if n < 0:
            return ALIAS_PREFIX + letters


def make_aliases(tickers: Sequence[str]) -> dict[str, str]:
    """Aliases in sorted ticker order, so the same universe always gets the same map."""
    return {t: alias_for(i) for i, t in enumerate(sorted({t.upper() for t in tickers}))}


def window_scales(bars: Any, window: int = WINDOW_BARS) -> tuple[float, float]:
    """(price_scale, volume_scale) for bars cut at the decision: the close at the start of the
    last ``window`` bars becomes 100, the window's mean volume 100."""
    tail = bars.iloc[-window:]
    first = float(tail["close"].iloc[0])
    price_scale = REBASE_TO / first if first > 0 and math.isfinite(first) else 1.0
    vol = float(tail["volume"].mean()) if "volume" in tail else 0.0
    volume_scale = REBASE_TO / vol if vol > 0 and math.isfinite(vol) else 1.0
    return price_scale, volume_scale


def run_scales(bars: Any, window: int = WINDOW_BARS) -> tuple[float, float]:
    """(price_scale, volume_scale) for a run's bars: the first close becomes 100, the mean
    volume of the first ``window`` bars 100 (no later bar sets a scale)."""
    return window_scales(bars.iloc[:window], window)


def context_for(
    tickers: Sequence[str],
    anchor: dt.date | str,
    *,
    bars: Any = None,
    evidence: Mapping[str, float] | None = None,
    known: KnownEntities | None = None,
    symbol_bars: Mapping[str, Any] | None = None,
) -> MaskContext:
    """A context for one scope: aliases for ``tickers``; scales from ``bars`` (one symbol
    cut at the decision) or per symbol from ``symbol_bars`` (a run's bars from its start)."""
    anchor = dt.date.fromisoformat(str(anchor)[:10])
    price_scale = volume_scale = 1.0
    if bars is not None and len(bars):
        price_scale, volume_scale = window_scales(bars)
    scales = {
        t.upper(): run_scales(b) for t, b in (symbol_bars or {}).items() if b is not None and len(b)
    }
    ev = dict(evidence or {})
    return MaskContext(
        aliases=make_aliases(tickers),
        anchor=anchor,
        price_scale=price_scale,
        volume_scale=volume_scale,
        prices=tuple(float(v) for k, v in ev.items() if is_price_key(k)),
        volumes=tuple(float(v) for k, v in ev.items() if is_volume_key(k)),
        known=(known or KnownEntities()).merged(tickers=tickers),
        symbol_scales=scales,
    )


# --------------------------------------------------------------------------- pure maskers


def date_offset(day: dt.date, anchor: dt.date) -> str:
    """``D-12``: calendar days from the decision bar; ``D+0`` is the bar itself."""
    return f"D{(day - anchor).days:+d}"


def mask_dates(text: str, anchor: dt.date) -> str:
    """ISO dates become offsets from ``anchor``; any remaining year is removed."""

    def iso(m: re.Match[str]) -> str:
        try:
            return date_offset(dt.date(int(m[1]), int(m[2]), int(m[3])), anchor)
        except ValueError:
            return "[date]"

    return YEAR.sub("[year]", _ISO_DATE.sub(iso, text))


def _word(token: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(token) + r"(?![A-Za-z0-9])", flags)


def maskable_ticker(ticker: str) -> bool:
    """Whether a prompt must not carry ``ticker`` (written in capitals): any of three or more
    letters, and of two unless it is a word (:data:`WORD_TICKERS`); never one letter."""
    return len(ticker) >= 3 or (len(ticker) == 2 and ticker not in WORD_TICKERS)


@functools.lru_cache(maxsize=16)
def tickers_pattern(tickers: frozenset[str]) -> re.Pattern[str] | None:
    """Known tickers, case-sensitive, as :func:`maskable_ticker` picks them (GE, FB, NVDA)."""
    usable = sorted({t for t in tickers if maskable_ticker(t)}, key=len, reverse=True)
    if not usable:
        return None
    body = "|".join(re.escape(t) for t in usable)
    return re.compile(r"(?<![A-Za-z0-9])(?:" + body + r")(?![A-Za-z0-9])")


def alias_tickers(
    text: str, aliases: Mapping[str, str], others: frozenset[str] = frozenset()
) -> str:
    """The scope's tickers become their aliases (also as ``$NVDA``); other known tickers
    become ``[ticker]``."""
    for ticker in sorted(aliases, key=len, reverse=True):
        text = _word(ticker).sub(aliases[ticker], text)
    pattern = tickers_pattern(frozenset(others) - set(aliases))
    return pattern.sub("[ticker]", text) if pattern is not None else text


@functools.lru_cache(maxsize=16)
def names_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation over the names, longest first (compiled once per name list).

    A name of several words (``Texas Instruments``) matches in any case. A one-word name
    matches as written, Capitalised or in CAPITALS only: ``Target`` and ``Match`` are company
    names, ``target`` and ``match`` are words the prompts need."""
    usable = {n for n in names if len(n) >= 3}
    multi = sorted((n for n in usable if " " in n or "." in n), key=len, reverse=True)
    single: set[str] = set()
    for n in usable - set(multi):
        single |= {n, n[:1].upper() + n[1:], n.upper()}
    if not multi and not single:
        return None
    parts = []
    if multi:
        parts.append("(?i:" + "|".join(re.escape(n) for n in multi) + ")")
    parts += [re.escape(n) for n in sorted(single, key=len, reverse=True)]
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(parts) + r")(?![A-Za-z0-9])")


def scrub_entities(text: str, names: Sequence[str]) -> str:
    """Company, product and people names become ``[entity]`` (see :func:`names_pattern`)."""
    pattern = names_pattern(tuple(names))
    return pattern.sub("[entity]", text) if pattern is not None else text


@functools.lru_cache(maxsize=16)
def sectors_pattern(sectors: tuple[str, ...]) -> re.Pattern[str] | None:
    """GICS names in any case: "semiconductors" in a directive names the industry too."""
    usable = sorted({s for s in sectors if len(s) >= 3}, key=len, reverse=True)
    if not usable:
        return None
    body = "|".join(re.escape(s) for s in usable)
    return re.compile(r"(?<![A-Za-z0-9])(?:" + body + r")(?![A-Za-z0-9])", re.IGNORECASE)


def scrub_sectors(text: str, sectors: Sequence[str]) -> str:
    """GICS sector and sub-industry names become ``[sector]``."""
    pattern = sectors_pattern(tuple(sectors))
    return pattern.sub("[sector]", text) if pattern is not None else text


def _fmt_like(value: float, shown: str) -> str:
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return f"{value:.{max(decimals, 2)}f}"


def _shown_matches(x: float, reals: Iterable[float], shown: str) -> bool:
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return any(round(r, decimals) == x or math.isclose(x, r, rel_tol=1e-9) for r in reals)


def rebase_numbers(text: str, ctx: MaskContext) -> str:
    """Keyed JSON values by key (prices rebased, volumes scaled, raw amounts withheld), then
    prose numbers that state a known price or volume, then any other large amount."""

    def keyed(m: re.Match[str]) -> str:
        key, raw = m[1], m[2]
        value = float(raw)
        if (is_price_key(key) or is_volume_key(key)) and ctx.withhold_levels:
            return f'"{key}": null'
        if is_price_key(key):
            return f'"{key}": {round(value * ctx.price_scale, 6)}'
        if is_volume_key(key):
            return f'"{key}": {round(value * ctx.volume_scale, 6)}'
        if AMOUNT_KEY.search(key):
            return f'"{key}": null'
        return m[0]

    text = _KEYED.sub(keyed, text)
    keyed_spans = [m.span() for m in _KEYED.finditer(text)]

    def prose(m: re.Match[str]) -> str:
        if any(a <= m.start() < b for a, b in keyed_spans):
            return m[0]  # already rebased above
        shown = m[0].replace(",", "")
        x = float(shown)
        if "." in shown and _shown_matches(x, ctx.prices, shown):
            return _fmt_like(x * ctx.price_scale, shown)
        if _shown_matches(x, ctx.volumes, shown) and abs(x) >= 1000:
            return _fmt_like(x * ctx.volume_scale, shown)
        if abs(x) >= AMOUNT_MIN:
            return "[amount]"
        return m[0]

    return _NUMBER.sub(prose, text)


def mask_text(text: str, ctx: MaskContext) -> str:
    """One prompt text, masked. Numbers first (dates still whole), then dates, names, tickers."""
    text = _ISO_DATE.sub(lambda m: f"\x00{m[0]}\x00", text)  # keep dates away from the numbers
    parts = text.split("\x00")
    parts = [p if i % 2 else rebase_numbers(p, ctx) for i, p in enumerate(parts)]
    text = mask_dates("".join(parts), ctx.anchor)
    # Tickers before names: a scope ticker that is also a name (IBM) keeps its alias.
    text = alias_tickers(text, ctx.aliases, ctx.known.tickers)
    return scrub_sectors(scrub_entities(text, ctx.known.names), ctx.known.sectors)


def mask_messages(messages: Sequence[tuple[str, str]], ctx: MaskContext) -> list[tuple[str, str]]:
    """The messages with each content masked."""
    return [(role, mask_text(content, ctx)) for role, content in messages]


# --------------------------------------------------------------------------- back to real


def unmask_text(text: str, ctx: MaskContext) -> str:
    """Aliases back to tickers; numbers back to real prices only in the answer's prose where
    they state a rebased price (a ratio such as RSI is left alone)."""
    for alias, ticker in sorted(ctx.reverse.items(), key=lambda kv: -len(kv[0])):
        text = _word(alias).sub(ticker, text)
    if ctx.price_scale == 1.0 or not ctx.prices:
        return text
    masked = [p * ctx.price_scale for p in ctx.prices]

    def back(m: re.Match[str]) -> str:
        shown = m[0].replace(",", "")
        if "." not in shown:
            return m[0]
        x = float(shown)
        if any(math.isclose(x, p, rel_tol=5e-3) for p in masked):
            return f"{x / ctx.price_scale:.4f}".rstrip("0").rstrip(".")
        return m[0]

    return _NUMBER.sub(back, text)


def _unmask_value(key: str | None, value: Any, ctx: MaskContext) -> Any:
    if isinstance(value, str):
        return unmask_text(value, ctx)
    if isinstance(value, float | int) and not isinstance(value, bool) and key is not None:
        if is_price_key(key):
            return value / ctx.price_scale
        if is_volume_key(key):
            return value / ctx.volume_scale
    if isinstance(value, list):
        return [_unmask_value(None, v, ctx) for v in value]
    if isinstance(value, dict):
        return _unmask_dict(value, ctx)
    return value


def _unmask_dict(data: dict[str, Any], ctx: MaskContext) -> dict[str, Any]:
    # A citation {"key": "SMA_50", "value": 112.3} carries its unit in its key.
    if set(data) >= {"key", "value"} and isinstance(data.get("key"), str):
        out = dict(data)
        out["value"] = _unmask_value(data["key"], data["value"], ctx)
        return out
    return {k: _unmask_value(k, v, ctx) for k, v in data.items()}


def unmask_answer(answer: BaseModel, ctx: MaskContext) -> BaseModel:
    """The answer in real terms: aliases to tickers, rebased price fields to real prices."""
    data = _unmask_dict(answer.model_dump(mode="python"), ctx)
    return type(answer).model_validate(data)


def answer_texts(answer: BaseModel) -> list[str]:
    """Every string an answer carries (what the leak audit reads)."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)

    walk(answer.model_dump(mode="python"))
    return out
