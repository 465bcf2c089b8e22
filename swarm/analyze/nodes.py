"""The analysis graph's state and nodes. Each node runs one role's rules brain and, with an
LLM configured, asks the model for the same role through ``swarm.analyze.llm_roles``
(validated, falling back to the rules answer, logged in ``llm_events``). The recalled past
reviews (``AnalysisInputs.recalled``) reach every LLM role's prompt and the rules manager's
conviction (``swarm.analyze.memory_notes``)."""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langgraph.runtime import Runtime
from langgraph.types import Send

from swarm.analyze import debate as debate_rules
from swarm.analyze import memory_notes
from swarm.analyze import risk as risk_rules
from swarm.analyze import trader as trader_rules
from swarm.analyze.analysts import RULES_ANALYSTS, AnalystBrain, quorum
from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    Debate,
    DebateRound,
    DebateVerdict,
    Decision,
    Quorum,
    Recalled,
    Risk,
    RiskEngineResult,
    RiskJudgement,
    RiskRound,
    Side,
    Status,
    TraderThesis,
)
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle
from swarm.research.news import headlines_for

ANALYST_NODE = "analyst"


@dataclass
class Brain:
    """Which brain thinks: the rules (``llm`` None) or an LLM client behind the same roles."""

    llm: Any = None  # swarm.llm.client.LLMClient, or a swarm.llm.masked.MaskedClient over one
    known: Any = None  # swarm.llm.mask.KnownEntities to scrub (default: the built-in names)
    masking: dict[str, Any] | None = None  # the policy a masked or unmasked LLM brain runs under

    @property
    def name(self) -> str:
        """The brain's name for the record: "rules", or the LLM's provider and models."""
        if self.llm is None:
            return "rules"
        s = self.llm.settings
        return f"llm:{s.provider}:{s.quick_model}/{s.deep_model}"

    @property
    def cache_name(self) -> str:
        """The name decisions are cached under: a masked and an unmasked LLM run never share."""
        if self.llm is None:
            return self.name
        s = self.llm.settings
        return f"{self.name}|mask={s.mask}|cutoff={s.cutoff or 'documented'}"


@dataclass
class AnalysisInputs:
    """The graph's run context: everything the roles may read. Nothing after ``bundle.as_of``."""

    ticker: str
    bundle: FeatureBundle
    rctx: ResearchContext
    config: AnalysisConfig
    brain: Brain = field(default_factory=Brain)
    recalled: list[Recalled] = field(default_factory=list)
    analysts: Mapping[AnalystRole, AnalystBrain] = field(default_factory=lambda: RULES_ANALYSTS)
    data: dict[str, str | int] = field(default_factory=dict)

    @property
    def evidence(self) -> dict[str, float]:
        """The feature snapshot at the decision date: the analysts' evidence."""
        return self.bundle.snapshot(self.bundle.keys)

    def headlines(self, days: int) -> list[str]:
        """Headlines about the ticker in the ``days`` before the date (never after it)."""
        as_of = dt.date.fromisoformat(self.bundle.as_of)
        items = headlines_for(
            self.rctx.news_items, self.ticker, as_of=as_of, start=as_of - dt.timedelta(days=days)
        )
        return [it.headline for it in items][-20:]


class AnalyzeState(TypedDict, total=False):
    notes: Annotated[list[AnalystNote], operator.add]
    failed: Annotated[list[AnalystRole], operator.add]
    quorum: Quorum
    rounds: list[DebateRound]
    verdict: DebateVerdict
    thesis: TraderThesis
    risk_rounds: list[RiskRound]
    judgement: RiskJudgement
    engine: RiskEngineResult
    llm_events: Annotated[list[dict[str, Any]], operator.add]
    decision: Decision


class AnalystTask(TypedDict):
    role: AnalystRole


def _collector() -> tuple[list[dict[str, Any]], Callable[[dict[str, Any]], None]]:
    events: list[dict[str, Any]] = []
    return events, events.append


def fan_out_analysts(state: AnalyzeState) -> list[Send]:
    """One analyst task per role (the graph's fan-out)."""
    return [Send(ANALYST_NODE, AnalystTask(role=role)) for role in AnalystRole]


