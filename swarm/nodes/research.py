"""Research nodes: data extractor, the 15 subagents (fanned out), 3 synthesizers, the leader.

Wiring only: each node reads the state, calls its step in swarm.research and writes the
state, which holds the research's own models (DataBrief, Finding, FactSheet,
ResearchSynthesis). The steps:

- swarm.research.round_start: each round studies something (swarm.research.rounds): the
  first reads the indicators; a RESEARCH round after a failure runs a study the failure
  points to (other horizons, the cross-section, pairs, the regime by year, with
  --allow-universe-expansion related symbols). A round that would repeat an earlier one
  exactly is skipped (the data extractor goes straight to the leader, which keeps the last
  advice).
- swarm.research.specialist: one subagent over every symbol (rules, then the LLM's reading).
- swarm.research.synthesis: one fact sheet per domain.
- swarm.research.leader_round: the synthesis, steered by the fundamental and sentiment views,
  the round's study, this run's gate verdicts and memory (swarm.research.leader_memory).

``add_research`` wires the research half once: the develop graph (swarm.graph) and the
research graph alone (``build_research_graph``, ``python -m swarm.research``) both use it.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from strategies.route import Route
from swarm.edges import DATA_EXTRACTOR, LEADER, SUBAGENT, SYNTH
from swarm.nodes.llm_log import llm_logger
from swarm.research.leader_round import keep_advice, lead_round
from swarm.research.models import Domain, ResearchSynthesis, plan_of
from swarm.research.round_start import start_round
from swarm.research.runtime import ResearchRuntime
from swarm.research.specialist import run_specialist
from swarm.research.subagents import SUBAGENTS
from swarm.research.synthesis import synthesize_domain
from swarm.state import RESET, DevelopState, SubagentTask

SUBAGENT_NODE = SUBAGENT
DATA_EXTRACTOR_NODE = DATA_EXTRACTOR
SYNTH_NODES = SYNTH
LEADER_NODE = LEADER


def data_extractor(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
    """Plan the round's study from the last failure, skip it when it would repeat an earlier
    round exactly, else brief the data and run the study."""
    ctx = runtime.context
    round_ = state.get("research_round", 0) + 1
    last = state.get("synthesis")
    start = start_round(
        ctx,
        research_round=round_,
        failure=state.get("failure") if round_ > 1 else None,
        done=list(state.get("research_studies") or []),
        previous=state.get("data_brief"),
        ranking=[r.symbol for r in last.universe_ranking] if last else [],
    )
    out: dict[str, Any] = {
        "research_round": round_,
        "research_studies": start.studies,
        "data_brief": start.brief,
    }
    if start.skipped:  # the findings and fact sheets of the last round stay: the leader reuses them
        return out
    return {
        **out,
        "symbols": ctx.symbols,
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
    report = run_specialist(runtime.context, payload.subagent_id)
    if report.failed:
        return {"failed_subagents": [payload.subagent_id]}
    return {"findings": report.findings, "llm_events": report.llm_events}


def make_synthesizer(domain: Domain):
    """A graph node that synthesises ``domain``'s findings into its fact sheet."""

    def synthesize(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
        mine = [f for f in state.get("findings", []) if f.type == domain]
        prefix = f"{domain.value}."
        failed = [
            s.removeprefix(prefix)
            for s in state.get("failed_subagents", [])
            if s.startswith(prefix)
        ]
        return {"fact_sheets": [synthesize_domain(domain, mine, failed=failed)]}

    synthesize.__name__ = f"synthesize_{domain.value}"
    return synthesize


def leader(state: DevelopState, runtime: Runtime[ResearchRuntime]) -> dict[str, Any]:
    """LEADER: the research synthesis of the fact sheets (a skipped round keeps the last advice),
    with its studies and memory."""
    ctx = runtime.context
    if _skipped(state):
        synthesis = keep_advice(
            ctx, state["synthesis"], state["research_studies"], state.get("findings", [])
        )
        return {"synthesis": synthesis, **_plan_change(ctx, state, synthesis)}
    llm_log = None
    if getattr(ctx, "llm", None) is not None:
        llm_log = llm_logger(
            ctx,
            iteration=state.get("iteration", 0),
            route=Route.RESEARCH,
            research_round=state.get("research_round", 1),
        )
    synthesis, studies = lead_round(
        ctx,
        sheets=state.get("fact_sheets", []),
        brief=state["data_brief"],
        findings=state.get("findings", []),
        failed=state.get("failed_subagents", []),
        studies=state.get("research_studies") or [],
        feedback=state.get("feedback") or [],
        decisions=state.get("decisions") or [],
        research_round=state.get("research_round", 1),
        llm_events=state.get("llm_events", []),
        llm_log=llm_log,
    )
    out: dict[str, Any] = {"synthesis": synthesis, **_plan_change(ctx, state, synthesis)}
    if studies:
        out["research_studies"] = studies
    return out


def _plan_change(
    ctx: ResearchRuntime, state: DevelopState, synthesis: ResearchSynthesis
) -> dict[str, Any]:
    """Whether this round changed the plan the strategy half reads. A RESEARCH round that
    changed nothing is not charged to the research loops (the router will not choose
    another: ``swarm.research.rounds.research_outlook``)."""
    plan = plan_of(synthesis, state.get("data_brief"))
    previous = state.get("research_plan")
    changed = previous is None or plan != previous
    out: dict[str, Any] = {"research_plan": plan, "research_changed": changed}
    counters = state.get("counters")
    if not changed and counters is not None and counters.research_loops > 0:
        out["counters"] = counters.model_copy(
            update={"research_loops": counters.research_loops - 1}
        )
        ctx.progress.stage(
            "research",
            f"round {state.get('research_round', 1)} left the plan unchanged (families "
            f"{plan.families}, regime {plan.regime.value}): not counted as a research loop",
        )
    return out


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
