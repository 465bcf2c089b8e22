"""The decision pipeline's roles behind the LLM client: same contracts, validated, with fallback.

Each function receives the rules brain's answer (the fallback), asks the model through
:class:`swarm.llm.client.LLMClient` (structured output, replay cache, token budget), checks
the answer — the ticker is the one asked for, every number in its text exists in the evidence
it was handed, prices obey the thesis validator — retries once with the reason, and otherwise
returns the rules answer and logs ``llm_fallback`` with the reasons. Headlines reach prompts
only fenced as untrusted data. Every role's prompt opens with the desk's recalled past reviews
of the symbol (``memory``, ``swarm.analyze.memory_notes``); their numbers count as grounded.

Two behaviours beyond the rules brain's: an analyst's note the model wrote with confidence
under ``SELF_CRITIQUE_BELOW`` (0.40) gets exactly one self-critique pass (``self_critique`` in
the log), and a debate or risk turn of round 2 or later that fails falls back to its own
previous round's case, not to the rules turn (``round_fallback``): a failed rebuttal answers
nothing, so it rebuts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from swarm.analyze import trader as trader_rules
from swarm.analyze.contracts import (
    Action,
    AnalystNote,
    DebateRound,
    DebateTurn,
    DebateVerdict,
    Direction,
    Recalled,
    RiskJudgement,
    RiskRound,
    Side,
    TraderThesis,
)
from swarm.analyze.memory_notes import memory_block, memory_numbers
from swarm.llm.client import LLMClient
from swarm.llm.fence import NOTICE, fence
from swarm.llm.grounding import evidence_mismatches, ungrounded_numbers
from swarm.llm.retry import ask_with_retry
from swarm.llm.schemas import Citation

Log = Callable[[dict[str, Any]], None]
ROLE_ANALYST, ROLE_DEBATER, ROLE_MANAGER = (
    "decision_analyst",
    "decision_debater",
    "decision_manager",
)
ROLE_TRADER, ROLE_TRADER_DEEP = "decision_trader", "decision_trader_deep"
ROLE_RISK, ROLE_JUDGE, ROLE_REVIEWER = "decision_risk", "decision_judge", "decision_reviewer"
MAX_EVIDENCE_KEYS = 40  # what a prompt carries of an analyst's evidence
SELF_CRITIQUE_BELOW = 0.40  # a model's note less sure than this gets one self-critique pass


# --------------------------------------------------------------------------- schemas


class LLMNote(BaseModel):
    """An analyst's note on one ticker, citing only the evidence given."""

    ticker: str = Field(description="the ticker you were asked about", max_length=16)
    stance: float = Field(description="-1 bearish .. +1 bullish", ge=-1, le=1)
    confidence: float = Field(description="0 .. 1", ge=0, le=1)
    summary: str = Field(description="one sentence; numbers only from the evidence", max_length=300)
    key_points: list[str] = Field(
        description="up to 4 points; numbers only from the evidence", max_length=4
    )
    cited: list[Citation] = Field(description="evidence values the note rests on", max_length=8)


class LLMTurn(BaseModel):
    """One debate or risk-team turn."""

    ticker: str = Field(max_length=16)
    argument: str = Field(
        description="your case in 1-3 sentences; numbers only from the facts", max_length=600
    )
    favours: Literal["BUY", "HOLD", "SELL"] | None = Field(
        None, description="risk analysts only: the action you favour"
    )


class LLMVerdict(BaseModel):
    """The research manager's judgement of the debate."""

    ticker: str = Field(max_length=16)
    winner: Literal["bull", "bear", "none"]
    rationale: str = Field(description="why; numbers only from the facts", max_length=600)
    key_disagreements: list[str] = Field(max_length=4)
    falsifiers: list[str] = Field(description="what would prove the winner wrong", max_length=4)
    conviction: float = Field(description="0 .. 1", ge=0, le=1)


class LLMThesis(BaseModel):
    """The trader's prices for the direction the debate chose. No size: risk sizes."""

    ticker: str = Field(max_length=16)
    stop: float = Field(description="stop price, on the losing side of the entry")
    target: float = Field(description="target price, on the winning side of the entry")
    rationale: str = Field(
        description="one or two sentences; numbers only from the facts", max_length=400
    )


