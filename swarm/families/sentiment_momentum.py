"""Sentiment momentum as a family (``strategies.sentiment_momentum``).

Its code embeds per-ticker daily (items, mean tone) readings the trusted side computed from
the alternative-data folder (``--alt-data``, else the corpus layout above ``--data-dir``):
cashtag tweets and Benzinga headlines, each scored once with the research swarm's headline
scorer (finance VADER, ``swarm.research.news``) and de-duplicated with its story key
(``altdata.sentiment.normalise``). During the search the code carries only the items known by
the in-sample end; the holdout node asks ``holdout_variant`` for the winner's code with the
items through the holdout end, written beside its trial's source.

Coverage is short (tweets 2014-01 .. 2016-03; headlines for a few tickers): a source with no
ticker covered in the search's window is not proposed, the tickers it misses are named on
stderr (their strategy stays flat), and with no source covered the family proposes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from altdata.corpus import DATASETS, AltData, find_alt_root
from altdata.pit import AltTable
from altdata.sentiment import normalise
from altdata.sessions import nyse
from experiments.runfolder import holdout_code_file
from strategies.codegen import code_sha256
from strategies.earnings_drift import date_key
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.sentiment_momentum import (
    KIND,
    NEWS,
    TWEETS,
    DailyTable,
    merged,
    propose,
    reconcile,
    render,
    scored,
    series,
    window,
)
from strategies.spec import StrategySpec
from swarm.errors import UserInputError
from swarm.families import REGISTRY
from swarm.research.tone_cache import cached_tones, default_tone_dir

# The corpus tables each source reads, with their text column.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    TWEETS: (("tweets", "text"),),
    NEWS: (("headlines", "headline"), ("headlines_subset", "headline")),
}
# Sessions with items a ticker needs in the search's window for its source to count as
# covered: fewer cannot fill a z-score's history.
MIN_COVERED_DAYS = 20


def alt_root(run: Any) -> Path | None:
    """The run's alternative-data folder: ``--alt-data``, else the nearest folder above
    ``--data-dir`` laid out like the corpus."""
    return run.config.alt_data or find_alt_root(run.config.data_dir)


def coverage(table: DailyTable, start: date, end: date) -> dict[str, list[str]]:
    """Source name -> the tickers with at least ``MIN_COVERED_DAYS`` sessions of items from
    ``start`` to ``end``."""
    return {
        source: sorted(
            t for t, rows in window(by_ticker, start, end).items() if len(rows) >= MIN_COVERED_DAYS
        )
        for source, by_ticker in table.items()
    }


def _warn(run: Any, message: str) -> None:
    progress = getattr(run, "progress", None)
    if progress is not None and hasattr(progress, "warn"):
        progress.warn(message)
    else:
        print(f"[warning] {message}", file=sys.stderr, flush=True)


class SentimentMomentum:
    name = "sentiment_momentum"
    kinds = (KIND,)
    scope: Scope = "symbol"
    self_proposing = True
    priority = 30
    repairable = False  # no block edit reshapes it: its own proposer moves its parameters

    def __init__(self) -> None:
        self._tables: dict[Path, dict[str, AltTable]] = {}
        self._series: dict[tuple[Path, tuple[str, ...], date], DailyTable] = {}
        self._warned: set[tuple[Any, ...]] = set()

    def _tones(self, texts: list[str]) -> list[float]:
        """The headline scorer's tones, kept in the user cache dir across runs
        (``swarm.research.tone_cache``): the same floats, scored once per text list."""
        return cached_tones(texts, default_tone_dir())

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """All ``n`` when the run names only this family, half (at least one) beside others,
        none when it is not named."""
        if n <= 0 or KIND not in families:
            return 0
        return n if set(families) == {KIND} else max(1, n // 2)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Fresh specs for the route on the covered sources; none that would trade on the
        search's readings exactly as its best or one of the last iteration's specs does."""
        if n <= 0:
            return []
        if ctx.run is None:
            return propose(route=ctx.route, n=n, rng=ctx.rng, seen=ctx.seen, best=ctx.own_best)
        run = ctx.run
        table, days = self.scored_series(run)
        start, end = run.folds[0].warmup_start, run.split.insample_end
        covered = coverage(table, start, end)
        sources = [s for s, tickers in covered.items() if tickers]
        self._note_gaps(run, covered, start, end)
        if not sources:
            return []
        tried = [spec for _, spec in ctx.last if spec.family.value == KIND]
        return propose(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            table=table,
            days=days,
            sources=sources,
            tried=tried,
        )

    def _note_gaps(self, run: Any, covered: dict[str, list[str]], start: date, end: date) -> None:
        """Say once per run which tickers a source does not cover (their strategy stays
        flat), and when no source covers any, that the family proposes nothing."""
        symbols = list(run.symbols)
        gaps = {s: [t for t in symbols if t not in tickers] for s, tickers in covered.items()}
        key = (id(run), tuple((s, tuple(g)) for s, g in sorted(gaps.items())))
        if key in self._warned or not any(gaps.values()):
            return
        self._warned.add(key)
        where = f"between {start} and {end} (at least {MIN_COVERED_DAYS} sessions with items)"
        if not any(covered.values()):
            _warn(
                run,
                f"{KIND}: no tweet or headline coverage for {', '.join(symbols)} {where}; "
                "the family proposes nothing (tweets cover 2014-01 .. 2016-03)",
            )
            return
        missing = "; ".join(f"{s}: {', '.join(g)}" for s, g in gaps.items() if g)
        _warn(run, f"{KIND}: no coverage {where} for {missing}; those strategies stay flat")

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with exactly its family\'s parameters, snapped to the grid."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The search's source: the items known by the in-sample end, never later ones."""
        return render(spec, self.series(run, through=run.split.insample_end))

    def code_through(self, run: Any, spec: StrategySpec, day: date) -> str:
        """The source with the items known by the close of ``day`` (a truncated re-run's);
        through the in-sample end it is ``code``."""
        return render(spec, self.series(run, through=day))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The winner's source with the items through the holdout end, written beside its
        trial's source (which stays as the ledger recorded it)."""
        spec = StrategySpec.model_validate(variant["spec"])
        code = render(spec, self.series(run, through=run.split.holdout_end))
        run.run.write_text(holdout_code_file(variant["variant_id"]), code)
        return variant | {"code": code, "code_sha256": code_sha256(code)}

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the screen has no alternative data; its variants are backtested whole."""
        return False

    def series(self, run: Any, *, through: date) -> DailyTable:
        """The run's symbols' readings known by the close of ``through``, once per run."""
        root = alt_root(run)
        tables = self._scored(root)
        key = (root, tuple(run.symbols), through)
        if key not in self._series:
            self._series[key] = series(tables, run.symbols, through=through)
        return self._series[key]

    def scored_series(self, run: Any) -> tuple[DailyTable, list[int]]:
        """The search's readings and the sessions its folds' bars fall on (from the first
        fold's warm-up to the in-sample end), for judging which proposals trade alike."""
        table = self.series(run, through=run.split.insample_end)
        start, end = run.folds[0].warmup_start, run.split.insample_end
        sessions = nyse().sessions_in_range(str(start), str(end))
        return table, [date_key(s.date()) for s in sessions]

    def preflight(self, config: Any) -> None:
        """A run naming this family needs tweets or headlines: say so before it starts."""
        self._scored(config.alt_data or find_alt_root(config.data_dir))

    def scored_tables(self, root: Path) -> dict[str, AltTable]:
        """The scored tables under ``root``, scored once per root: the research's study
        (``swarm.research.alt_studies``) reads the scores the family's code embeds."""
        return self._scored(root)

    def _scored(self, root: Path | None) -> dict[str, AltTable]:
        """The scored tables under ``root`` (``tweets``, ``news``), scored once per root."""
        if root is not None and root in self._tables:
            return self._tables[root]
        alt = AltData(root)
        out: dict[str, AltTable] = {}
        missing: list[str] = []
        for source, parts in TABLES.items():
            found = []
            for name, text in parts:
                table = alt.table(name)
                if table is None:
                    missing.append(alt.missing(name))
                    continue
                found.append(scored(table, text=text, tones=self._tones, key=normalise))
            if found:
                out[source] = found[0] if len(found) == 1 else merged(source, found)
        if root is None or not out:
            files = ", ".join(DATASETS[n].source for parts in TABLES.values() for n, _ in parts)
            raise UserInputError(
                f"--families {KIND}: no tweets or headlines: {'; '.join(missing)}; pass "
                f"--alt-data DIR with one or more of {files}"
            )
        self._tables[root] = out
        return out


REGISTRY.register(SentimentMomentum())
