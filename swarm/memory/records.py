"""What a memory record is: its models, its metadata, and the text each kind is stored as.

Every record carries metadata: ``kind`` (finding, fact_sheet, research, strategy, lesson),
``run_id``, ``iteration``, ``symbols`` plus one ``sym_<SYMBOL>`` flag per symbol, ``family``
plus ``fam_<family>`` flags, ``regime``, ``outcome`` (passed / failed) and the run's scope
(``timeframe``, ``sector``), which recall filters on. The builders here are pure: they
return ``(id, text, metadata)`` tuples; ids are deterministic so a replay upserts in place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

KINDS = ("finding", "fact_sheet", "research", "strategy", "lesson")

MetaValue = str | int | float | bool
Record = tuple[str, str, dict[str, MetaValue]]


class Recollection(BaseModel):
    """One record recalled from memory, with why it was judged relevant."""

    id: str
    kind: str
    text: str
    run_id: str | None = None
    iteration: int | None = None
    symbols: list[str] = Field(default_factory=list)
    family: str | None = None
    regime: str | None = None
    outcome: str | None = None  # passed / failed (strategies and gate lessons)
    similarity: float  # 1 - cosine distance of the hashed embeddings
    relevance: float  # similarity + metadata matches: the ranking key
    matched: list[str] = Field(default_factory=list)  # e.g. "symbols AAPL", "style momentum"
    created_at: str | None = None


class FamilyRecord(BaseModel):
    """What memory knows about one strategy family on (some of) the asked symbols."""

    family: str
    n_passed: int = 0
    n_failed: int = 0
    best_score: float | None = None
    symbols: list[str] = Field(default_factory=list)
    runs: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)  # why failures failed, most recent first


def flag(prefix: str, value: str) -> str:
    """The metadata key flagging one symbol / family (Chroma filters on flat keys)."""
    return prefix + re.sub(r"[^A-Za-z0-9_.-]", "_", value)


def _clean_meta(meta: Mapping[str, Any]) -> dict[str, MetaValue]:
    out: dict[str, MetaValue] = {}
    for k, v in meta.items():
        if v is None:
            continue
        if isinstance(v, bool | int | str):
            out[k] = v
        elif isinstance(v, float):
            if math.isfinite(v):
                out[k] = v
        else:
            out[k] = str(v)
    return out


def meta(
    kind: str,
    run_id: str,
    *,
    iteration: int | None = None,
    symbols: Iterable[str] = (),
    family: str | None = None,
    families: Iterable[str] = (),
    regime: str | None = None,
    outcome: str | None = None,
    **extra: Any,
) -> dict[str, MetaValue]:
    """A record's Chroma metadata: scalar fields, plus one boolean flag per symbol and family for
    filtering."""
    syms = sorted({s.upper() for s in symbols})
    fams = list(dict.fromkeys([*([family] if family else []), *families]))
    out: dict[str, Any] = {
        "kind": kind,
        "run_id": run_id,
        "iteration": iteration,
        "symbols": ",".join(syms),
        "family": family,
        "families": ",".join(fams),
        "regime": regime,
        "outcome": outcome,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
    out.update({flag("sym_", s): True for s in syms})
    out.update({flag("fam_", f): True for f in fams})
    return _clean_meta(out)


def dump(obj: Any) -> dict[str, Any]:
    """``obj`` as a plain dict (a pydantic model dumped as JSON; None as empty)."""
    if obj is None:
        return {}
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return dict(obj)


def fmt(x: Any, spec: str = ".3g") -> str:
    """``x`` formatted with ``spec``, or "n/a" when it is not a number."""
    return format(x, spec) if isinstance(x, int | float) else "n/a"


def finding_records(
    run_id: str,
    findings: Sequence[Any],
    *,
    iteration: int | None,
    regime: str | None,
    scope: Mapping[str, Any],
) -> list[Record]:
    """One record per finding (abstentions too: a gap is worth remembering)."""
    recs = []
    for raw in findings:
        f = dump(raw)
        sym, dom, spec = f.get("symbol", "?"), f.get("type", "?"), f.get("specialization", "?")
        body = (
            f"abstained: {f.get('reason')}" if f.get("abstained") else f.get("interpretation", "")
        )
        text = (
            f"{sym} {dom}.{spec} finding as of {f.get('as_of')}: signal "
            f"{fmt(f.get('signal'), '+.2f')} confidence {fmt(f.get('confidence'), '.2f')}; "
            f"{body}"
        )
        rid = f"{run_id}:finding:{iteration or 0}:{sym}:{dom}.{spec}"
        recs.append(
            (
                rid,
                text,
                meta(
                    "finding",
                    run_id,
                    iteration=iteration,
                    symbols=[sym],
                    regime=regime,
                    domain=dom,
                    specialization=spec,
                    signal=f.get("signal"),
                    confidence=f.get("confidence"),
                    abstained=bool(f.get("abstained")),
                    as_of=f.get("as_of"),
                    **scope,
                ),
            )
        )
    return recs


def fact_sheet_records(
    run_id: str,
    sheets: Sequence[Any],
    *,
    symbols: Sequence[str],
    iteration: int | None,
    regime: str | None,
    scope: Mapping[str, Any],
) -> list[Record]:
    """One record per domain fact sheet: its signal, approach, insights and risks on these symbols."""
    recs = []
    for raw in sheets:
        s = dump(raw)
        dom = s.get("domain", "?")
        text = (
            f"{dom} fact sheet on {', '.join(symbols)} ({regime or 'unknown regime'}): "
            f"signal {fmt(s.get('signal'), '+.2f')} confidence "
            f"{fmt(s.get('confidence'), '.2f')}. Approach: {s.get('recommended_approach')}. "
            f"Insights: {' | '.join(s.get('key_insights', [])[:3])}. "
            f"Risks: {' | '.join(s.get('risks', [])[:3]) or 'none noted'}. "
            f"Gaps: {' | '.join(s.get('gaps', [])[:3]) or 'none'}."
        )
        recs.append(
            (
                f"{run_id}:fact_sheet:{iteration or 0}:{dom}",
                text,
                meta(
                    "fact_sheet",
                    run_id,
                    iteration=iteration,
                    symbols=symbols,
                    regime=regime,
                    families=s.get("recommended_families", []),
                    domain=dom,
                    signal=s.get("signal"),
                    confidence=s.get("confidence"),
                    **scope,
                ),
            )
        )
    return recs


def research_record(
    run_id: str,
    synthesis: Any,
    *,
    symbols: Sequence[str],
    iteration: int | None,
    window: str | None,
    scope: Mapping[str, Any],
) -> Record:
    """The leader's conclusion as a lesson-like note a later run can recall."""
    s = dump(synthesis)
    families = list(s.get("recommended_families", []))
    gaps = s.get("gaps", [])
    text = (
        f"Research on {', '.join(symbols)}"
        + (f" over {window}" if window else "")
        + f": regime {s.get('regime')}, final signal {fmt(s.get('signal'), '+.2f')} at "
        f"confidence {fmt(s.get('confidence'), '.2f')} ({s.get('quality')} quality); "
        f"families recommended: {', '.join(families) or 'none'}. "
        f"Gaps: {' | '.join(gaps[:4]) or 'none'}."
    )
    m = meta(
        "research",
        run_id,
        iteration=iteration,
        symbols=symbols,
        families=families,
        regime=s.get("regime"),
        signal=s.get("signal"),
        confidence=s.get("confidence"),
        quality=s.get("quality"),
        window=window,
        **scope,
    )
    return f"{run_id}:research:{iteration or 0}", text, m