class LLMJudgement(BaseModel):
    ticker: str = Field(max_length=16)
    action: Literal["BUY", "HOLD", "SELL"]
    rationale: str = Field(description="why; numbers only from the facts", max_length=500)


class LLMCritique(BaseModel):
    critique: str = Field(
        description="what the decision got right or wrong; numbers only from the facts",
        max_length=600,
    )
    lessons: list[str] = Field(
        description="up to 3 lessons for the next decision on this ticker", max_length=3
    )


# --------------------------------------------------------------------------- helpers


def _facts(evidence: Mapping[str, float]) -> str:
    return json.dumps(
        {k: round(float(v), 6) for k, v in list(evidence.items())[:MAX_EVIDENCE_KEYS]},
        sort_keys=True,
    )


def _grounded(texts: Sequence[str], evidence: Mapping[str, float]) -> str | None:
    invented = [x for t in texts for x in ungrounded_numbers(t, evidence)]
    return f"numbers not in the facts: {invented[:3]}" if invented else None


def _recall(memory: Sequence[Recalled]) -> tuple[str, dict[str, float]]:
    """(prompt prefix, numbers a grounded answer may quote) of the recalled reviews."""
    return memory_block(memory), memory_numbers(memory)


def _ticker_ok(answered: str, ticker: str) -> str | None:
    if answered.strip().upper() != ticker.upper():
        return f"wrong ticker: answered about {answered!r}, asked about {ticker}"
    return None


def _ask(client: LLMClient, role: str, messages, schema, check, *, log: Log, what: str):
    value, reasons = ask_with_retry(client, role, messages, schema, check)
    if value is None:
        log({"kind": "llm_fallback", "role": role, "what": what, "reasons": reasons})
    else:
        log({"kind": "llm_accepted", "role": role, "what": what})
    return value


def _model(client: LLMClient, role: str) -> str:
    return client.settings.model_for(role)


def notes_evidence(notes: Sequence[AnalystNote]) -> dict[str, float]:
    """Every note's evidence plus each analyst's stance and confidence: the numbers a later role may
    cite."""
    ev: dict[str, float] = {}
    for n in notes:
        ev.update(n.evidence)
        ev[f"{n.role.value}_stance"] = n.stance
        ev[f"{n.role.value}_confidence"] = n.confidence
    return ev


def _notes_text(notes: Sequence[AnalystNote]) -> str:
    return "\n".join(
        f"- {n.role.value}: "
        + (
            f"abstained ({n.reason})"
            if n.abstained
            else f"stance {n.stance:+.2f}, confidence {n.confidence:.2f}; {n.summary}"
        )
        for n in notes
    )


# --------------------------------------------------------------------------- analysts


def llm_note(
    client: LLMClient,
    rules: AnalystNote,
    *,
    untrusted: Sequence[str] = (),
    log: Log,
    memory: Sequence[Recalled] = (),
) -> AnalystNote:
    """The model's note for an analyst, checked against the evidence (the rules note when it fails);
    an unsure note gets one self-critique."""
    evidence = dict(rules.evidence)
    past, recalled_numbers = _recall(memory)
    messages = _note_messages(rules, evidence, past, untrusted)
    check = _note_check(client, rules, evidence, evidence | recalled_numbers)

    note = _ask(
        client, ROLE_ANALYST, messages, LLMNote, check, log=log, what=f"analyst.{rules.role.value}"
    )
    if note is None:
        return rules
    if note.confidence >= SELF_CRITIQUE_BELOW:
        return note
    return _self_critique(client, rules, messages, note, check, log=log)


def _note_messages(rules: AnalystNote, evidence: dict, past: str, untrusted: Sequence[str]) -> list:
    """The analyst's prompt: its role and the rules, then the evidence and fenced untrusted text."""
    return [
        (
            "system",
            f"You are the {rules.role.value} analyst of a trading desk. Read the evidence "
            "and write a note. Use only the evidence given; cite keys and values exactly. "
            + NOTICE,
        ),
        (
            "human",
            f"{past}Ticker: {rules.ticker}. Date: {rules.as_of}. Evidence: {_facts(evidence)}"
            + (f"\n{fence(list(untrusted))}" if untrusted else ""),
        ),
    ]