def analyst(task: AnalystTask, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """One analyst's note. A crash is a missing note (the quorum counts it), never a crash."""
    ctx, role = runtime.context, task["role"]
    try:
        note = ctx.analysts[role](ctx.bundle, ctx.rctx, ctx.config)
    except Exception as exc:  # recorded: the quorum decides whether the desk can go on
        return {
            "failed": [role],
            "llm_events": [
                {
                    "kind": "analyst_failed",
                    "role": role.value,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            ],
        }
    events, log = _collector()
    if ctx.brain.llm is not None and not note.abstained:
        from swarm.analyze import llm_roles

        days = (
            ctx.config.news_window_days
            if role == AnalystRole.NEWS
            else ctx.config.sentiment_window_days
        )
        untrusted = ctx.headlines(days) if role in (AnalystRole.NEWS, AnalystRole.SENTIMENT) else []
        note = llm_roles.llm_note(
            ctx.brain.llm, note, untrusted=untrusted, log=log, memory=ctx.recalled
        )
    return {"notes": [note], "llm_events": events}


def check_quorum(state: AnalyzeState) -> dict[str, Any]:
    """The quorum of the notes that came back (in role order) and the roles that failed."""
    notes = sorted(state.get("notes", []), key=lambda n: list(AnalystRole).index(n.role))
    return {"quorum": quorum(notes, failed=state.get("failed", []))}


def _notes(state: AnalyzeState) -> list[AnalystNote]:
    return sorted(state.get("notes", []), key=lambda n: list(AnalystRole).index(n.role))


def debate(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """Bull and bear, round by round; with an LLM each turn sees the transcript so far."""
    ctx, notes = runtime.context, _notes(state)
    rounds = debate_rules.debate_rounds(notes, ctx.config.debate_rounds)
    events, log = _collector()
    if ctx.brain.llm is not None:
        from swarm.analyze import llm_roles

        rounds = llm_roles.llm_debate(
            ctx.brain.llm, rounds, notes=notes, ticker=ctx.ticker, log=log, memory=ctx.recalled
        )
    return {"rounds": rounds, "llm_events": events}


def manager(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """The research manager's verdict on the debate; code sets the conviction, tilted by memory and
    opposition."""
    ctx, notes = runtime.context, _notes(state)
    recalled = [memory_notes.note_line(r) for r in ctx.recalled]
    verdict = debate_rules.manage(notes, recalled, state["rounds"])
    events, log = _collector()
    if ctx.brain.llm is not None:
        from swarm.analyze import llm_roles

        verdict = llm_roles.llm_verdict(
            ctx.brain.llm,
            verdict,
            notes=notes,
            rounds=state["rounds"],
            memory=ctx.recalled,
            ticker=ctx.ticker,
            log=log,
        )
    # Code has the last word on conviction, whichever brain proposed it: past calls of the
    # winning side on this symbol tilt it (bounded, 0 with nothing recalled), then opposition.
    tilt, why = memory_notes.memory_tilt(ctx.recalled, verdict.winner)
    proposed = memory_notes.tilted(verdict.conviction_proposed, tilt)
    conviction, opposition = debate_rules.calibrate_conviction(proposed, notes, verdict.winner)
    update: dict[str, Any] = {"conviction": conviction, "opposition": opposition}
    if why:
        update["conviction_proposed"] = proposed
        update["rationale"] = (
            f"{verdict.rationale} Memory tilts the proposed conviction by {tilt:+.2f} "
            f"(past {verdict.winner.value} calls on {ctx.ticker}: {'; '.join(why)})."
        )
    verdict = verdict.model_copy(update=update)
    return {"verdict": verdict, "llm_events": events}


def trader(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """The trader's ATR-anchored thesis in the debate's direction (the LLM's rationale when there is
    one)."""
    ctx, verdict, cfg = runtime.context, state["verdict"], runtime.context.config
    close = ctx.bundle.value("CLOSE")
    atr = ctx.bundle.value(f"ATR_{cfg.atr_period}")
    thesis = trader_rules.propose(
        verdict.winner, close=close, atr=atr, cfg=cfg, conviction=verdict.conviction
    )
    events, log = _collector()
    if ctx.brain.llm is not None and verdict.winner != Side.NONE:
        from swarm.analyze import llm_roles

        thesis = llm_roles.llm_thesis(
            ctx.brain.llm,
            thesis,
            verdict=verdict,
            cfg=cfg,
            deep=verdict.conviction >= cfg.deep_conviction,
            ticker=ctx.ticker,
            log=log,
            memory=ctx.recalled,
        )
    return {"thesis": thesis, "llm_events": events}


def risk_team(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """The risk team's rounds on the thesis, from risk evidence only (no forecast)."""
    ctx = runtime.context
    evidence = risk_rules.risk_evidence(ctx.evidence)  # no forecast: evidence, not risk
    rounds = risk_rules.team(state["thesis"], state["verdict"], evidence, ctx.config)
    events, log = _collector()
    if ctx.brain.llm is not None:
        from swarm.analyze import llm_roles

        rounds = llm_roles.llm_risk_team(
            ctx.brain.llm,
            rounds,
            thesis=state["thesis"],
            verdict=state["verdict"],
            ticker=ctx.ticker,
            log=log,
            memory=ctx.recalled,
        )
    return {"risk_rounds": rounds, "llm_events": events}


def judge(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """The risk judge's call on the thesis after the team's rounds."""
    ctx = runtime.context
    judgement = risk_rules.judge(
        state["thesis"], state["verdict"], state["risk_rounds"], ctx.config
    )
    events, log = _collector()
    if ctx.brain.llm is not None:
        from swarm.analyze import llm_roles

        judgement = llm_roles.llm_judgement(
            ctx.brain.llm,
            judgement,
            thesis=state["thesis"],
            verdict=state["verdict"],
            rounds=state["risk_rounds"],
            floor=ctx.config.conviction_floor,
            ticker=ctx.ticker,
            log=log,
            memory=ctx.recalled,
        )
    return {"judgement": judgement, "llm_events": events}


def risk_engine(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """Deterministic, whatever the brain: runs on a BUY or SELL, never on a HOLD."""
    if state["judgement"].action == Action.HOLD:
        return {"engine": RiskEngineResult()}
    return {"engine": risk_rules.risk_engine(state["thesis"], runtime.context.config)}


def finalize(state: AnalyzeState, runtime: Runtime[AnalysisInputs]) -> dict[str, Any]:
    """The decision: HOLD without quorum, else what the judge and the risk engine settle on,
    with the debate, the thesis and the risk record."""
    ctx, cfg = runtime.context, runtime.context.config
    notes, q = _notes(state), state["quorum"]
    risk = Risk(capital=cfg.capital, risk_pct=cfg.risk_pct)
    common = dict(
        ticker=ctx.ticker,
        date=ctx.bundle.as_of,
        brain=ctx.brain.name,
        analysts=notes,
        quorum=q,
        recalled=ctx.recalled,
        data=ctx.data,
        config=cfg,
        llm_events=state.get("llm_events", []),
    )
    if not q.met:
        reason = (
            f"only {q.notes} of {q.expected} analyst notes (quorum {q.required}); failed: "
            f"{', '.join(r.value for r in q.failed) or 'none'}: no trade"
        )
        return {
            "decision": Decision(
                action=Action.HOLD, status=Status.DEGRADED, reason=reason, risk=risk, **common
            )
        }
    verdict, thesis, judgement = state["verdict"], state["thesis"], state["judgement"]
    engine: RiskEngineResult = state["engine"]
    risk = risk.model_copy(
        update=dict(
            rounds=state["risk_rounds"],
            judge=judgement,
            checks={c.name.value: c.passed for c in engine.checks},
            check_details=engine.checks,
            size=engine.size,
            notional=engine.notional,
            risk_amount=engine.risk_amount,
            approved=engine.approved,
            rejected_by=engine.failed,
        )
    )
    action, status, reason = settle(judgement, engine, thesis)
    debate = Debate(**verdict.model_dump(), rounds=state["rounds"])
    return {
        "decision": Decision(
            action=action,
            status=status,
            reason=reason,
            debate=debate,
            trader=thesis,
            risk=risk,
            **common,
        )
    }


def settle(
    judgement: RiskJudgement, engine: RiskEngineResult, thesis: TraderThesis
) -> tuple[Action, Status, str]:
    """The order (or none) from the judge's action and the engine's checks: pure, so a replay
    that re-sizes a cached decision (``swarm.analyze.replay``) settles it the same way."""
    if judgement.action == Action.HOLD:
        return Action.HOLD, Status.OK, judgement.rationale
    if engine.approved:
        return (
            judgement.action,
            Status.OK,
            (
                f"{judgement.action.value} {engine.size} at {thesis.entry:.2f}, stop "
                f"{thesis.stop:.2f}, target {thesis.target:.2f}: every risk check passed"
            ),
        )
    failed = [c for c in engine.checks if not c.passed]
    return (
        Action.HOLD,
        Status.REJECTED,
        (
            f"the judge said {judgement.action.value}; the risk engine rejected it: "
            + "; ".join(f"{c.name.value} ({c.detail})" for c in failed)
        ),
    )
