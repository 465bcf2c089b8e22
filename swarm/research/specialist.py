"""One research specialist (subagent) over the whole universe: the rules reading of each
symbol, the LLM's reading of the same evidence when the run has an LLM, and for the news
specialist the news archive (research/news). A crash is a failed specialist, not a failed
run."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from swarm.llm.brains import llm_finding
from swarm.research.archive_entries import SourceKind, all_entries
from swarm.research.context import ResearchContext
from swarm.research.inputs import feature_bundles, research_context
from swarm.research.models import Finding
from swarm.research.news import headlines_for
from swarm.research.news_archive import build_archive
from swarm.research.runtime import ResearchRuntime
from swarm.research.subagents import SUBAGENTS, run_subagent

NEWS_SUBAGENT = "sentiment.news"


@dataclass
class SpecialistReport:
    """What one specialist returns: its findings and LLM fallback events, or that it failed."""

    findings: list[Finding] = field(default_factory=list)
    llm_events: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False


def run_specialist(ctx: ResearchRuntime, subagent_id: str) -> SpecialistReport:
    """The specialist over every symbol. A crash is recorded as a failed subagent, not raised."""
    bundles = feature_bundles(ctx)
    rctx = research_context(ctx)
    report = SpecialistReport()
    try:
        for symbol in ctx.symbols:
            finding = run_subagent(subagent_id, symbol=symbol, bundle=bundles[symbol], context=rctx)
            if getattr(ctx, "llm", None) is not None:
                finding = llm_reading(ctx, subagent_id, finding, rctx, report.llm_events)
            report.findings.append(finding)
    except Exception as exc:  # a broken specialist degrades the research; it must not kill the run
        ctx.progress.stage("research", f"subagent {subagent_id} failed: {exc!r}")
        return SpecialistReport(failed=True)
    if subagent_id == NEWS_SUBAGENT:
        try:
            counts = write_news_archive(ctx, rctx)
            if counts:
                parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
                ctx.progress.stage("research", f"news: archived {parts} in research/news")
        except OSError as exc:  # the archive is a record, not a reason to lose the finding
            ctx.progress.stage("research", f"news archive not written: {exc!r}")
    return report


def llm_reading(
    ctx: ResearchRuntime,
    subagent_id: str,
    finding: Finding,
    rctx: ResearchContext,
    events: list[dict[str, Any]],
) -> Finding:
    """The LLM brain reads the same evidence; headlines reach it only fenced, as data.
    Fallback events are returned, not logged here: the leader logs them in a fixed order."""
    spec = next(s for s in SUBAGENTS if s.id == subagent_id)
    untrusted: list[str] = []
    if subagent_id == NEWS_SUBAGENT and finding.as_of:
        as_of = dt.date.fromisoformat(finding.as_of)
        untrusted = [
            i.headline for i in headlines_for(rctx.news_items, finding.symbol, as_of=as_of)
        ][-10:]
    return llm_finding(
        ctx.llm, finding, description=spec.description, untrusted=untrusted, log=events.append
    )


def write_news_archive(ctx: ResearchRuntime, rctx: ResearchContext) -> Counter[SourceKind]:
    """The news researcher's files (research/news/headlines, research/news/body): headlines,
    and with the alt data rating actions, earnings surprises, cashtag tweets and the
    market-wide put/call ratios, each known by its symbol's as_of and inside the windows the
    sentiment subagents read; market impact from the in-sample bars only. Returns the items
    archived, by kind."""
    if not rctx.news_items and rctx.alt is None:
        return Counter()
    bundles = feature_bundles(ctx)
    as_of = {s: dt.date.fromisoformat(b.as_of) for s, b in bundles.items() if b.as_of}
    closes = {s: ctx.insample_bars(s)["close"] for s in as_of}
    window = max(rctx.news_window_days, rctx.analyst_window_days)
    entries = all_entries(rctx.news_items, rctx.alt, as_of, window_days=window)
    files = build_archive(entries, closes=closes, as_of=as_of)
    for rel, text in sorted(files.items()):
        ctx.run.write_text(f"research/{rel}", text)
    return Counter(e.kind for e in entries)