def _note_check(client: LLMClient, rules: AnalystNote, evidence: dict, known: dict):
    """The analyst answer's check: right ticker, evidence cited exactly, text grounded in
    ``known`` (evidence and recalled numbers)."""

    def check(ans: LLMNote):
        cited = {c.key: c.value for c in ans.cited}
        problem = (
            _ticker_ok(ans.ticker, rules.ticker)
            or ("no evidence cited" if not cited else None)
            or ("; ".join(evidence_mismatches(cited, evidence)[:3]) or None)
            or _grounded([ans.summary, *ans.key_points], known)
        )
        if problem:
            return None, problem
        return rules.model_copy(
            update={
                "stance": ans.stance,
                "confidence": min(ans.confidence, 0.9),
                "summary": ans.summary,
                "key_points": list(ans.key_points),
                "model_used": _model(client, ROLE_ANALYST),
            }
        ), None

    return check


def _self_critique(
    client: LLMClient, rules: AnalystNote, messages: list, note: AnalystNote, check, *, log: Log
) -> AnalystNote:
    """One critique pass on an unsure note: the revised note, or the first when the revision
    fails its check (logged either way)."""
    # One pass, never a loop: a note still unsure after its critique is an honest answer.
    critique = [
        messages[0],
        (
            "human",
            f"{messages[1][1]}\nYour note: stance {note.stance:+.2f}, confidence "
            f"{note.confidence:.2f}. {note.summary}\nYour confidence is under "
            f"{SELF_CRITIQUE_BELOW:.2f}. Critique your note once against the evidence "
            "(what is weak, what you missed) and answer the revised note; it may stay "
            "unsure.",
        ),
    ]
    revised = _ask(
        client,
        ROLE_ANALYST,
        critique,
        LLMNote,
        check,
        log=log,
        what=f"analyst.{rules.role.value}.self_critique",
    )
    log(
        {
            "kind": "self_critique",
            "role": rules.role.value,
            "before": note.confidence,
            "after": revised.confidence if revised is not None else note.confidence,
            "kept_first": revised is None,
        }
    )
    return revised or note


# --------------------------------------------------------------------------- debate


def llm_debate(
    client: LLMClient,
    rounds: list[DebateRound],
    *,
    notes: Sequence[AnalystNote],
    ticker: str,
    log: Log,
    memory: Sequence[Recalled] = (),
) -> list[DebateRound]:
    """The model's debate turns, each checked against the notes' evidence; a turn that fails keeps
    the rules turn."""
    evidence = notes_evidence(notes)
    transcript: list[str] = []
    out = []
    for rnd in rounds:
        turns = {}
        for rules in (rnd.bull, rnd.bear):
            last = out[-1] if out else None
            before = None if last is None else last.bull if rules.side == Side.BULL else last.bear
            turn = _turn(client, rules, evidence, notes, transcript, ticker, log, memory)
            if turn is None:
                turn = rules if before is None else restated(before, rules.round)
                if before is not None:
                    log(
                        {
                            "kind": "round_fallback",
                            "what": f"{rules.side.value}.round{rules.round}",
                            "to": f"round{before.round}",
                        }
                    )
            turns[rules.side] = turn
            transcript.append(f"{rules.side.value} (round {rnd.round}): {turn.argument}")
        out.append(DebateRound(round=rnd.round, bull=turns[Side.BULL], bear=turns[Side.BEAR]))
    return out


def restated(previous: DebateTurn, rnd: int) -> DebateTurn:
    """A failed rebuttal: the side restates its previous round's case and answers nothing,
    so no point falls for it (seed 002's bounded rounds)."""
    return previous.model_copy(update={"round": rnd, "answered": None, "rebutted": False})


