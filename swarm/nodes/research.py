"""Research nodes: data extractor, the 15 subagents (fanned out), 3 synthesizers, the leader."""

from __future__ import annotations

import json
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from swarm.context import RunContext
from swarm.research.data_extractor import brief_symbol, build_data_brief, render_data_brief_md
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.models import DataBrief, Domain, FactSheet, Finding
from swarm.research.subagents import SUBAGENTS, ResearchContext, run_subagent
from swarm.research.synthesis import lead, render_research_md, synthesize_domain
from swarm.state import RESET, DevelopState

SUBAGENT_NODE = "research_subagent"


def feature_bundles(ctx: RunContext) -> dict[str, FeatureBundle]:
    """Computed once per run: in-sample bars never change between research rounds."""
    if "features" not in ctx.cache:
        ctx.cache["features"] = {s: compute_features(s, ctx.insample_bars(s)) for s in ctx.symbols}
    return ctx.cache["features"]


def data_extractor(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    round_ = state.get("research_round", 0) + 1
    ctx.progress.stage("research", f"round {round_}: data extractor on {len(ctx.symbols)} symbols")
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
    ctx.run.write_text("research/data_brief.md", render_data_brief_md(brief))
    ctx.run.write_json("research/data_brief.json", brief.model_dump(mode="json"))
    return {
        "research_round": round_,
        "data_brief": brief.model_dump(mode="json"),
        "findings": RESET,
        "failed_subagents": RESET,
        "fact_sheets": RESET,
    }


def fan_out_subagents(state: DevelopState) -> list[Send]:
    return [
        Send(SUBAGENT_NODE, {"subagent_id": spec.id, "research_round": state["research_round"]})
        for spec in SUBAGENTS
    ]


def research_subagent(payload: dict[str, Any], runtime: Runtime[RunContext]) -> dict[str, Any]:
    """One specialist over every symbol. A crash is recorded as a failed subagent, not raised."""
    ctx = runtime.context
    bundles = feature_bundles(ctx)
    rctx = ResearchContext(news_items=ctx.news_items)
    findings: list[dict[str, Any]] = []
    try:
        for symbol in ctx.symbols:
            finding = run_subagent(
                payload["subagent_id"], symbol=symbol, bundle=bundles[symbol], context=rctx
            )
            findings.append(finding.model_dump(mode="json"))
    except Exception as exc:  # a broken specialist degrades the research; it must not kill the run
        ctx.progress.stage("research", f"subagent {payload['subagent_id']} failed: {exc!r}")
        return {"failed_subagents": [payload["subagent_id"]]}
    return {"findings": findings}


def make_synthesizer(domain: Domain):
    def synthesize(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
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


def leader(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    order = {d: i for i, d in enumerate(Domain)}
    sheets = sorted(
        (FactSheet.model_validate(s) for s in state.get("fact_sheets", [])),
        key=lambda s: order[s.domain],
    )
    brief = DataBrief.model_validate(state["data_brief"])
    synthesis = lead(sheets, brief)
    failed = state.get("failed_subagents", [])
    if failed:
        synthesis.gaps.append(f"failed subagents: {', '.join(sorted(failed))}")
    if state.get("feedback"):
        # A RESEARCH round: say what the gate reported, so the research record shows why it reran.
        synthesis.gaps.append(f"gate feedback: {state['feedback'][-1]}")
    findings = [Finding.model_validate(f) for f in state.get("findings", [])]
    findings.sort(key=lambda f: (f.symbol, f.type.value, f.specialization))

    ctx.run.write_json("research/findings.json", [f.model_dump(mode="json") for f in findings])
    ctx.run.write_json("research/fact_sheets.json", [s.model_dump(mode="json") for s in sheets])
    ctx.run.write_json("research/synthesis.json", synthesis.model_dump(mode="json"))
    ctx.run.write_text("research/research.md", render_research_md(synthesis, findings))
    n_abstained = sum(f.abstained for f in findings)
    ctx.progress.stage(
        "research",
        f"leader: regime {synthesis.regime.value}, signal {synthesis.signal:+.2f}, confidence "
        f"{synthesis.confidence:.2f} ({synthesis.quality}); {len(findings)} findings, "
        f"{n_abstained} abstained; families {synthesis.recommended_families}",
    )
    return {"synthesis": json.loads(synthesis.model_dump_json())}