def strategy_record(
    run_id: str,
    variant: Any,
    evaluation: Any,
    *,
    symbols: Sequence[str],
    regime: str | None,
    iteration: int | None,
    scope: Mapping[str, Any],
) -> Record:
    """A variant tried (``StrategyVariant`` dump) and its gate evaluation summary."""
    v, e = dump(variant), dump(evaluation)
    spec = v.get("spec") or {}
    family = spec.get("family") or e.get("family")
    metrics = e.get("metrics") or {}
    passed = bool(e.get("passed"))
    missed = [k for k, ok in (e.get("criteria_met") or {}).items() if not ok]
    vetoes = list(e.get("vetoes") or [])
    errors = list(e.get("errors") or [])[:2]
    why = "; ".join(
        ([f"vetoes: {', '.join(vetoes)}"] if vetoes else [])
        + ([f"criteria missed: {', '.join(missed)}"] if missed else [])
        + ([f"errors: {' | '.join(errors)}"] if errors else [])
    )
    params = spec.get("parameters") or {}
    iteration = iteration if iteration is not None else v.get("iteration")
    text = (
        f"Strategy {spec.get('name', v.get('variant_id'))} ({family}; entry "
        f"{spec.get('entry')}, filters {', '.join(spec.get('filters') or []) or 'none'}, "
        f"exits {', '.join(spec.get('exits') or []) or 'none'}; "
        + ", ".join(f"{k}={params[k]}" for k in sorted(params))
        + f") on {', '.join(symbols)} in a {regime or 'unknown'} regime: "
        f"{'PASSED' if passed else 'FAILED'} the gate with score {fmt(e.get('score'), '.2f')}, "
        f"Sharpe {fmt(metrics.get('sharpe'), '.2f')}, max drawdown "
        f"{fmt(metrics.get('max_drawdown_pct'), '.1f')}%, {metrics.get('n_trades', 'n/a')} "
        f"trades, DSR {fmt(e.get('dsr'), '.2f')}" + (f"; {why}" if why else "") + "."
    )
    vid = v.get("variant_id") or e.get("variant_id") or "variant"
    m = meta(
        "strategy",
        run_id,
        iteration=iteration,
        symbols=symbols,
        family=family,
        regime=regime,
        outcome="passed" if passed else "failed",
        variant_id=vid,
        score=e.get("score"),
        sharpe=metrics.get("sharpe"),
        n_trades=metrics.get("n_trades"),
        dsr=e.get("dsr"),
        reason=why or None,
        trial_key=e.get("trial_key"),
        route=v.get("route"),
        **scope,
    )
    return f"{run_id}:strategy:{vid}", text, m


