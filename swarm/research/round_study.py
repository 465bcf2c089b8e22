"""What a research round adds beyond the 15 subagents: runs the round's study
(``swarm.research.studies``, chosen by ``swarm.research.rounds``) on in-sample closes,
expands the universe when the study is an expansion, and applies the study and the
fundamental / sentiment views to the leader's synthesis. Used by ``swarm.research.round_start``
and ``swarm.research.leader_round``.

Every study reads ``ctx.insample_bars`` only: the holdout stays sealed (measured in
tests/research/test_research_rounds.py by poisoning the holdout bars).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from swarm.research.leader import FAMILIES
from swarm.research.models import DataBrief, FactSheet, Finding, ResearchSynthesis
from swarm.research.rounds import StudyKind, StudyRecord, favour, horizon_candidates
from swarm.research.runtime import ResearchRuntime
from swarm.research.steering import steer_families, universe_ranking
from swarm.research.studies import (
    HORIZONS,
    StudyResult,
    cross_section_study,
    horizon_study,
    pairs_study,
    subperiod_study,
)


def window_of(ctx: ResearchRuntime) -> str:
    """The in-sample window as "start..end" (the first symbol's bars when there is no split)."""
    split = getattr(ctx, "split", None)
    if split is not None:
        return f"{split.insample_start}..{split.insample_end}"
    first = ctx.insample_bars(ctx.symbols[0]).index
    return f"{first[0].date()}..{first[-1].date()}"


def _insample_closes(ctx: ResearchRuntime) -> dict[str, Any]:
    """In-sample closes only: every study reads these, never ``ctx.data`` (the holdout)."""
    return {s: ctx.insample_bars(s)["close"] for s in ctx.symbols}


def expand_universe(ctx: ResearchRuntime, candidates: list[str]) -> tuple[list[str], list[str]]:
    """Load related symbols from the data folder into the run's data (the universe of every
    later node): (added, notes on the ones left out). A candidate must cover the whole date
    range the universe covers (checked on its dates only), so folds and the holdout exist."""
    from backtest.data import DataError, load_bars

    cfg = ctx.config
    first = min(ctx.data[s].bars.index[0] for s in ctx.symbols)
    last = max(ctx.data[s].bars.index[-1] for s in ctx.symbols)
    slack = pd.Timedelta(days=7)
    added, notes = [], []
    for symbol in candidates:
        try:
            loaded = load_bars(
                symbol,
                start=cfg.start,
                end=cfg.end,
                timeframe=cfg.timeframe,
                source="csv",
                data_dir=cfg.data_dir,
                prices=getattr(cfg, "prices", "raw"),
            )
        except DataError as exc:
            notes.append(f"{symbol}: {exc}")
            continue
        idx = loaded.bars.index
        if len(idx) == 0 or idx[0] > first + slack or idx[-1] < last - slack:
            span = f"{idx[0].date()}..{idx[-1].date()}" if len(idx) else "no bars"
            notes.append(
                f"{symbol}: covers {span}, not the universe's {first.date()}..{last.date()}"
            )
            continue
        ctx.data[symbol] = loaded
        added.append(symbol)
        summary = ctx.memo.data_summary  # the report's data section (develop runs)
        if isinstance(summary, dict) and isinstance(summary.get("symbols"), dict):
            summary["symbols"][symbol] = loaded.summary() | {"added_by": "research"}
    return added, notes


def widen_benchmark(ctx: ResearchRuntime, added: list[str]) -> list[str]:
    """The universe's buy & hold takes the added symbols too: a strategy trading them must
    beat holding them (the added names are today's famous ones: holding only the original
    universe would flatter it). A symbol or cash benchmark is left as it is."""
    from backtest.benchmark import BUY_AND_HOLD, Benchmark

    bench = getattr(ctx, "benchmark", None)
    if not added or bench is None or bench.name != BUY_AND_HOLD:
        return []
    held = {**bench.held, **{s: ctx.data[s].bars for s in added}}
    ctx.benchmark = Benchmark(name=bench.name, held=held, calendar=bench.calendar)
    ctx.memo.benchmark_insample = None  # recomputed on the wider universe
    summary = ctx.memo.data_summary
    if isinstance(summary, dict) and isinstance(summary.get("benchmark"), dict):
        summary["benchmark"]["symbols"] = sorted(held)
    return [f"the buy-and-hold benchmark now holds {', '.join(held)} (was {', '.join(bench.held)})"]


def restore_universe(ctx: ResearchRuntime, symbols: list[str]) -> list[str]:
    """On ``--resume``: load the symbols an earlier research round added (the checkpoint's
    ``symbols``) that the context, built from the config's tickers, lacks. Returns them."""
    missing = [s for s in symbols if s not in ctx.data]
    added, notes = expand_universe(ctx, missing) if missing else ([], [])
    if notes:
        raise ValueError(f"--resume: the universe expansion cannot be reloaded: {'; '.join(notes)}")
    widen_benchmark(ctx, added)
    return added


def run_study(ctx: ResearchRuntime, record: StudyRecord, brief: DataBrief) -> StudyResult | None:
    """The computation behind a study (None for the baseline and the expansion, whose
    reading is the 15 subagents' on the new universe)."""
    closes = _insample_closes(ctx)
    if record.kind == StudyKind.HORIZONS:
        return horizon_study(closes, candidates=horizon_candidates(record.params, HORIZONS))
    if record.kind == StudyKind.CROSS_SECTION:
        return cross_section_study(closes)
    if record.kind == StudyKind.PAIRS:
        return pairs_study(closes)
    if record.kind == StudyKind.SUBPERIODS:
        return subperiod_study(closes, whole=brief.regime)
    return None


def apply_views(
    synthesis: ResearchSynthesis,
    sheets: list[FactSheet],
    findings: list[Finding],
    symbols: list[str],
) -> None:
    """Fundamental and sentiment views steer the families and rank the universe (in place);
    ``synthesis.steering`` says how."""
    families, notes = steer_families(synthesis.recommended_families, sheets)
    ranking = universe_ranking(findings, symbols)
    viewed = [r for r in ranking if r.n_views]
    if viewed:
        notes.append(
            "universe ranked by fundamental and sentiment views: "
            + ", ".join(f"{r.symbol} {r.score:+.2f}" for r in viewed)
            + "; a universe expansion adds the sectors of the better-ranked symbols first"
        )
    else:
        notes.append("no symbol has a fundamental or sentiment view: the universe keeps its order")
    synthesis.recommended_families = families
    synthesis.steering = notes
    synthesis.universe_ranking = ranking


def apply_study(synthesis: ResearchSynthesis, studies: list[StudyRecord]) -> list[StudyRecord]:
    """This round's study puts the families its numbers favour first (it is the newest
    evidence, chosen from the last failure); records the change on the study. Returns the
    studies with the last one updated."""
    if not studies:
        return studies
    record = studies[-1]
    before = list(synthesis.recommended_families)
    after = favour(before, [f for f in record.favoured_families if f in FAMILIES])
    synthesis.recommended_families = after
    record = record.updated(families_before=before, families_after=after)
    studies = [*studies[:-1], record]
    synthesis.studies = [r.headline() for r in studies]
    effect = []
    if record.kind != StudyKind.BASELINE:
        effect.append(
            f"round {record.research_round} {record.kind.value}: families "
            + (
                f"{', '.join(before)} -> {', '.join(after)}"
                if after != before
                else f"unchanged ({', '.join(after)})"
            )
        )
        if record.suggested_changes:
            effect.append(
                "starting parameters "
                + ", ".join(f"{k} {a}->{b}" for k, (a, b) in record.suggested_changes.items())
            )
    synthesis.study_effect = effect
    portfolio: list[str] = []
    for r in reversed(studies):
        portfolio += [f for f in r.portfolio_families if f not in portfolio]
    synthesis.portfolio_families = portfolio
    synthesis.universe_added = [s for r in studies for s in r.added_symbols]
    if record.kind != StudyKind.BASELINE:
        synthesis.summary += (
            f" Round {record.research_round} studied {record.kind.value} ({record.why})"
        )
        synthesis.summary += (": " + "; ".join(record.lines[-2:]) + ".") if record.lines else "."
        if effect:
            synthesis.summary += " Effect: " + "; ".join(effect) + "."
    if len(studies) > 1:
        synthesis.summary += (
            " Research rounds: "
            + "; ".join(
                f"{r.research_round} {r.kind.value}" + (" (skipped)" if r.skipped else "")
                for r in studies
            )
            + "."
        )
    if synthesis.universe_added:
        synthesis.summary += (
            f" Universe expanded by research: +{', '.join(synthesis.universe_added)} "
            "(--allow-universe-expansion)."
        )
    return studies


def apply_alt_studies(ctx: ResearchRuntime, synthesis: ResearchSynthesis) -> None:
    """The alt-data family studies (``swarm.research.alt_studies``) on in-sample closes and
    the rows known by the in-sample end, once per universe: the families they support go
    to ``proposed_families``, every study's line to ``alt_studies`` and the summary."""
    from swarm.research.alt_studies import alt_family_studies
    from swarm.research.inputs import research_context

    key = tuple(ctx.symbols)
    if key not in ctx.memo.alt_studies:
        alt = research_context(ctx).alt
        ctx.memo.alt_studies[key] = alt_family_studies(
            alt, _insample_closes(ctx), through=ctx.split.insample_end
        )
    studies = ctx.memo.alt_studies[key]
    synthesis.alt_studies = [s.line for s in studies]
    synthesis.proposed_families = [s.family for s in studies if s.supported]
    if synthesis.proposed_families:
        synthesis.summary += (
            " Alt-data studies support " + ", ".join(synthesis.proposed_families) + "."
        )