def _turn(
    client,
    rules: DebateTurn,
    evidence,
    notes,
    transcript,
    ticker,
    log,
    memory: Sequence[Recalled] = (),
) -> DebateTurn | None:
    past, recalled_numbers = _recall(memory)
    task = (
        "Build your case from the strongest evidence on your side."
        if rules.round == 1
        else "Answer the other side's strongest point, then restate your case."
    )
    messages = [
        (
            "system",
            f"You are the {rules.side.value} researcher in a debate about {ticker}. {task} "
            "Numbers only from the facts.",
        ),
        (
            "human",
            f"{past}Ticker: {ticker}. Analysts:\n{_notes_text(notes)}\nFacts: {_facts(evidence)}\n"
            f"Debate so far:\n" + ("\n".join(transcript) or "(you open)"),
        ),
    ]

    def check(ans: LLMTurn):
        problem = _ticker_ok(ans.ticker, ticker) or _grounded(
            [ans.argument], evidence | recalled_numbers
        )
        if problem:
            return None, problem
        return rules.model_copy(
            update={"argument": ans.argument, "model_used": _model(client, ROLE_DEBATER)}
        ), None

    return _ask(
        client,
        ROLE_DEBATER,
        messages,
        LLMTurn,
        check,
        log=log,
        what=f"{rules.side.value}.round{rules.round}",
    )


def llm_verdict(
    client: LLMClient,
    rules: DebateVerdict,
    *,
    notes: Sequence[AnalystNote],
    rounds: Sequence[DebateRound],
    ticker: str,
    log: Log,
    memory: Sequence[Recalled] = (),
) -> DebateVerdict:
    """The model judges; code then recalibrates its conviction (see the manager node)."""
    evidence = notes_evidence(notes)
    past, recalled_numbers = _recall(memory)
    debate = "\n".join(
        f"round {r.round}: bull: {r.bull.argument}\nbear: {r.bear.argument}" for r in rounds
    )
    messages = [
        (
            "system",
            "You are the research manager. Judge the bull/bear debate: a winner (or none), "
            "the key disagreements, what would falsify the winner, and a conviction 0..1. "
            "Numbers only from the facts.",
        ),
        (
            "human",
            f"{past}Ticker: {ticker}. Analysts:\n{_notes_text(notes)}\nFacts: {_facts(evidence)}\n"
            f"Debate:\n{debate}",
        ),
    ]
    allowed = evidence | recalled_numbers

    def check(ans: LLMVerdict):
        problem = _ticker_ok(ans.ticker, ticker) or _grounded(
            [ans.rationale, *ans.key_disagreements, *ans.falsifiers], allowed
        )
        if problem:
            return None, problem
        winner = Side(ans.winner)
        return rules.model_copy(
            update={
                "winner": winner,
                "rationale": ans.rationale,
                "key_disagreements": list(ans.key_disagreements),
                "falsifiers": list(ans.falsifiers),
                "conviction_proposed": 0.0 if winner == Side.NONE else ans.conviction,
                "model_used": _model(client, ROLE_MANAGER),
            }
        ), None

    return (
        _ask(client, ROLE_MANAGER, messages, LLMVerdict, check, log=log, what="research_manager")
        or rules
    )


# --------------------------------------------------------------------------- trader


def llm_thesis(
    client: LLMClient,
    rules: TraderThesis,
    *,
    verdict: DebateVerdict,
    cfg,
    deep: bool,
    ticker: str,
    log: Log,
    memory: Sequence[Recalled] = (),
) -> TraderThesis:
    """The model's rationale for the debate's direction. Its stop and target are overwritten
    by the ATR anchors (kept only when the ATR is sub-tick, logged either way), then the
    validator must pass. At conviction >= cfg.deep_conviction the deep tier answers."""
    role = ROLE_TRADER_DEEP if deep else ROLE_TRADER
    facts = {
        "entry": rules.entry,
        f"ATR_{rules.atr_period}": rules.atr,
        "conviction": verdict.conviction,
        "rules_stop": rules.stop,
        "rules_target": rules.target,
    }
    past, recalled_numbers = _recall(memory)
    messages = _trader_messages(rules, cfg, verdict, ticker=ticker, facts=facts, past=past)
    anchorings: list[trader_rules.Anchoring] = []
    check = _thesis_check(client, role, rules, cfg, ticker, facts | recalled_numbers, anchorings)

    thesis = _ask(client, role, messages, LLMThesis, check, log=log, what="trader")
    if thesis is None:
        return rules
    how = anchorings[-1]
    if how.kept_proposal or how.changed:
        log(how.event())
    return thesis