def lesson_record(
    run_id: str,
    iteration: int | None,
    text: str,
    metadata: Mapping[str, Any] | None,
    *,
    symbols: Sequence[str],
    family: str | None,
    regime: str | None,
    outcome: str | None,
    scope: Mapping[str, Any],
) -> Record:
    """A lesson as a record (id, text, metadata), its id ending in a digest of the text so a
    repeated lesson is stored once."""
    extra = {**dict(metadata or {}), **scope}
    for k in ("kind", "run_id", "iteration", "symbols", "family", "regime", "outcome"):
        extra.pop(k, None)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    m = meta(
        "lesson",
        run_id,
        iteration=iteration,
        symbols=symbols,
        family=family,
        regime=regime,
        outcome=outcome,
        **extra,
    )
    return f"{run_id}:lesson:{iteration or 0}:{digest}", text, m


def gate_lesson_text(
    decision: Mapping[str, Any],
    evals: Sequence[Mapping[str, Any]],
    *,
    symbols: Sequence[str],
    regime: str | None,
) -> str:
    """One iteration's outcome in a sentence or four: route, scores per family, best, failure."""
    best = next((e for e in evals if e.get("variant_id") == decision.get("best_variant_id")), None)
    failure = decision.get("failure") or {}
    passed = [e for e in evals if e.get("passed")]
    fam_scores: dict[str, float] = {}
    for e in evals:
        fam = e.get("family") or "?"
        fam_scores[fam] = max(fam_scores.get(fam, -1.0), float(e.get("score") or 0.0))
    parts = [
        f"Iteration {decision.get('iteration')} on {', '.join(symbols)} "
        f"({regime or 'unknown regime'}): the gate routed {decision.get('decision')}: "
        f"{decision.get('reasoning', '')}".rstrip(": "),
        f"{len(passed)} of {len(evals)} variants passed; best score per family: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(fam_scores.items(), key=lambda x: -x[1])),
    ]
    if best:
        m = best.get("metrics") or {}
        parts.append(
            f"best {best.get('variant_id')} ({best.get('family')}) score "
            f"{fmt(best.get('score'), '.2f')}, Sharpe {fmt(m.get('sharpe'), '.2f')}, "
            f"{m.get('n_trades', 'n/a')} trades"
        )
    if failure:
        actions = failure.get("actions") or []
        parts.append(
            f"failure {failure.get('failure_type')}: {failure.get('root_cause')}"
            + (f"; actions: {' | '.join(actions[:3])}" if actions else "")
        )
    return ". ".join(parts) + "."
