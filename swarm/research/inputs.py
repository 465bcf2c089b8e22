"""What the 15 subagents read, built once per run and memoised in the runtime's cache: the
feature bundle of every symbol and the shared ResearchContext (news, fundamentals)."""

from __future__ import annotations

from pathlib import Path

from altdata.corpus import AltData
from swarm.research.context import FundamentalsProvider, ResearchContext
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.runtime import ResearchRuntime


def feature_bundles(ctx: ResearchRuntime) -> dict[str, FeatureBundle]:
    """Computed once per symbol and run: in-sample bars never change between research rounds."""
    bundles = ctx.memo.features
    for s in ctx.symbols:  # a universe expansion adds symbols between rounds
        if s not in bundles:
            bundles[s] = compute_features(s, ctx.insample_bars(s))
    return bundles


def research_context(ctx: ResearchRuntime) -> ResearchContext:
    """One ResearchContext per run, shared by the 15 subagents (so the fundamentals of a
    symbol are fetched once for all five fundamental subagents)."""
    if ctx.memo.research_context is None:
        offline = bool(getattr(ctx.config, "offline", True))
        alt_dir = getattr(ctx.config, "alt_data", None)
        ctx.memo.research_context = ResearchContext(
            news_items=list(ctx.news_items or []),
            alt=AltData(alt_dir) if alt_dir is not None else None,
            fundamentals_alt=statements_source(ctx, alt_dir, offline),
            fundamentals=fundamentals_provider(ctx, offline),
            offline=offline,
        )
    return ctx.memo.research_context


def statements_source(ctx: ResearchRuntime, alt_dir: Path | None, offline: bool) -> AltData | None:
    """``--fundamentals edgar|yfinance``: the alt-data folder (sectors, surprises) with the
    statements from that source, fetched per symbol when a subagent first asks; None for the
    corpus (the subagents read ``alt``). Offline, EDGAR reads its cache and yfinance abstains."""
    from altdata.statements import StatementsFeed

    choice = getattr(ctx.config, "fundamentals", "corpus")
    if choice == "edgar":
        from altdata import edgar

        cache = getattr(ctx.config, "cache_dir", None)
        kw = {"cache_dir": cache} if cache is not None else {}
        client = edgar.EdgarClient(edgar.EdgarSettings.from_env(offline=offline, **kw))
        feed = StatementsFeed(source=edgar.SOURCE, rule=edgar.RULE, fetch=client.statements)
    elif choice == "yfinance":
        from altdata import yf_fundamentals as yff

        feed = StatementsFeed(source=yff.SOURCE, rule=yff.RULE, fetch=yff.fetcher(offline=offline))
    else:
        return None
    return AltData(alt_dir, statements=feed)


def fundamentals_provider(ctx: ResearchRuntime, offline: bool) -> FundamentalsProvider | None:
    """yfinance fundamentals cached on disk; offline, only a cache that exists is read."""
    from backtest.data import default_cache_dir
    from swarm.research.fundamental import yfinance_fundamentals

    cache_dir = getattr(ctx.config, "cache_dir", None) or default_cache_dir()
    if offline and not (cache_dir / "fundamentals").is_dir():
        return None  # nothing cached: the subagents abstain with "offline" as the reason
    return yfinance_fundamentals(cache_dir, offline=offline)