def _trader_messages(
    rules: TraderThesis, cfg, verdict: DebateVerdict, *, ticker: str, facts: dict, past: str
) -> list:
    """The trader's prompt: the debate's direction and the code's ATR anchors, then the facts."""
    return [
        (
            "system",
            f"You are the trader. The debate chose {rules.direction.value}. Entry is the "
            f"close; code sets the stop {cfg.stop_atr:g} ATR away on the losing side and the "
            f"target at {cfg.reward_risk:g}R (rules_stop, rules_target). Explain the trade; "
            "propose a stop and target only for when the ATR is below one tick. "
            "Do not size the position.",
        ),
        (
            "human",
            f"{past}Ticker: {ticker}. Facts: {json.dumps(facts, sort_keys=True)}. "
            f"Manager: {verdict.rationale}",
        ),
    ]


def _thesis_check(
    client: LLMClient,
    role: str,
    rules: TraderThesis,
    cfg,
    ticker: str,
    known: dict,
    anchorings: list,
):
    """The trader answer's check: right ticker, levels anchored to the ATR, validator passed,
    rationale grounded in ``known`` (facts and recalled numbers); appends each anchoring."""

    def check(ans: LLMThesis):
        problem = _ticker_ok(ans.ticker, ticker)
        if problem:
            return None, problem
        proposed = rules.model_copy(
            update={
                "stop": ans.stop,
                "target": ans.target,
                "rationale": ans.rationale,
                "model_used": _model(client, role),
            }
        )
        anchored, how = trader_rules.anchor(proposed, close=rules.entry, cfg=cfg)
        thesis = trader_rules.validate(anchored, max_stop_atr=cfg.max_stop_atr)
        if not thesis.valid:
            return None, "thesis validator: " + "; ".join(
                c.detail for c in thesis.validator if not c.ok
            )
        grounded = _grounded([ans.rationale], known | {"stop": ans.stop, "target": ans.target})
        if grounded:
            return None, grounded
        anchorings.append(how)
        if how.changed:  # the rationale may quote the model's own levels: say which stand
            thesis = thesis.model_copy(
                update={
                    "rationale": (
                        f"{ans.rationale} [code anchored the levels: stop {how.stop:.2f}, target "
                        f"{how.target:.2f}; the model proposed {how.proposed_stop:.2f} / "
                        f"{how.proposed_target:.2f}]"
                    )
                }
            )
        return thesis, None

    return check


# --------------------------------------------------------------------------- risk


def _thesis_facts(thesis: TraderThesis, verdict: DebateVerdict) -> dict[str, float]:
    return {
        "entry": thesis.entry,
        "stop": thesis.stop,
        "target": thesis.target,
        "atr": thesis.atr,
        "risk_per_share": thesis.risk_per_share,
        "conviction": verdict.conviction,
        "opposition": verdict.opposition,
        "horizon_days": float(thesis.horizon_days),
    }


def llm_risk_team(
    client: LLMClient,
    rounds: list[RiskRound],
    *,
    thesis: TraderThesis,
    verdict: DebateVerdict,
    ticker: str,
    log: Log,
    memory: Sequence[Recalled] = (),
) -> list[RiskRound]:
    """The model's risk-team turns, each grounded in the thesis's facts; a turn that fails keeps the
    rules turn."""
    facts = _thesis_facts(thesis, verdict)
    past, recalled_numbers = _recall(memory)
    transcript: list[str] = []
    out = []
    for rnd in rounds:
        turns = []
        for rules in rnd.turns:
            messages = [
                (
                    "system",
                    f"You are the {rules.stance.value} risk analyst. Discuss the trader's "
                    "proposal and say which action you favour. Numbers only from the facts.",
                ),
                (
                    "human",
                    f"{past}Ticker: {ticker}. Proposal: {thesis.direction.value}. Facts: "
                    f"{json.dumps(facts, sort_keys=True)}\nDiscussion so far:\n"
                    + ("\n".join(transcript) or "(you open)"),
                ),
            ]

            def check(ans: LLMTurn, rules=rules):
                problem = _ticker_ok(ans.ticker, ticker) or _grounded(
                    [ans.argument], facts | recalled_numbers
                )
                if problem:
                    return None, problem
                favours = Action(ans.favours) if ans.favours else rules.favours
                return rules.model_copy(
                    update={
                        "argument": ans.argument,
                        "favours": favours,
                        "model_used": _model(client, ROLE_RISK),
                    }
                ), None

            turn = _ask(
                client,
                ROLE_RISK,
                messages,
                LLMTurn,
                check,
                log=log,
                what=f"risk.{rules.stance.value}.round{rnd.round}",
            )
            before = (
                next((t for t in out[-1].turns if t.stance == rules.stance), None) if out else None
            )
            if turn is None and before is not None:  # restate the last round's case
                turn = before.model_copy(update={"round": rnd.round})
                log(
                    {
                        "kind": "round_fallback",
                        "what": f"risk.{rules.stance.value}.round{rnd.round}",
                        "to": f"round{before.round}",
                    }
                )
            turn = turn or rules
            transcript.append(f"{turn.stance.value}: {turn.argument}")
            turns.append(turn)
        out.append(RiskRound(round=rnd.round, turns=turns))
    return out


