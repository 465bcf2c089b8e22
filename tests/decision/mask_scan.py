"""The scan issue 29's "done when" asks for: what a masked prompt must not name, read from the
corpus (its OHLCV file names and GICS table), independently of the masker's own lists."""

from __future__ import annotations

import csv
import re

from conftest import SHARED_DATA

from swarm.llm.mask import core_names, maskable_ticker

GICS = SHARED_DATA / "fundamentals" / "sp500_securities_gics.csv"
YEAR = re.compile(r"(?<![\d.,])(?:199\d|20[0-2]\d|2030)(?![\d]|\.\d|,\d)")


def corpus_tickers() -> set[str]:
    """Every ticker the corpus knows: its OHLCV file names and the GICS table's."""
    stems = {p.stem for p in (SHARED_DATA / "ohlcv").rglob("*.csv")}
    tickers = {s.split("_")[0] for s in stems} | {s.split("-")[0] for s in stems}
    with open(GICS, newline="", encoding="utf-8") as fh:
        tickers |= {r["ticker"] for r in csv.DictReader(fh)}
    # Not one-letter tickers (a capital "A" opens a headline) nor two-letter ones that are
    # words (AN, SO, PM): the masker leaves those, as it must to keep the text readable.
    return {t for t in tickers if t and maskable_ticker(t)}


def gics_terms() -> tuple[set[str], set[str]]:
    """(company names as listed and as they go by, GICS sector and sub-industry names)."""
    with open(GICS, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    names = {n for r in rows for n in core_names(r["security"]) if len(n) >= 3}
    gics = {r[k] for r in rows for k in ("gics_sector", "gics_sub_industry") if r[k]}
    return names, gics


def leaks_in(prompt: str, tickers: set[str], names: set[str], gics: set[str]) -> list[str]:
    """What ``prompt`` names that a masked prompt must not: tickers as whole tokens, case as
    written (``A`` the ticker, not ``a`` the word; ``ASSET-A``, ``D+0``, ``A/D`` and ``%K``
    are tokens of their own), company names (as written, any case for names of several
    words), GICS names (any case), years 1990-2030."""
    tokens = {t.rstrip(".") for t in re.findall(r"[A-Za-z0-9.+\-/%]+", prompt)}
    found = sorted(tickers & tokens)
    low = prompt.lower()
    for n in names:
        flags = re.IGNORECASE if " " in n else 0
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(n)}(?![A-Za-z0-9])", prompt, flags):
            found.append(n)
    found += [
        g for g in gics if re.search(rf"(?<![a-z0-9]){re.escape(g.lower())}(?![a-z0-9])", low)
    ]
    found += YEAR.findall(prompt)
    return found


def prompt_leaks(prompts, scan) -> dict[str, list[str]]:
    """Tool -> what its prompts named, over ``(tool, prompt)`` pairs; empty when clean."""
    bad: dict[str, set[str]] = {}
    for tool, prompt in prompts:
        found = leaks_in(prompt, *scan)
        if found:
            bad.setdefault(tool, set()).update(found)
    return {t: sorted(f)[:20] for t, f in bad.items()}
