"""Directive -> plan, by rules: the words of the directive, each understood, ignored or refused.

The rules read styles (nodes of ``strategies.taxonomy``), a universe (sector and industry
words, asset classes, explicit tickers), a timeframe, scope hints and a benchmark. This
module reads words only; ``swarm.universe`` then resolves the universe against the data that
exists, and ``swarm.plan`` joins the two (and the LLM's reading, when one is configured).

Which words are errors (``DirectiveError``, exit 2):

* a word within a small edit of a vocabulary word that is not itself one ("semicondutors",
  "momentom"): a typo of a term the lab would act on, so it is refused with "did you mean";
* "weekly" / "monthly" bars: the lab runs 1d and 1h bars only (a rebalancing schedule,
  "monthly rebalancing", is fine);
* (in ``swarm.universe``) a ticker-like token, or a universe word, with no data.

Every other word is either understood (it changed the plan) or ignored (ordinary English and
generic finance words: "find", "alpha", "strategy", "in"...); the plan lists both, so nothing
is dropped silently.
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel, Field

from strategies.regime import REGIME_STYLE


class DirectiveError(ValueError):
    """A directive word the lab cannot act on; the message says which word and what to do."""


# (phrase, style nodes, families to try), longest phrases first so "mean reversion" wins over
# a bare "reversion". Matched as whole words on the lower-cased text and consumed; the
# families keep this list's order (the search order a directive's styles get).
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STYLE_PHRASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    # Families that trade alternative data (swarm/families/), before "analysts?" and
    # "contrarian" can read their words as the pipeline or mean reversion.
    (
        r"post[\s-]*earnings(?:[\s-]+announcement)?(?:[\s-]+drift)?|pead"
        r"|earnings(?:[\s-]+(?:drift|surprises?|announcements?|reports?))?",
        ("earnings_drift",),
        ("earnings_drift",),
    ),
    (
        r"analyst[\s-]+(?:revisions?|upgrades?|downgrades?|rating[\s-]+(?:changes?|actions?))"
        r"|(?:rating|estimate)[\s-]+(?:revisions?|changes?)|revisions?|upgrades?|downgrades?",
        ("analyst_revision",),
        ("analyst_revision",),
    ),
    (
        r"(?:(?:news|social|tweets?|twitter|headlines?)[\s-]+)?sentiment(?:[\s-]+momentum)?"
        r"|tweets?|headlines?",
        ("sentiment_momentum",),
        ("sentiment_momentum",),
    ),
    (
        r"(?:contrarian[\s-]+)?put[\s/-]*call(?:[\s-]+ratios?)?(?:[\s-]+regimes?)?"
        r"|options?[\s-]+sentiment",
        ("putcall_regime",),
        ("putcall_regime",),
    ),
    (
        r"value[\s/-]*(?:and[\s-]+|&[\s-]*)?quality|quality[\s/-]*(?:and[\s-]+|&[\s-]*)?value"
        r"|deep[\s-]+value|value[\s-]+(?:investing|factors?|stocks?)|quality[\s-]+factors?"
        r"|p/?e[\s-]+ratios?|free[\s-]+cash[\s-]+flow[\s-]+yields?"
        r"|value|quality|fundamentals?",
        ("value_quality",),
        ("value_quality",),
    ),
    # The analyst -> debate -> trader -> risk pipeline, replayed as a strategy family.
    ("agents decide", ("decision_pipeline",), ("decision_pipeline",)),
    ("analysts?", ("decision_pipeline",), ("decision_pipeline",)),
    ("debates?", ("decision_pipeline",), ("decision_pipeline",)),
    # The low-volatility anomaly, before "volatility" can read it as volatility expansion.
    (r"low[\s-]*vol(?:atility)?", ("low_volatility",), ("low_volatility",)),
    (r"min(?:imum)?[\s-]*vol(?:atility)?", ("low_volatility",), ("low_volatility",)),
    # Portfolio families: the universe's symbols ranked against each other.
    (r"cross[\s-]*sectional", ("cross_sectional_momentum",), ("cross_sectional_momentum",)),
    (
        "relative strength",
        ("cross_sectional_momentum",),
        ("rotation", "cross_sectional_momentum"),
    ),
    ("rotations?", ("rotation",), ("rotation",)),
    (r"pairs?(?:[\s-]+trad(?:ing|e))?", ("pairs",), ("pairs",)),
    (r"cointegrat\w*", ("pairs",), ("pairs",)),
    ("spreads?", ("pairs",), ("pairs",)),
    (r"mean[\s-]*reversion", ("mean_reversion",), ("mean_reversion",)),
    ("reversion", ("mean_reversion",), ("mean_reversion",)),
    (r"revert\w*", ("mean_reversion",), ("mean_reversion",)),
    (r"reversals?", ("mean_reversion",), ("mean_reversion",)),
    ("contrarian", ("mean_reversion",), ("mean_reversion",)),
    ("oversold", ("mean_reversion",), ("mean_reversion",)),
    ("overbought", ("mean_reversion",), ("mean_reversion",)),
    ("pullbacks?", ("mean_reversion", "momentum"), ("mean_reversion", "momentum")),
    (r"time[\s-]*series\s+momentum", ("time_series_momentum",), ("momentum",)),
    ("momentum", ("momentum",), ("momentum",)),
    ("breakouts?", ("breakout",), ("breakout",)),
    ("channels?", ("breakout",), ("breakout",)),
    (r"trend(?:s|ing)?(?:[\s-]+follow(?:ing|er)?)?", ("trend",), ("trend",)),
    ("volatility", ("volatility",), ("volatility",)),
    ("squeeze", ("volatility",), ("volatility",)),
]

# The style phrases' words, for "did you mean" (a typo of one is refused, not ignored).
STYLE_WORDS = _words(
    """
    momentum volatility breakout breakouts reversion revert reverting cointegration
    cointegrated trend trending following rotation pairs neutral cross-sectional sectional
    oversold overbought pullback squeeze channel analyst analysts debate relative strength
    intraday hourly earnings drift surprise surprises revision revisions upgrade upgrades
    downgrade downgrades sentiment tweets headlines put call value quality fundamental fundamentals
    """
)

# A few liquid names per sector or industry word: the built-in map, used first (a curated
# list beats a table's whole sector) and whenever the GICS table is not beside the data.
SECTORS: dict[str, list[str]] = {
    "tech": ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"],
    "semis": ["NVDA", "AMD", "INTC", "QCOM", "TXN", "AVGO"],
    "software": ["MSFT", "ORCL", "ADBE", "CRM"],
    "internet": ["GOOGL", "AMZN", "FB", "NFLX"],
    "hardware": ["AAPL", "CSCO", "IBM"],
    "banks": ["JPM", "BAC", "WFC", "C", "USB", "PNC"],
    "financials": ["JPM", "BAC", "WFC", "GS", "MS", "C"],
    "energy": ["XOM", "CVX", "COP", "SLB", "EOG"],
    "healthcare": ["JNJ", "UNH", "PFE", "MRK", "ABT"],
    "pharma": ["PFE", "MRK", "JNJ", "LLY", "BMY"],
    "biotech": ["AMGN", "GILD", "BIIB", "REGN", "VRTX"],
    "utilities": ["NEE", "DUK", "SO", "D", "AEP"],
    "staples": ["PG", "KO", "PEP", "WMT", "COST"],
    "discretionary": ["AMZN", "HD", "MCD", "NKE", "SBUX"],
    "retail": ["AMZN", "WMT", "HD", "COST", "TGT"],
    "industrials": ["HON", "GE", "CAT", "UNP", "MMM"],
    "materials": ["LIN", "APD", "DD", "NEM", "ECL"],
    "realestate": ["AMT", "PLD", "SPG", "CCI", "EQIX"],
    "telecom": ["T", "VZ"],
    "index": ["SPY", "QQQ", "IWM", "DIA"],
    "etf": ["SPY", "QQQ", "IWM", "DIA"],
    "crypto": ["BTC-USD", "ETH-USD"],
    "bitcoin": ["BTC-USD"],
    "ether": ["ETH-USD"],
}
# Every word (lower case, after plural folding) that names one of the keys above.
_SYNONYMS: dict[str, str] = {
    "tech": "tech technology",
    "semis": "semis semi semiconductor semiconductors chip chips chipmaker chipmakers",
    "software": "software",
    "internet": "internet web online",
    "hardware": "hardware",
    "banks": "bank banks banking",
    "financials": "financial financials finance fintech",
    "energy": "energy oil gas",
    "healthcare": "healthcare health",
    "pharma": "pharma pharmaceutical pharmaceuticals drug drugs",
    "biotech": "biotech biotechnology",
    "utilities": "utility utilities",
    "staples": "staples",
    "discretionary": "discretionary",
    "retail": "retail retailer retailers",
    "industrials": "industrial industrials",
    "materials": "materials",
    "realestate": "reit reits realestate",
    "telecom": "telecom telecoms telecommunications",
    "index": "index indices indexes",
    "etf": "etf etfs",
    "crypto": "crypto cryptos cryptocurrency cryptocurrencies coin coins",
    "bitcoin": "bitcoin bitcoins btc",
    "ether": "ether ethereum eth",
}
UNIVERSE_WORDS: dict[str, str] = {w: key for key, words in _SYNONYMS.items() for w in words.split()}
# Two-word universe phrases, joined before the words are read.
_UNIVERSE_PHRASES = {
    r"health[\s-]+care": "healthcare",
    r"real[\s-]+estate": "realestate",
    r"consumer[\s-]+staples": "staples",
    r"consumer[\s-]+discretionary": "discretionary",
    r"information[\s-]+technology": "tech",
}
ASSET_CLASSES = frozenset({"index", "etf", "crypto", "bitcoin", "ether"})
INDEX_SECTORS = frozenset({"index", "etf"})
DEFAULT_UNIVERSE = SECTORS["tech"]
ALL_FAMILIES = ["momentum", "mean_reversion", "breakout", "trend", "volatility"]

# Timeframe words. Weekly and monthly bars are refused (``DirectiveError``): the lab's
# sources, splits and bars-a-year are for 1d and 1h bars.
TIMEFRAME_WORDS = {
    "hourly": "1h",
    "intraday": "1h",
    "1h": "1h",
    "60m": "1h",
    "60min": "1h",
    "h1": "1h",
    "daily": "1d",
    "1d": "1d",
    "eod": "1d",
    "d1": "1d",
}
UNSUPPORTED_TIMEFRAMES = {"weekly": "1w", "1w": "1w", "monthly": "1mo", "1mo": "1mo"}
_REBALANCE = re.compile(
    r"\b(?:weekly|monthly|daily)\s+rebalanc\w*|\brebalanc\w*\s+(?:weekly|monthly|daily)\b", re.I
)

# Scope hints (what the variants may hold), as phrases.
SCOPE_PHRASES: list[tuple[str, str]] = [
    (r"long[\s-]*only", "long_only"),
    (r"long\s*/\s*short|long[\s-]+short", "long_short"),
    (r"market[\s-]+neutral|dollar[\s-]+neutral", "market_neutral"),
    (r"portfolios?", "portfolio"),
]

# "regime filtered", "regime filter", "risk-on", "when the index is above its 200-day average":
# the index regime filter (strategies.regime) is asked for by name.
_REGIME = re.compile(
    r"\bregime[\s-]*filter(?:ed|s)?\b|\brisk[\s-]+on\b|\bindex\s+filter|"
    r"\b(?:the\s+)?index\s+is\s+above\b|\babove\s+(?:its|the)\s+\d+[\s-]*day(?:\s+average)?",
    re.I,
)
_TICKER = re.compile(r"(?<![\w$])\$?([A-Z]{1,5}(?:-USD)?)(?![\w-])")
_NOT_TICKERS = {"US", "UK", "EU", "A", "I", "AND", "OR", "IN", "ON", "THE", "ETF", "ETFS", "USD"}
_NOT_TICKERS |= {"ATR", "RSI", "MACD", "SMA", "EMA", "ADX", "ROC", "AI", "IT", "OK", "VS"}
_NOT_TICKERS |= {"BTC", "ETH", "TSMOM"}  # asset-class words (crypto), read as such

# "vs SPY", "versus QQQ", "against IWM", "benchmark DIA", "relative to SPY"
_VS_SYMBOL = re.compile(
    r"\b(?:vs\.?|versus|against|benchmark(?:ed)?(?:\s+(?:to|against))?|relative\s+to)\s+"
    r"\$?([A-Z]{1,5}(?:-USD)?)\b"
)
_ABSOLUTE = re.compile(r"\b(absolute[\s-]+returns?|market[\s-]+neutral|vs\.?\s+cash)\b", re.I)
_VS_HOLD = re.compile(r"\b(?:vs\.?|versus|against)\s+buy[\s-]*(?:and|&)?[\s-]*hold\b", re.I)

# Ordinary words: never an error, never a near miss. Unknown words outside this list are
# ignored too unless they are a near miss of the vocabulary (see the module docstring).
FILLER = _words(
    """
    a an the in on of for to from by at with without into onto over under across among between
    via using use based and or but not no any all some each every this that these those it its
    their my our your me us we i you find search look looking seek try test build make give
    want need show run backtest alpha strategy strategies system systems signal signals edge
    idea ideas approach model models rule rules method stock stocks share shares equity
    equities name names universe sector sectors industry industries group trade trades trading
    trader traders invest investing investment investments return returns profit profits good
    best better robust simple strong smart new big large small mid cap caps largecap smallcap
    short long term horizon following follow filter filtered regime risk above below average
    moving day days week weeks month months year years bar bars price prices market markets
    american global world us when while where which what who how that than then only also just
    more less most least high higher low lower calm calmest quiet stable defensive steady names
    leader leaders laggard laggards top bottom buy sell hold holding holdings rebalance
    rebalancing rebalanced decide decides decision decisions let agent agents ai
    """
)


# Style and universe words a quant would use that the lab has no family or data for: refused
# by name (exit 2) rather than ignored, so "carry in tech" never runs momentum.
UNSUPPORTED_STYLES = _words(
    """
    growth carry dividend dividends seasonality seasonal arbitrage
    """
)
UNSUPPORTED_UNIVERSES = _words(
    """
    forex fx currencies currency futures bonds bond treasuries commodities commodity options
    """
)


class Plan(BaseModel):
    """The typed plan a directive becomes (DESIGN "Wave 3: The plan is a typed contract")."""

    directive: str
    style: str  # the first preferred family, or "any"
    preferred_families: list[str]  # the families to try first, in order (regime style too)
    universe_source: str  # "sector:tech", "directive", "default", "--tickers", "crypto", ...
    tickers: list[str]
    timeframe: str
    benchmark: str | None = None  # "cash", "buy-and-hold" or a symbol the directive named
    # The taxonomy nodes the directive named ("momentum" covers cross-sectional momentum):
    # what "outside the directive" is judged on (strategies.taxonomy.within_directive).
    styles: list[str] = Field(default_factory=list)
    universe_terms: list[str] = Field(default_factory=list)  # canonical words: "semis", ...
    explicit_tickers: list[str] = Field(default_factory=list)
    timeframe_source: str = "default"  # "directive" or "default" (or "--timeframe")
    scope: list[str] = Field(default_factory=list)  # long_only, long_short, market_neutral...
    understood: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # what stderr says about the reading
    read_by: str = "rules"  # "rules" or "llm"


def parse_benchmark_phrase(text: str) -> tuple[str | None, str]:
    """(the benchmark the directive names, the directive without that phrase).

    "absolute return" and "market neutral" mean cash; "vs SPY" a symbol; "vs buy and
    hold" the default. The phrase is removed so its symbol is not read as a ticker.
    """
    if m := _ABSOLUTE.search(text):
        return "cash", text[: m.start()] + " " + text[m.end() :]
    if m := _VS_HOLD.search(text):
        return "buy-and-hold", text[: m.start()] + " " + text[m.end() :]
    if m := _VS_SYMBOL.search(text):
        return m.group(1), text[: m.start()] + " " + text[m.end() :]
    return None, text


def _consume(pattern: str, text: str, flags: int = re.I) -> tuple[list[str], str]:
    """(every match of ``pattern`` as a whole word, the text with them blanked)."""
    rx = re.compile(rf"(?<![\w-]){pattern}(?![\w-])", flags)
    found = [m.group(0) for m in rx.finditer(text)]
    return found, rx.sub(" ", text)


def _singular(word: str, vocabulary: set[str] | dict[str, str]) -> str:
    if word in vocabulary:
        return word
    for cut in ("es", "s"):
        if word.endswith(cut) and word[: -len(cut)] in vocabulary:
            return word[: -len(cut)]
    return word


def vocabulary() -> set[str]:
    """Every single word the rules act on (for "did you mean")."""
    return set(UNIVERSE_WORDS) | set(TIMEFRAME_WORDS) | set(UNSUPPORTED_TIMEFRAMES) | STYLE_WORDS


def near_miss(word: str) -> str | None:
    """The vocabulary word ``word`` is probably a typo of, or None."""
    if len(word) < 4 or word in FILLER:
        return None
    close = difflib.get_close_matches(word, sorted(vocabulary()), n=1, cutoff=0.8)
    return close[0] if close else None


def parse_directive(directive: str) -> Plan:
    """Read the directive's words (no data needed). Raises DirectiveError (a ValueError) on a
    word it cannot act on; ``swarm.universe.resolve_universe`` checks the universe against data.

    Without data, ``tickers`` is the built-in list of the universe words (or the default)."""
    original = directive.strip()
    if not original:
        raise DirectiveError("empty directive")
    understood: list[str] = []
    benchmark, text = parse_benchmark_phrase(original)
    if benchmark is not None:
        understood.append(_phrase_removed(original))

    regime = bool(_REGIME.search(text))
    if regime:
        understood += [m.group(0) for m in _REGIME.finditer(text)]
        text = _REGIME.sub(" ", text)

    # Rebalancing schedules are a hint, not a bar size.
    rebalance = [m.group(0) for m in _REBALANCE.finditer(text)]
    understood += rebalance
    text = _REBALANCE.sub(" ", text)

    scope, text = _read_scope(original, text, benchmark, understood)
    styles, families, text = _read_styles(text, understood)
    terms, text = _read_universe_phrases(text, understood)
    explicit, timeframe, timeframe_source, ignored = _read_words(text, understood, terms)

    low = original.lower()
    understood.sort(key=lambda w: low.find(w.lower()))
    tickers, source = _tickers_of(explicit, terms)
    # The regime filter: asked for by name, or trend following on the index ETFs (whose
    # universe holds the index series the filter reads).
    if regime or ("trend" in families and set(terms) & INDEX_SECTORS and not explicit):
        families.append(REGIME_STYLE)
    if len(tickers) >= 2 and set(styles) & _PORTFOLIO_STYLES and "portfolio" not in scope:
        scope.append("portfolio")
    return Plan(
        directive=original,
        style=next((f for f in families if f != REGIME_STYLE), "any"),
        preferred_families=families,
        universe_source=source,
        tickers=list(tickers),
        timeframe=timeframe,
        benchmark=benchmark,
        styles=styles,
        universe_terms=terms,
        explicit_tickers=explicit,
        timeframe_source=timeframe_source,
        scope=scope,
        understood=understood,
        ignored=ignored,
    )


def _read_scope(
    original: str, text: str, benchmark: str | None, understood: list[str]
) -> tuple[list[str], str]:
    """(the scope hints the phrases give, the text with them blanked); appends to
    ``understood``. "Market neutral" against cash is a scope too."""
    scope: list[str] = []
    for pattern, hint in SCOPE_PHRASES:
        found, text = _consume(pattern, text)
        if found:
            understood += found
            scope.append(hint)
    if benchmark == "cash" and re.search(r"market[\s-]+neutral", original, re.I):
        scope.append("market_neutral")
    return scope, text


def _read_styles(text: str, understood: list[str]) -> tuple[list[str], list[str], str]:
    """(styles, families, the text with their phrases blanked); appends to ``understood``."""
    styles: list[str] = []
    families: list[str] = []
    for pattern, nodes, fams in STYLE_PHRASES:
        found, text = _consume(pattern, text)
        if found:
            understood += found
            styles += [s for s in nodes if s not in styles]
            families += [f for f in fams if f not in families]
    return styles, families, text


def _read_universe_phrases(text: str, understood: list[str]) -> tuple[list[str], str]:
    """(the universe terms of multi-word phrases, the text with them blanked); appends to
    ``understood``."""
    terms: list[str] = []
    for pattern, key in _UNIVERSE_PHRASES.items():
        found, text = _consume(pattern, text)
        if found:
            understood += found
            terms += [key] if key not in terms else []
    return terms, text


def _read_words(
    text: str, understood: list[str], terms: list[str]
) -> tuple[list[str], str, str, list[str]]:
    """(explicit tickers, timeframe, its source, ignored words) of the words left; appends to
    ``understood`` and ``terms``, and raises DirectiveError on a word the lab cannot act on."""
    explicit: list[str] = []
    timeframe, timeframe_source = "1d", "default"
    ignored: list[str] = []
    for token in re.findall(r"\$?[A-Za-z0-9][A-Za-z0-9-]*", text):
        bare = token.lstrip("$")
        if _TICKER.fullmatch(token) and bare not in _NOT_TICKERS:
            explicit += [bare] if bare not in explicit else []
            understood.append(token)
            continue
        word = bare.lower()
        if word in TIMEFRAME_WORDS:
            timeframe, timeframe_source = TIMEFRAME_WORDS[word], "directive"
            understood.append(token)
            continue
        _refuse_timeframe(token, word)
        key = UNIVERSE_WORDS.get(_singular(word, UNIVERSE_WORDS))
        if key is not None:
            terms += [key] if key not in terms else []
            understood.append(token)
            continue
        _refuse_unsupported(token, word, understood)
        if word in FILLER or word.isdigit() or re.fullmatch(r"\d{4}(-\d\d){0,2}", word):
            ignored.append(token)
            continue
        _refuse_near_miss(token, word, understood)
        ignored.append(token)
    return explicit, timeframe, timeframe_source, ignored


def _refuse_timeframe(token: str, word: str) -> None:
    """DirectiveError for a bar size the lab does not run (weekly, minutes…)."""
    if word in UNSUPPORTED_TIMEFRAMES:
        raise DirectiveError(
            f"--directive: {token!r} asks for {UNSUPPORTED_TIMEFRAMES[word]} bars; the lab "
            "runs daily (1d) and hourly (1h) bars only: say daily (a longer lookback on "
            "daily bars reads a slower signal) or hourly"
        )


def _refuse_unsupported(token: str, word: str, understood: list[str]) -> None:
    """DirectiveError for a style or universe the lab knows of but has no family or data for."""
    if word in UNSUPPORTED_STYLES or word in UNSUPPORTED_UNIVERSES:
        what = "style" if word in UNSUPPORTED_STYLES else "universe"
        known = (
            "momentum, trend, breakout, mean reversion, pairs, volatility, low volatility, "
            "cross-sectional momentum, rotation, analyst debate, earnings drift, "
            "analyst revisions, sentiment, put/call, value/quality"
            if what == "style"
            else "sectors (tech, semis, software, banks…), crypto, bitcoin, ether, ETFs, "
            "indices, or tickers"
        )
        raise DirectiveError(
            f"--directive: {token!r} is a {what} the lab has no "
            f"{'family' if what == 'style' else 'data'} for; it knows {known} "
            f"(understood so far: {', '.join(understood) or 'nothing'})"
        )


def _refuse_near_miss(token: str, word: str, understood: list[str]) -> None:
    """DirectiveError for a probable typo of a vocabulary word, with the guess."""
    guess = near_miss(word)
    if guess is not None:
        raise DirectiveError(
            f"--directive: {token!r} is not a word the lab knows; did you mean "
            f"{guess!r}? (understood so far: {', '.join(understood) or 'nothing'})"
        )


def _tickers_of(explicit: list[str], terms: list[str]) -> tuple[list[str], str]:
    """(tickers, universe source): the named tickers, else the universe words' sectors, else
    the default universe."""
    if explicit:
        return explicit, "directive"
    if terms:
        tickers = list(dict.fromkeys(t for term in terms for t in SECTORS[term]))
        return tickers, "sector:" + "+".join(terms)
    return list(DEFAULT_UNIVERSE), "default"


_PORTFOLIO_STYLES = frozenset({"cross_sectional_momentum", "rotation", "pairs", "low_volatility"})


def _phrase_removed(original: str) -> str:
    """The benchmark phrase parse_benchmark_phrase cut out of ``original``."""
    for rx in (_ABSOLUTE, _VS_HOLD, _VS_SYMBOL):
        if m := rx.search(original):
            return m.group(0).strip()
    return original  # pragma: no cover - only called when a phrase was cut