def llm_judgement(
    client: LLMClient,
    rules: RiskJudgement,
    *,
    thesis: TraderThesis,
    verdict: DebateVerdict,
    rounds: Sequence[RiskRound],
    floor: float,
    ticker: str,
    log: Log,
    memory: Sequence[Recalled] = (),
) -> RiskJudgement:
    """The judge may act in the thesis's direction or hold, nothing else."""
    facts = _thesis_facts(thesis, verdict) | {"conviction_floor": floor}
    past, recalled_numbers = _recall(memory)
    allowed_actions = {Action.HOLD}
    if thesis.valid and thesis.direction != Direction.FLAT:
        allowed_actions.add(Action.BUY if thesis.direction == Direction.LONG else Action.SELL)
    talk = "\n".join(
        f"{t.stance.value}: {t.argument} (favours {t.favours.value})"
        for r in rounds
        for t in r.turns
    )
    messages = [
        (
            "system",
            "You are the risk judge. Decide BUY, HOLD or SELL for the proposal, with the "
            "rationale. You may only act in the proposal's direction or hold. Numbers only "
            "from the facts.",
        ),
        (
            "human",
            f"{past}Ticker: {ticker}. Proposal: {thesis.direction.value} (valid: {thesis.valid}). "
            f"Facts: {json.dumps(facts, sort_keys=True)}\nRisk team:\n{talk}",
        ),
    ]

    def check(ans: LLMJudgement):
        action = Action(ans.action)
        problem = (
            _ticker_ok(ans.ticker, ticker)
            or (
                None
                if action in allowed_actions
                else f"{action.value} is not allowed; choose one of "
                f"{', '.join(sorted(a.value for a in allowed_actions))}"
            )
            or _grounded([ans.rationale], facts | recalled_numbers)
        )
        if problem:
            return None, problem
        return RiskJudgement(
            action=action, rationale=ans.rationale, model_used=_model(client, ROLE_JUDGE)
        ), None

    return (
        _ask(client, ROLE_JUDGE, messages, LLMJudgement, check, log=log, what="risk_judge") or rules
    )


# --------------------------------------------------------------------------- reviewer


def llm_critique(
    client: LLMClient,
    *,
    critique: str,
    lessons: list[str],
    facts: Mapping[str, float],
    summary: str,
    log: Log,
) -> tuple[str, list[str], str | None]:
    """(critique, lessons, model) from the model; the outcome itself is never the model's."""
    messages = [
        (
            "system",
            "You are the reviewer. The outcome is already classified from prices; write "
            "only the critique and up to 3 lessons. Numbers only from the facts.",
        ),
        (
            "human",
            f"Decision and outcome: {summary}\nFacts: {json.dumps(dict(facts), sort_keys=True)}",
        ),
    ]

    def check(ans: LLMCritique):
        problem = _grounded([ans.critique, *ans.lessons], facts)
        return (None, problem) if problem else ((ans.critique, list(ans.lessons)), None)

    got = _ask(client, ROLE_REVIEWER, messages, LLMCritique, check, log=log, what="reviewer")
    if got is None:
        return critique, lessons, None
    return got[0], got[1], _model(client, ROLE_REVIEWER)
