"""The news researcher's files under ``research/news``: a table per day of everything known
that day (``headlines/YYYY-MM-DD.md``) and a body per item (``body/<slug>.md``).

A body has a summary derived from the parsed fields, the key facts with the moment the item
became known, its market impact from the research bars (``market_impact``: never a bar after
``as_of``) and what the source cannot say. Third-party text appears only as a literal code
span in a day table or fenced as untrusted data at the end of a body.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import pandas as pd

from swarm.research.archive_entries import (
    ArchiveEntry,
    headline_entry,
    headline_slug,
    select_headlines,
)
from swarm.research.market_impact import market_impact
from swarm.research.news import UNTRUSTED_NOTICE, NewsItem, fence_untrusted, inline_literal

__all__ = ["archive_headlines", "build_archive", "headline_slug"]

DAY_DIR = "news/headlines"
BODY_DIR = "news/body"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_day(day: dt.date, entries: list[ArchiveEntry]) -> str:
    lines = [
        f"# News and alternative data {day.isoformat()}",
        "",
        f"> {UNTRUSTED_NOTICE} Headlines are shown as literal code spans; every other item is "
        "derived from parsed fields. Full text is fenced in `../body/<slug>.md`. Put/call rows "
        "are market-wide: they say the same about every stock.",
        "",
        "| known at (UTC) | ticker | kind | item | body |",
        "|---|---|---|---|---|",
    ]
    for e in sorted(entries, key=lambda e: (e.known_at, e.kind, e.ticker or "", e.cell)):
        item = inline_literal(e.cell) if e.cell_is_untrusted else _cell(e.cell)
        lines.append(
            f"| {e.known_at:%Y-%m-%d %H:%M} | {e.ticker or 'market-wide'} | {e.kind} | {item} "
            f"| {e.slug or '-'} |"
        )
    return "\n".join(lines) + "\n"


def impact_lines(
    entry: ArchiveEntry, closes: dict[str, pd.Series], as_of: dict[str, dt.date]
) -> list[str]:
    if entry.ticker is None:
        return ["not computed: a market-wide item has no symbol"]
    if entry.ticker not in closes or entry.ticker not in as_of:
        return [f"unknown: no research bars for {entry.ticker}"]
    impacts = market_impact(closes[entry.ticker], entry.known_at, as_of=as_of[entry.ticker])
    head = (
        f"{entry.ticker} close-to-close (quoted closes, not dividend-adjusted) from the last "
        f"close before the item became known ({entry.known_at:%Y-%m-%d %H:%M} UTC):"
    )
    return [head, *(f"- {i.describe()}" for i in impacts)]


def render_body(entry: ArchiveEntry, impact: list[str]) -> str:
    lines = [f"# {entry.slug}", "", f"kind: {entry.kind}", "", "## Summary", "", entry.summary]
    lines += ["", "## Key facts", "", "| field | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in entry.facts]
    lines += ["", "## Market impact", "", *impact, "", "## What is unknown", ""]
    lines += [f"- {u}" for u in entry.unknown]
    if entry.untrusted:
        lines += ["", "## Source text (untrusted)", "", f"> {UNTRUSTED_NOTICE}", ""]
        lines.append(fence_untrusted(entry.untrusted, label=entry.kind.name.lower()))
    return "\n".join(lines) + "\n"


def build_archive(
    entries: Iterable[ArchiveEntry],
    *,
    closes: dict[str, pd.Series] | None = None,
    as_of: dict[str, dt.date] | None = None,
) -> dict[str, str]:
    """{path relative to research/: text}: one day table per day, one body per entry that
    has a slug."""
    closes, as_of = closes or {}, as_of or {}
    files: dict[str, str] = {}
    by_day: dict[dt.date, list[ArchiveEntry]] = {}
    for e in entries:
        by_day.setdefault(e.day, []).append(e)
        if e.slug is not None:
            files[f"{BODY_DIR}/{e.slug}.md"] = render_body(e, impact_lines(e, closes, as_of))
    for day, day_entries in by_day.items():
        files[f"{DAY_DIR}/{day.isoformat()}.md"] = render_day(day, day_entries)
    return files


def archive_headlines(
    items: Iterable[NewsItem],
    as_of: dict[str, dt.date],
    *,
    window_days: int | None = None,
    closes: dict[str, pd.Series] | None = None,
) -> dict[str, str]:
    """The headlines alone: never one dated, or known, after its symbol's ``as_of``."""
    chosen = select_headlines(list(items), as_of, window_days=window_days)
    return build_archive([headline_entry(it) for it in chosen], closes=closes, as_of=as_of)
