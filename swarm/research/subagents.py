"""The 15 research subagents as data, and one entry point to run any of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from swarm.research import fundamental, sentiment, technical
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle
from swarm.research.models import Domain, Finding
from swarm.research.news import NewsItem, load_news_csv

__all__ = [
    "SUBAGENTS",
    "NewsItem",
    "ResearchContext",
    "SubagentSpec",
    "SwarmRun",
    "load_news_csv",
    "run_subagent",
    "run_swarm",
    "subagent",
]

Brain = Callable[[FeatureBundle, ResearchContext], Finding]


@dataclass(frozen=True)
class SubagentSpec:
    id: str  # "<domain>.<specialization>"
    domain: Domain
    specialization: str
    description: str


SUBAGENTS: list[SubagentSpec] = [
    SubagentSpec(
        "technical.trend",
        Domain.TECHNICAL,
        "trend",
        "SMA 20/50/200 stack and slope, EMA 12/26, ADX with DI+/DI-, 252-bar "
        "high/low as resistance/support",
    ),
    SubagentSpec(
        "technical.momentum",
        Domain.TECHNICAL,
        "momentum",
        "RSI zones, MACD vs signal and histogram, Stochastic %K/%D, ROC 20/60",
    ),
    SubagentSpec(
        "technical.volatility",
        Domain.TECHNICAL,
        "volatility",
        "Bollinger %B and bandwidth percentile, ATR/NATR, NATR vs its 1-year median",
    ),
    SubagentSpec(
        "technical.volume",
        Domain.TECHNICAL,
        "volume",
        "OBV and A/D 20-bar flow vs price, volume vs its 20-bar average",
    ),
    SubagentSpec(
        "technical.pattern",
        Domain.TECHNICAL,
        "pattern",
        "TA-Lib candlestick patterns with in-sample forward-return statistics",
    ),
    SubagentSpec(
        "fundamental.financial_metrics",
        Domain.FUNDAMENTAL,
        "financial_metrics",
        "margins, return on equity, revenue and earnings growth",
    ),
    SubagentSpec(
        "fundamental.valuation",
        Domain.FUNDAMENTAL,
        "valuation",
        "trailing/forward P/E, price/book, PEG, EV/EBITDA",
    ),
    SubagentSpec(
        "fundamental.balance_sheet",
        Domain.FUNDAMENTAL,
        "balance_sheet",
        "debt/equity, current and quick ratios, net cash",
    ),
    SubagentSpec(
        "fundamental.cash_flow",
        Domain.FUNDAMENTAL,
        "cash_flow",
        "free and operating cash-flow yields",
    ),
    SubagentSpec(
        "fundamental.industry", Domain.FUNDAMENTAL, "industry", "sector, industry and beta"
    ),
    SubagentSpec(
        "sentiment.news",
        Domain.SENTIMENT,
        "news",
        "headline tone with VADER and a finance lexicon, recent window before as_of",
    ),
    SubagentSpec(
        "sentiment.social",
        Domain.SENTIMENT,
        "social",
        "cashtag tweet volume and tone (alt data, else a provider hook)",
    ),
    SubagentSpec(
        "sentiment.analyst",
        Domain.SENTIMENT,
        "analyst",
        "analyst upgrades/downgrades, price-target moves, earnings surprises",
    ),
    SubagentSpec(
        "sentiment.options_flow",
        Domain.SENTIMENT,
        "options_flow",
        "market-wide put/call ratio, contrarian (alt data, else a provider hook)",
    ),
    SubagentSpec(
        "sentiment.insider",
        Domain.SENTIMENT,
        "insider",
        "insider buying and selling (provider hook)",
    ),
]

_BRAINS: dict[str, Brain] = {
    "technical.trend": technical.trend,
    "technical.momentum": technical.momentum,
    "technical.volatility": technical.volatility,
    "technical.volume": technical.volume,
    "technical.pattern": technical.pattern,
    "sentiment.news": sentiment.news,
    **{f"fundamental.{s}": partial(fundamental.run_fundamental, s) for s in fundamental.SPECS},
    **{
        f"sentiment.{s}": partial(sentiment.run_hooked, s)
        for s in ("social", "analyst", "options_flow", "insider")
    },
}

_BY_ID = {s.id: s for s in SUBAGENTS}


def subagent(subagent_id: str) -> SubagentSpec:
    """The subagent spec of ``subagent_id``; KeyError naming the known ones."""
    try:
        return _BY_ID[subagent_id]
    except KeyError:
        raise KeyError(f"unknown subagent {subagent_id!r}; known: {sorted(_BY_ID)}") from None


def run_subagent(
    subagent_id: str, *, symbol: str, bundle: FeatureBundle, context: ResearchContext
) -> Finding:
    """One Finding of one subagent about one symbol. Exceptions propagate: a subagent
    that raises has *failed*, which the caller records (abstaining is not failing)."""
    subagent(subagent_id)
    if bundle.symbol != symbol:
        raise ValueError(f"bundle is for {bundle.symbol}, asked about {symbol}")
    finding = _BRAINS[subagent_id](bundle, context)
    if finding.symbol != symbol or finding.as_of != bundle.as_of:
        raise AssertionError(f"{subagent_id} returned a finding for another symbol or date")
    return finding


@dataclass
class SwarmRun:
    findings: list[Finding] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # "<id>:<symbol>" -> error type

    def failed_specializations(self, domain: Domain) -> list[str]:
        """The specializations of ``domain`` whose subagent raised."""
        ids = {key.split(":", 1)[0] for key in self.failed}
        return sorted(_BY_ID[i].specialization for i in ids if _BY_ID[i].domain == domain)


def run_swarm(bundles: dict[str, FeatureBundle], context: ResearchContext) -> SwarmRun:
    """All 15 subagents over every symbol, sequentially (the graph runs them in parallel);
    a raising subagent is recorded as failed and the others still run."""
    out = SwarmRun()
    for symbol, bundle in bundles.items():
        for spec in SUBAGENTS:
            try:
                out.findings.append(
                    run_subagent(spec.id, symbol=symbol, bundle=bundle, context=context)
                )
            except Exception as exc:  # recorded, never hidden
                out.failed[f"{spec.id}:{symbol}"] = f"{type(exc).__name__}: {exc}"
    return out
