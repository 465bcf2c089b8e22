"""Research nodes: data extractor, the 15 subagents (fanned out), 3 synthesizers, the leader.

Each round studies something (swarm.research.rounds): the first reads the indicators; a
RESEARCH round after a failure runs a study the failure points to (other horizons, the
cross-section, pairs, the regime by year, with --allow-universe-expansion related symbols),
writes what it added and why in the data brief, and its numbers move the recommended
families and starting parameters. A round that would repeat an earlier one exactly is
skipped (the data extractor goes straight to the leader, which keeps the last advice).

The leader also consults memory (swarm.memory): it recalls lessons and strategies tried on
these symbols / this style, lets past gate outcomes reorder the recommended families, shows
what it recalled (research.md, recalled.json) and stores this round's research. The
fundamental and sentiment views steer the families and rank the universe (synthesis.json
``steering``).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from strategies.spec import Origin
from swarm.directive import SECTORS
from swarm.edges import DATA_EXTRACTOR, LEADER, SUBAGENT, SYNTH
from swarm.llm.brains import llm_finding, llm_summary
from swarm.nodes.llm_log import llm_logger
from swarm.research.data_extractor import brief_symbol, build_data_brief, render_data_brief_md
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.feedback import rerank, revise_suggestion, run_outcomes
from swarm.research.models import (
    DataBrief,
    Domain,
    FactSheet,
    Finding,
    ResearchSynthesis,
    SuggestedParameters,
)
from swarm.research.news import archive_headlines, headlines_for
from swarm.research.round_study import (
    apply_study,
    apply_views,
    expand_universe,
    run_study,
    widen_benchmark,
    window_of,
)
from swarm.research.rounds import (
    StudyKind,
    StudyRecord,
    apply_suggested,
    plan_round,
    related_symbols,
)
from swarm.research.runtime import ResearchRuntime
from swarm.research.subagents import SUBAGENTS, ResearchContext, run_subagent
from swarm.research.synthesis import (
    lead,
    render_research_md,
    synthesize_domain,
)
from swarm.state import RESET, DevelopState, SubagentTask

SUBAGENT_NODE = SUBAGENT
DATA_EXTRACTOR_NODE = DATA_EXTRACTOR
SYNTH_NODES = SYNTH
LEADER_NODE = LEADER
RECALL_K = 8
NEWS_SUBAGENT = "sentiment.news"


def feature_bundles(ctx: ResearchRuntime) -> dict[str, FeatureBundle]:
    """Computed once per symbol and run: in-sample bars never change between research rounds."""
    bundles = ctx.cache.setdefault("features", {})
    for s in ctx.symbols:  # a universe expansion adds symbols between rounds
        if s not in bundles:
            bundles[s] = compute_features(s, ctx.insample_bars(s))
    return bundles


def research_context(ctx: ResearchRuntime) -> ResearchContext:
    """One ResearchContext per run, shared by the 15 subagents (so the fundamentals of a
    symbol are fetched once for all five fundamental subagents)."""
    if "research_context" not in ctx.cache:
        offline = bool(getattr(ctx.config, "offline", True))
        ctx.cache["research_context"] = ResearchContext(
            news_items=list(ctx.news_items or []),
            fundamentals=_fundamentals_provider(ctx, offline),
            offline=offline,
        )
    return ctx.cache["research_context"]


def _fundamentals_provider(ctx: ResearchRuntime, offline: bool):
    """yfinance fundamentals cached on disk; offline, only a cache that exists is read."""
    from backtest.data import default_cache_dir
    from swarm.research.fundamental import yfinance_fundamentals

    cache_dir = getattr(ctx.config, "cache_dir", None) or default_cache_dir()
    if offline and not (cache_dir / "fundamentals").is_dir():
        return None  # nothing cached: the subagents abstain with "offline" as the reason
    return yfinance_fundamentals(cache_dir, offline=offline)


def write_news_archive(ctx: ResearchRuntime, rctx: ResearchContext) -> int:
    """The news researcher's files (research/news/headlines, research/news/body): only
    headlines dated on or before each symbol's as_of, inside the windows the sentiment
    subagents read. Returns the number of headlines archived."""
    if not rctx.news_items:
        return 0
    bundles = feature_bundles(ctx)
    as_of = {s: dt.date.fromisoformat(b.as_of) for s, b in bundles.items() if b.as_of}
    window = max(rctx.news_window_days, rctx.analyst_window_days)
    files = archive_headlines(rctx.news_items, as_of, window_days=window)
    for rel, text in sorted(files.items()):
        ctx.run.write_text(f"research/{rel}", text)
    return sum(rel.startswith("news/body/") for rel in files)


def _write_brief(ctx: ResearchRuntime, brief: DataBrief, studies: list[StudyRecord]) -> None:
    ctx.run.write_text("research/data_brief.md", render_data_brief_md(brief))
    ctx.run.write_json("research/data_brief.json", brief.model_dump(mode="json"))
    ctx.run.write_json("research/rounds.json", [r.model_dump(mode="json") for r in studies])


def data_extractor(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
    """Plan the round's study from the last failure (swarm.research.rounds), skip it when it
    would repeat an earlier round exactly, else brief the data and run the study."""
    ctx = runtime.context
    round_ = state.get("research_round", 0) + 1
    failure = state.get("failure") if round_ > 1 else None
    done = list(state.get("research_studies") or [])
    previous = DataBrief.model_validate(state["data_brief"]) if state.get("data_brief") else None
    cfg = ctx.config
    allow = bool(getattr(cfg, "allow_universe_expansion", False))
    ranking = [r["symbol"] for r in (state.get("synthesis") or {}).get("universe_ranking", [])]
    expansion = (
        related_symbols(ctx.symbols, getattr(cfg, "data_dir", None), SECTORS, ranking=ranking)
        if allow and round_ > 1 else []
    )  # fmt: skip
    plan = plan_round(
        research_round=round_, failure=failure, done=done, symbols=ctx.symbols,
        window=window_of(ctx), current_lookback=previous.suggested.lookback if previous else None,
        expansion=expansion, allow_expansion=allow,
    )  # fmt: skip
    if plan.skipped and previous is not None:
        ctx.progress.stage("research", f"round {round_} skipped: {plan.skip_reason}")
        studies = [*done, plan]
        brief = previous.model_copy(update={"study": plan, "studies": studies})
        _write_brief(ctx, brief, studies)
        # The findings and fact sheets of the last round stay: the leader reuses them.
        return {"research_round": round_, "research_studies": studies,
                "data_brief": brief.model_dump(mode="json")}  # fmt: skip
    ctx.progress.stage(
        "research",
        f"round {round_}: {plan.kind.value} ({plan.why}); data extractor on "
        f"{len(ctx.symbols)} symbols",
    )
    record = plan
    if plan.kind == StudyKind.UNIVERSE:
        added, notes = expand_universe(ctx, list(plan.params.get("add", [])))
        lines = [
            f"added {', '.join(added) or 'nothing'} from the data folder (same sector "
            f"lists, then the index ETFs); the universe is now {', '.join(ctx.symbols)}"
        ]
        lines += [f"left out {n}" for n in notes]
        lines += widen_benchmark(ctx, added)
        record = record.updated(added_symbols=added, lines=lines)
        ctx.progress.stage("research", f"universe expanded: +{', '.join(added) or 'nothing'}")
    briefs = []
    for symbol in ctx.symbols:
        loaded = ctx.data[symbol]
        briefs.append(
            brief_symbol(
                symbol,
                ctx.insample_bars(symbol),
                quality=loaded.quality.model_dump(mode="json"),
                sha256=loaded.sha256,
            )
        )
    brief = build_data_brief(briefs)
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
            lines=result.lines, numbers=result.numbers, table=result.table,
            favoured_families=result.families, portfolio_families=result.portfolio_families,
            suggested_changes=changes,
        )  # fmt: skip
        for line in result.lines:
            ctx.progress.stage("research", f"{record.kind.value}: {line}")
    added_so_far = [s for r in [*done, record] for s in r.added_symbols]
    studies = [*done, record]
    brief = brief.model_copy(update={
        "suggested": SuggestedParameters(**revised), "study": record, "studies": studies,
        "universe_added": added_so_far,
    })  # fmt: skip
    _write_brief(ctx, brief, studies)
    return {
        "research_round": round_,
        "research_studies": studies,
        "symbols": ctx.symbols,
        "data_brief": brief.model_dump(mode="json"),
        "findings": RESET,
        "failed_subagents": RESET,
        "fact_sheets": RESET,
        "llm_events": RESET,
    }


def _skipped(state: DevelopState) -> bool:
    studies = state.get("research_studies") or []
    return bool(studies) and studies[-1].skipped and bool(state.get("synthesis"))


def fan_out_subagents(state: DevelopState) -> list[Send] | str:
    """The 15 subagents; a skipped round goes straight to the leader."""
    if _skipped(state):
        return LEADER_NODE
    return [
        Send(
            SUBAGENT_NODE,
            SubagentTask(
                subagent_id=spec.id,
                research_round=state["research_round"],
                iteration=state.get("iteration", 0),
            ),
        )
        for spec in SUBAGENTS
    ]


def research_subagent(payload: SubagentTask, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
    """One specialist over every symbol. A crash is recorded as a failed subagent, not raised."""
    ctx = runtime.context
    bundles = feature_bundles(ctx)
    rctx = research_context(ctx)
    findings: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    try:
        for symbol in ctx.symbols:
            finding = run_subagent(
                payload.subagent_id, symbol=symbol, bundle=bundles[symbol], context=rctx
            )
            if getattr(ctx, "llm", None) is not None:
                finding = _llm_reading(ctx, payload, finding, rctx, events)
            findings.append(finding.model_dump(mode="json"))
    except Exception as exc:  # a broken specialist degrades the research; it must not kill the run
        ctx.progress.stage("research", f"subagent {payload.subagent_id} failed: {exc!r}")
        return {"failed_subagents": [payload.subagent_id]}
    if payload.subagent_id == NEWS_SUBAGENT:
        try:
            n = write_news_archive(ctx, rctx)
            if n:
                ctx.progress.stage("research", f"news: {n} headlines archived in research/news")
        except OSError as exc:  # the archive is a record, not a reason to lose the finding
            ctx.progress.stage("research", f"news archive not written: {exc!r}")
    return {"findings": findings, "llm_events": events}


def _llm_reading(
    ctx: ResearchRuntime,
    payload: SubagentTask,
    finding: Finding,
    rctx: ResearchContext,
    events: list,
) -> Finding:
    """The LLM brain reads the same evidence; headlines reach it only fenced, as data.
    Fallback events are returned, not logged here: the leader logs them in a fixed order."""
    spec = next(s for s in SUBAGENTS if s.id == payload.subagent_id)
    untrusted: list[str] = []
    if payload.subagent_id == NEWS_SUBAGENT and finding.as_of:
        as_of = dt.date.fromisoformat(finding.as_of)
        untrusted = [
            i.headline for i in headlines_for(rctx.news_items, finding.symbol, as_of=as_of)
        ][-10:]
    return llm_finding(
        ctx.llm, finding, description=spec.description, untrusted=untrusted, log=events.append
    )


def make_synthesizer(domain: Domain):
    def synthesize(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
        findings = [Finding.model_validate(f) for f in state.get("findings", [])]
        mine = [f for f in findings if f.type == domain]
        prefix = f"{domain.value}."
        failed = [
            s.removeprefix(prefix)
            for s in state.get("failed_subagents", [])
            if s.startswith(prefix)
        ]
        sheet = synthesize_domain(domain, mine, failed=failed)
        return {"fact_sheets": [sheet.model_dump(mode="json")]}

    synthesize.__name__ = f"synthesize_{domain.value}"
    return synthesize


def _skipped_leader(ctx: ResearchRuntime, state: DevelopState) -> dict[str, Any]:
    """A skipped round: the last synthesis stands, with the skip said in its gaps."""
    studies = list(state["research_studies"])
    synthesis = ResearchSynthesis.model_validate(state["synthesis"])
    record = studies[-1]
    synthesis.gaps.append(f"research round {record.research_round} skipped: {record.skip_reason}")
    synthesis.studies = [r.headline() for r in studies]
    synthesis.study_effect = [f"round {record.research_round} skipped: no change to the advice"]
    synthesis.summary += f" Round {record.research_round} skipped: {record.skip_reason}."
    findings = [Finding.model_validate(f) for f in state.get("findings", [])]
    ctx.run.write_json("research/synthesis.json", synthesis.model_dump(mode="json"))
    ctx.run.write_text("research/research.md", render_research_md(synthesis, findings))
    ctx.progress.stage("research", f"leader: round {record.research_round} skipped, advice kept")
    return {"synthesis": json.loads(synthesis.model_dump_json())}


def leader(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
    ctx = runtime.context
    if _skipped(state):
        return _skipped_leader(ctx, state)
    order = {d: i for i, d in enumerate(Domain)}
    sheets = sorted(
        (FactSheet.model_validate(s) for s in state.get("fact_sheets", [])),
        key=lambda s: order[s.domain],
    )
    brief = DataBrief.model_validate(state["data_brief"])
    findings = [Finding.model_validate(f) for f in state.get("findings", [])]
    findings.sort(key=lambda f: (f.symbol, f.type.value, f.specialization))
    synthesis = lead(sheets, brief)
    if getattr(ctx, "llm", None) is not None:
        log = llm_logger(
            ctx,
            iteration=state.get("iteration", 0),
            route=Origin.RESEARCH,
            research_round=state.get("research_round", 1),
        )
        # Subagents ran in parallel: log their events in a fixed order, so reruns match.
        events = sorted(
            state.get("llm_events", []), key=lambda e: (e.get("subagent"), e.get("symbol"))
        )
        for event in events:
            log(event)
        synthesis = llm_summary(ctx.llm, synthesis, log=log)
    failed = state.get("failed_subagents", [])
    if failed:
        synthesis.gaps.append(f"failed subagents: {', '.join(sorted(failed))}")
    apply_views(synthesis, sheets, findings, ctx.symbols)
    # This round's study first, then this run's verdicts: a family the study favours that
    # the gate has already scored low is not put back in front of better-scored ones.
    studies = apply_study(synthesis, list(state.get("research_studies") or []))
    if state.get("feedback"):
        # A RESEARCH round: say what the gate reported, so the research record shows why it reran.
        synthesis.gaps.append(f"gate feedback: {state['feedback'][-1]}")
    if state.get("decisions"):
        # ...and let this run's verdicts so far reorder the families (memory may be off).
        tracks = run_outcomes(state["decisions"])
        families, notes = rerank(synthesis.recommended_families, tracks)
        synthesis.recommended_families = families
        synthesis.run_feedback = notes
        if notes:
            synthesis.summary += f" This run so far: families reordered to {', '.join(families)}."
    round_ = state.get("research_round", 1)
    recalled = consult_memory(ctx, synthesis, findings, sheets, round_=round_)

    ctx.run.write_json("research/findings.json", [f.model_dump(mode="json") for f in findings])
    ctx.run.write_json("research/fact_sheets.json", [s.model_dump(mode="json") for s in sheets])
    ctx.run.write_json("research/synthesis.json", synthesis.model_dump(mode="json"))
    ctx.run.write_json("research/recalled.json", recalled)
    if studies:
        ctx.run.write_json("research/rounds.json", [r.model_dump(mode="json") for r in studies])
    ctx.run.write_text("research/research.md", render_research_md(synthesis, findings, recalled))
    n_abstained = sum(f.abstained for f in findings)
    ctx.progress.stage(
        "research",
        f"leader: regime {synthesis.regime.value}, signal {synthesis.signal:+.2f}, confidence "
        f"{synthesis.confidence:.2f} ({synthesis.quality}); {len(findings)} findings, "
        f"{n_abstained} abstained; families {synthesis.recommended_families}",
    )
    out: dict[str, Any] = {"synthesis": json.loads(synthesis.model_dump_json())}
    if studies:
        out["research_studies"] = studies
    return out


def _style(ctx: ResearchRuntime) -> list[str]:
    return list(getattr(ctx.config, "preferred_families", None) or [])


def consult_memory(
    ctx: ResearchRuntime,
    synthesis: Any,
    findings: list[Finding],
    sheets: list[FactSheet],
    *,
    round_: int,
) -> dict[str, Any]:
    """Recall, let past gate outcomes reorder the families (in place on ``synthesis``),
    then store this round. Returns the content of research/recalled.json. Never raises:
    memory problems leave the research as it was, with the reason recorded."""
    from swarm.memory import (
        adjust_families,
        memory_for,
        memory_line,
        recollections_json,
        run_scope,
    )

    try:
        memory = memory_for(ctx)
        status = memory.status()
        style, regime = _style(ctx), synthesis.regime.value
        scope = run_scope(ctx.config)
        query = {"symbols": list(ctx.symbols), "style": style, "regime": regime, "k": RECALL_K,
                 **scope}  # fmt: skip
        recalled = memory.recall(
            ctx.symbols, style, regime, k=RECALL_K,
            timeframe=scope.get("timeframe"), sector=scope.get("sector"),
        )  # fmt: skip
        outcomes = memory.family_outcomes(
            ctx.symbols, exclude_run=ctx.run.root.name, timeframe=scope.get("timeframe")
        )
        families, notes, demoted = adjust_families(synthesis.recommended_families, outcomes)
        if notes:
            synthesis.summary += " Memory: " + "; ".join(notes) + "."
        synthesis.recommended_families = families
        synthesis.memory_notes = notes
        synthesis.demoted_families = demoted
        synthesis.recalled = [r.id for r in recalled]
        run_id = ctx.run.root.name
        split = getattr(ctx, "split", None)
        window = f"{split.insample_start}..{split.insample_end}" if split else None
        stored = memory.remember_findings(
            run_id, findings, iteration=round_, regime=regime, scope=scope
        )
        stored += memory.remember_fact_sheets(
            run_id, sheets, symbols=ctx.symbols, iteration=round_, regime=regime, scope=scope
        )
        stored += memory.remember_research(
            run_id, synthesis, symbols=ctx.symbols, iteration=round_, window=window, scope=scope
        )
        status = {**status, "stored": stored, "reason": memory.reason,
                  "available": status["available"]}  # fmt: skip
        promoted = [f for f in families if outcomes.get(f) and outcomes[f].n_passed > 0]
        ctx.progress.stage(
            "memory",
            memory_line(
                recalled, promoted=promoted, demoted=demoted, stored=stored, reason=memory.reason
            ),
        )
        return recollections_json(
            recalled, query=query, outcomes=outcomes, notes=notes, status=status
        )
    except Exception as exc:  # memory is an aid: it must never cost the research
        reason = f"memory step failed: {type(exc).__name__}: {exc}"
        ctx.progress.stage("memory", reason)
        return {"memory": {"available": False, "reason": reason}, "query": {}, "recalled": [],
                "family_outcomes": {}, "adjustments": []}  # fmt: skip


def add_research(g: StateGraph) -> None:
    """The research half's nodes and inner edges: data extractor -> 15 subagents (Send,
    in parallel) -> 3 domain synthesizers -> leader. The caller wires in and out."""
    g.add_node(DATA_EXTRACTOR, data_extractor)
    g.add_node(SUBAGENT, research_subagent)
    for domain, node in SYNTH.items():
        g.add_node(node, make_synthesizer(domain))
    g.add_node(LEADER, leader)
    g.add_conditional_edges(DATA_EXTRACTOR, fan_out_subagents, [SUBAGENT, LEADER])
    for node in SYNTH.values():
        g.add_edge(SUBAGENT, node)
        g.add_edge(node, LEADER)


def build_research_graph(checkpointer=None):
    """The research half on its own (START -> research -> END), the same wiring as the
    develop graph's. Used by ``python -m swarm.research`` and the benchmark."""
    g = StateGraph(DevelopState)
    add_research(g)
    g.add_edge(START, DATA_EXTRACTOR)
    g.add_edge(LEADER, END)
    return g.compile(checkpointer=checkpointer)
