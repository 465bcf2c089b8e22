"""LLM brains behind the same interfaces as the rules brains, with validation and fallback.

Each function first has the rules brain's answer (the fallback), asks the model,
validates what comes back — numbers against the evidence, the ticker against the one
asked for, blocks and code against the catalogue and the validator — retries once with
the error, and otherwise returns the rules answer. Every fallback is reported to
``log`` (which writes it to the run's JSONL) with the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from gate.contracts import FailureAnalysis, FailureType
from strategies.blocks import unknown_blocks
from strategies.codegen import render
from strategies.families import reconcile
from strategies.spec import Family, StrategySpec
from strategies.validate import validate_code
from swarm.llm.client import LLMClient
from swarm.llm.fence import NOTICE, assert_no_untrusted, fence
from swarm.llm.grounding import evidence_mismatches, ungrounded_numbers
from swarm.llm.retry import ask_with_retry
from swarm.llm.schemas import LLMFailure, LLMFinding, LLMSpec, LLMStrategyProposals, LLMSummary
from swarm.research.models import Finding, ResearchSynthesis

Log = Callable[[dict[str, Any]], None]


# -- research subagents ---------------------------------------------------------------------


def llm_finding(
    client: LLMClient,
    rules: Finding,
    *,
    description: str,
    untrusted: Sequence[str] = (),
    log: Log,
) -> Finding:
    """An LLM reading of the same evidence the rules brain used; the rules finding otherwise."""
    if rules.abstained or not rules.evidence:
        return rules  # no data: nothing for a model to read, and abstention is the honest answer
    evidence = dict(rules.evidence)
    facts = json.dumps(evidence, sort_keys=True)
    messages = [
        (
            "system",
            f"You are a {rules.type.value} analyst ({rules.specialization}): {description}. "
            "Use only the evidence given; cite keys and values exactly. " + NOTICE,
        ),
        (
            "human",
            f"Symbol: {rules.symbol}. Last bar: {rules.as_of}. Evidence: {facts}"
            + (f"\n{fence(list(untrusted))}" if untrusted else ""),
        ),
    ]

    def check(ans: LLMFinding):
        if ans.symbol.strip().upper() != rules.symbol.upper():
            return None, f"wrong ticker: answered about {ans.symbol!r}, asked about {rules.symbol}"
        cited = {c.key: c.value for c in ans.cited}
        if not cited:
            return None, "no evidence cited"
        bad = evidence_mismatches(cited, evidence)
        if bad:
            return None, "evidence not in the data: " + "; ".join(bad[:3])
        invented = ungrounded_numbers(ans.interpretation, evidence)
        if invented:
            return None, f"numbers not in the evidence: {invented[:3]}"
        return rules.model_copy(
            update={
                "signal": ans.signal,
                "confidence": min(ans.confidence, 0.9),
                "interpretation": ans.interpretation,
                "evidence": {k: evidence[k] for k in cited},
            }
        ), None

    value, reasons = ask_with_retry(client, "research_subagent", messages, LLMFinding, check)
    if value is None:
        log(
            {
                "kind": "llm_fallback",
                "role": "research_subagent",
                "symbol": rules.symbol,
                "subagent": f"{rules.type.value}.{rules.specialization}",
                "reasons": reasons,
            }
        )
        return rules
    return value


# -- strategy development -------------------------------------------------------------------


def _spec_from_llm(item: LLMSpec) -> tuple[StrategySpec | None, str | None, str | None]:
    """(spec, code or None, problem)."""
    family = Family(item.family)
    if item.code:
        report = validate_code(item.code)
        if not report.ok:
            return None, None, "code rejected by validation: " + "; ".join(report.errors[:3])
        sha = hashlib.sha256(item.code.encode()).hexdigest()
        spec = StrategySpec(
            family=family,
            name=f"{family.value}-llm-code-{sha[:8]}",
            approach=item.rationale or "LLM-written code",
            entry="custom",
            source_sha=sha,
        )
        return spec, item.code, None
    unknown = unknown_blocks(item.entry, item.filters, item.exits, item.sizing)
    if unknown:
        return None, None, f"unknown blocks {unknown}"
    spec = reconcile(
        StrategySpec(
            family=family,
            name=f"{family.value}-{item.entry}-llm",
            approach=item.rationale or "LLM proposal",
            entry=item.entry,
            filters=item.filters,
            exits=item.exits,
            sizing=item.sizing,
            parameters={p.name: p.value for p in item.parameters},
        )
    )
    report = validate_code(render(spec))
    if not report.ok:
        return None, None, "rendered code rejected: " + "; ".join(report.errors[:3])
    return spec, None, None


def llm_strategy_specs(
    client: LLMClient,
    *,
    n: int,
    route: str,
    brief: str,
    catalogue: str,
    seen: set[str],
    untrusted: Sequence[str],
    log: Log,
) -> list[tuple[StrategySpec, str | None, str]]:
    """Up to ``n`` validated (spec, custom code or None, why) proposals; the caller fills the rest
    from the rules brain. Third-party text never reaches this prompt."""
    prompt = (
        f"Route: {route}. Propose {n} Backtrader strategies for the situation below, each from the "
        f"block catalogue (entry, filters, exits, sizing, parameters) or as full code.\n"
        f"Situation (computed facts):\n{brief}\nCatalogue:\n{catalogue}"
    )
    assert_no_untrusted(prompt, list(untrusted))
    messages = [
        ("system", "You are a quant developer. Long-only unless told otherwise; no lookahead."),
        ("human", prompt),
    ]
    accepted: list[tuple[StrategySpec, str | None, str]] = []
    rejected: list[str] = []

    def check(ans: LLMStrategyProposals):
        accepted.clear()
        rejected.clear()
        keys = set(seen)
        for item in ans.proposals:
            try:
                spec, code, problem = _spec_from_llm(item)
            except Exception as exc:  # a malformed spec must not stop the loop
                spec, code, problem = None, None, f"{type(exc).__name__}: {exc}"
            if spec is not None and spec.trial_key() in keys:
                spec, problem = None, "an identical trial was already run"
            if spec is None:
                rejected.append(problem or "invalid")
                continue
            keys.add(spec.trial_key())
            accepted.append((spec, code, f"llm: {item.rationale or spec.name}"[:200]))
        if not accepted:
            return None, "no usable proposal: " + "; ".join(rejected[:3])
        return list(accepted[:n]), None

    value, reasons = ask_with_retry(client, "strategy_dev", messages, LLMStrategyProposals, check)
    if rejected or value is None:
        log(
            {
                "kind": "llm_fallback" if value is None else "llm_rejected",
                "role": "strategy_dev",
                "route": route,
                "reasons": reasons + rejected,
            }
        )
    return value or []


# -- failure analysis ----------------------------------------------------------------------


def llm_failure(
    client: LLMClient, rules: FailureAnalysis, *, facts: str, log: Log
) -> FailureAnalysis:
    """The model's failure classification, its numbers grounded in the facts; the rules analysis
    when it fails."""
    messages = [
        (
            "system",
            "You are the failure analyst of a strategy search. Classify why nothing passed.",
        ),
        (
            "human",
            f"Facts: {facts}\nRules-based view: {rules.failure_type.value}: {rules.root_cause}\n"
            f"Evidence: {'; '.join(rules.evidence)}",
        ),
    ]
    allowed_numbers = {
        f"e{i}": v for i, v in enumerate(_numbers(facts + " " + " ".join(rules.evidence)))
    }

    def check(ans: LLMFailure):
        invented = ungrounded_numbers(ans.root_cause, allowed_numbers)
        if invented:
            return None, f"numbers not in the facts: {invented[:3]}"
        return FailureAnalysis(
            failure_type=FailureType(ans.failure_type),
            root_cause=ans.root_cause,
            confidence=ans.confidence,
            evidence=rules.evidence,
            actions=ans.actions,
            hints=rules.hints,  # machine hints stay the rules'
            best_variant_id=rules.best_variant_id,  # and so do the measured failing criteria
            failing=rules.failing,
        ), None

    value, reasons = ask_with_retry(client, "failure_analysis", messages, LLMFailure, check)
    if value is None:
        log({"kind": "llm_fallback", "role": "failure_analysis", "reasons": reasons})
        return rules
    return value


def _numbers(text: str) -> list[float]:
    from swarm.llm.grounding import numbers_in

    return numbers_in(text)


# -- research leader -----------------------------------------------------------------------


def llm_summary(client: LLMClient, synthesis: ResearchSynthesis, *, log: Log) -> ResearchSynthesis:
    """The model's summary of the synthesis, its numbers grounded in the facts; the rules summary
    when it fails."""
    facts = synthesis.model_dump(mode="json", exclude={"summary"})
    text = json.dumps(facts, sort_keys=True, default=str)
    messages = [
        ("system", "You are the research lead. Summarise the desk's findings for a quant."),
        ("human", f"Facts: {text}"),
    ]
    allowed = {f"n{i}": v for i, v in enumerate(_numbers(text))}

    def check(ans: LLMSummary):
        invented = ungrounded_numbers(ans.summary, allowed)
        if invented:
            return None, f"numbers not in the facts: {invented[:3]}"
        return synthesis.model_copy(update={"summary": ans.summary}), None

    value, reasons = ask_with_retry(client, "leader", messages, LLMSummary, check)
    if value is None:
        log({"kind": "llm_fallback", "role": "leader", "reasons": reasons})
        return synthesis
    return value
