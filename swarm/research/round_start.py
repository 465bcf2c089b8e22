"""The start of a research round (the data extractor's step): plan the round's study from
the last failure (swarm.research.rounds), skip it when it would repeat an earlier round
exactly, else brief the data, expand the universe if the study says so, run the study and
revise the starting parameters. Writes data_brief.md, data_brief.json and rounds.json."""

from __future__ import annotations

from dataclasses import dataclass

from gate.contracts import FailureAnalysis
from swarm.directive import SECTORS
from swarm.research.data_extractor import brief_symbol, build_data_brief, render_data_brief_md
from swarm.research.feedback import revise_suggestion
from swarm.research.models import DataBrief, SuggestedParameters
from swarm.research.round_study import expand_universe, run_study, widen_benchmark, window_of
from swarm.research.rounds import (
    StudyKind,
    StudyRecord,
    apply_suggested,
    plan_round,
    related_symbols,
)
from swarm.research.runtime import ResearchRuntime


@dataclass(frozen=True)
class RoundStart:
    """The round's brief and every round's study so far; ``skipped``: the round would have
    repeated an earlier one, so the last round's findings and advice stand."""

    brief: DataBrief
    studies: list[StudyRecord]
    skipped: bool = False


def write_brief(ctx: ResearchRuntime, brief: DataBrief, studies: list[StudyRecord]) -> None:
    """Write the round's data brief (markdown and JSON) and the studies so far."""
    ctx.run.write_text("research/data_brief.md", render_data_brief_md(brief))
    ctx.run.write_json("research/data_brief.json", brief.model_dump(mode="json"))
    ctx.run.write_json("research/rounds.json", [r.model_dump(mode="json") for r in studies])


def plan_next(
    ctx: ResearchRuntime,
    *,
    research_round: int,
    failure: FailureAnalysis | None,
    done: list[StudyRecord],
    previous: DataBrief | None,
    ranking: list[str],
) -> StudyRecord:
    """The study round ``research_round`` would run (skipped when it would repeat one);
    plans only: nothing is read but the data folder's listing, nothing is written."""
    cfg = ctx.config
    allow = bool(getattr(cfg, "allow_universe_expansion", False))
    expansion = (
        related_symbols(ctx.symbols, getattr(cfg, "data_dir", None), SECTORS, ranking=ranking)
        if allow and research_round > 1
        else []
    )
    return plan_round(
        research_round=research_round,
        failure=failure,
        done=done,
        symbols=ctx.symbols,
        window=window_of(ctx),
        current_lookback=previous.suggested.lookback if previous else None,
        expansion=expansion,
        allow_expansion=allow,
    )


def start_round(
    ctx: ResearchRuntime,
    *,
    research_round: int,
    failure: FailureAnalysis | None,
    done: list[StudyRecord],
    previous: DataBrief | None,
    ranking: list[str],
) -> RoundStart:
    """``failure``: the last failure on a RESEARCH round (None on the first); ``done``: the
    studies of the earlier rounds; ``previous``: the last brief; ``ranking``: the universe's
    symbols by the last synthesis's fundamental / sentiment views (expansion order)."""
    round_ = research_round
    plan = plan_next(
        ctx,
        research_round=round_,
        failure=failure,
        done=done,
        previous=previous,
        ranking=ranking,
    )
    if plan.skipped and previous is not None:
        ctx.progress.stage("research", f"round {round_} skipped: {plan.skip_reason}")
        studies = [*done, plan]
        brief = previous.model_copy(update={"study": plan, "studies": studies})
        write_brief(ctx, brief, studies)
        return RoundStart(brief=brief, studies=studies, skipped=True)
    ctx.progress.stage(
        "research",
        f"round {round_}: {plan.kind.value} ({plan.why}); data extractor on "
        f"{len(ctx.symbols)} symbols",
    )
    record = plan
    if plan.kind == StudyKind.UNIVERSE:
        record = _expand(ctx, record)
    brief = build_data_brief(
        [
            brief_symbol(
                symbol,
                ctx.insample_bars(symbol),
                quality=ctx.data[symbol].quality.model_dump(mode="json"),
                sha256=ctx.data[symbol].sha256,
            )
            for symbol in ctx.symbols
        ]
    )
    hints = failure.hints if failure else []
    revised, note = revise_suggestion(brief.suggested.model_dump(), hints, round_)
    if note is not None:  # a RESEARCH round: start from what the gate's failure suggests
        ctx.progress.stage("research", f"starting parameters revised: {note}")
    result = run_study(ctx, record, brief)
    if result is not None:
        revised, changes = apply_suggested(
            revised, result.suggested, f"round {round_} {record.kind.value} study"
        )
        record = record.updated(
            lines=result.lines,
            numbers=result.numbers,
            table=result.table,
            favoured_families=result.families,
            portfolio_families=result.portfolio_families,
            suggested_changes=changes,
        )
        for line in result.lines:
            ctx.progress.stage("research", f"{record.kind.value}: {line}")
    added_so_far = [s for r in [*done, record] for s in r.added_symbols]
    studies = [*done, record]
    brief = brief.model_copy(
        update={
            "suggested": SuggestedParameters(**revised),
            "study": record,
            "studies": studies,
            "universe_added": added_so_far,
        }
    )
    write_brief(ctx, brief, studies)
    return RoundStart(brief=brief, studies=studies)


def _expand(ctx: ResearchRuntime, record: StudyRecord) -> StudyRecord:
    """A universe study: load the related symbols it names and widen the benchmark."""
    added, notes = expand_universe(ctx, list(record.params.get("add", [])))
    lines = [
        f"added {', '.join(added) or 'nothing'} from the data folder (same sector "
        f"lists, then the index ETFs); the universe is now {', '.join(ctx.symbols)}"
    ]
    lines += [f"left out {n}" for n in notes]
    lines += widen_benchmark(ctx, added)
    ctx.progress.stage("research", f"universe expanded: +{', '.join(added) or 'nothing'}")
    return record.updated(added_symbols=added, lines=lines)
