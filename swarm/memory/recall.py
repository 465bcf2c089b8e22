"""The recall policy: which past records may speak to this run, and how loudly.

Scope before similarity: a record is a candidate only when it was written for the same
timeframe (when the caller names one) and shares a symbol with the run, or its sector.
A style or regime alone never reaches across: a first run on new symbols must not be
steered by unrelated runs that happen to share a word. Candidates are ranked by cosine
similarity plus metadata matches and kept above a relevance floor.

Demotion is the only way memory changes what a run tries, so it needs more than one
bad run (``MIN_DEMOTION_RUNS``) and never pushes every family back at once: that would
say nothing about which family to try first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swarm.memory.records import FamilyRecord, Recollection, flag, fmt

RECALL_KINDS = ("lesson", "strategy", "research")
MIN_RELEVANCE = 0.3  # below: a record that merely passed the scope filter, not one that helps
MIN_DEMOTION_RUNS = 2  # one run's bad luck is not evidence against a family
# Ranking bonuses on top of similarity: what the record shares with the run.
SYMBOL_WEIGHT = 0.3  # times the share of the asked symbols the record covers
SECTOR_WEIGHT = 0.15
STYLE_WEIGHT = 0.2
REGIME_WEIGHT = 0.1
LESSON_WEIGHT = 0.1  # a gate lesson says what happened, not only what was thought


def _or(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$or": conditions}


def _and(conditions: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    conds = [c for c in conditions if c]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else {"$and": conds}


def scope_where(
    symbols: Sequence[str],
    *,
    kinds: Sequence[str],
    timeframe: str | None = None,
    sector: str | None = None,
) -> dict[str, Any] | None:
    """The Chroma filter: these kinds, this timeframe, any shared symbol or the sector.
    None when there is nothing to scope on (then nothing is recalled)."""
    reach = [{flag("sym_", s): True} for s in symbols] + ([{"sector": sector}] if sector else [])
    scope = _or(reach)
    if scope is None:
        return None
    kind_filter = {"kind": {"$in": list(kinds)}} if len(kinds) > 1 else {"kind": kinds[0]}
    return _and([kind_filter, {"timeframe": timeframe} if timeframe else None, scope])


def recall_query(symbols: Sequence[str], styles: Sequence[str], regime: str | None) -> str:
    """The text a recall embeds: the symbols, styles and regime, with the words lessons carry."""
    return (
        f"lessons and strategies tried on {' '.join(symbols)} "
        f"{' '.join(styles)} {regime or ''} regime gate failed passed"
    )


def recollection(
    rid: str,
    doc: str,
    meta: Mapping[str, Any],
    dist: float,
    *,
    symbols: Sequence[str],
    styles: Sequence[str],
    regime: str | None,
    sector: str | None = None,
) -> Recollection:
    """One candidate, scored: similarity plus what it shares with the run."""
    rec_syms = [s for s in str(meta.get("symbols", "")).split(",") if s]
    fams = [f for f in str(meta.get("families", "")).split(",") if f]
    similarity = max(-1.0, min(1.0, 1.0 - float(dist)))
    overlap = sorted(set(rec_syms) & set(symbols))
    style_hit = [f for f in styles if f in fams]
    matched = []
    relevance = similarity
    if overlap:
        matched.append(f"symbols {', '.join(overlap)}")
        relevance += SYMBOL_WEIGHT * len(overlap) / max(1, len(symbols))
    if sector and meta.get("sector") == sector:
        matched.append(f"sector {sector}")
        relevance += SECTOR_WEIGHT
    if style_hit:
        matched.append(f"style {', '.join(style_hit)}")
        relevance += STYLE_WEIGHT
    if regime and meta.get("regime") == regime:
        matched.append(f"regime {regime}")
        relevance += REGIME_WEIGHT
    if meta.get("kind") == "lesson":
        relevance += LESSON_WEIGHT
    it = meta.get("iteration")
    return Recollection(
        id=rid,
        kind=str(meta.get("kind", "?")),
        text=doc or "",
        run_id=meta.get("run_id"),
        iteration=int(it) if isinstance(it, int) else None,
        symbols=rec_syms,
        family=meta.get("family"),
        regime=meta.get("regime"),
        outcome=meta.get("outcome"),
        similarity=round(similarity, 6),
        relevance=round(relevance, 6),
        matched=matched,
        created_at=meta.get("created_at"),
    )


def top_k(candidates: list[Recollection], k: int, min_relevance: float) -> list[Recollection]:
    """The ``k`` most relevant recollections at or above ``min_relevance`` (ties by id)."""
    kept = [r for r in candidates if r.relevance >= min_relevance]
    kept.sort(key=lambda r: (-r.relevance, r.id))
    return kept[:k]


def family_outcomes_of(
    rows: Sequence[Mapping[str, Any]], symbols: Sequence[str], *, exclude_run: str | None
) -> dict[str, FamilyRecord]:
    """Per family, passes and failures among stored strategies and explicit family lessons
    (``rows``: metadata with the document under ``_text``). Gate summary lessons are not
    counted (their strategies already are); ``exclude_run``'s own verdicts neither."""
    rows = sorted(rows, key=lambda m: str(m.get("created_at", "")), reverse=True)
    out: dict[str, FamilyRecord] = {}
    for m in rows:
        fam, outcome = m.get("family"), m.get("outcome")
        if not fam or outcome not in ("passed", "failed"):
            continue
        if m.get("kind") == "lesson" and m.get("source") == "gate":
            continue
        if exclude_run is not None and m.get("run_id") == exclude_run:
            continue
        rec = out.setdefault(fam, FamilyRecord(family=fam))
        score = m.get("score")
        if outcome == "passed":
            rec.n_passed += 1
        else:
            rec.n_failed += 1
            why = m.get("reason") or (m["_text"] if m.get("kind") == "lesson" else None)
            label = f"run {m.get('run_id')} iteration {m.get('iteration', '?')}"
            if isinstance(score, int | float):
                label += f", score {score:.2f}"
                if isinstance(m.get("sharpe"), int | float):
                    label += f", Sharpe {m['sharpe']:.2f}"
            if why:
                label += f": {why}"
            if len(rec.reasons) < 3:
                rec.reasons.append(label)
        if isinstance(score, int | float):
            rec.best_score = max(rec.best_score or score, score)
        rec.symbols = sorted(
            set(rec.symbols) | (set(str(m.get("symbols", "")).split(",")) & set(symbols))
        )
        if m.get("run_id") and m["run_id"] not in rec.runs:
            rec.runs.append(m["run_id"])
    return out


def adjust_families(
    families: Sequence[str],
    outcomes: Mapping[str, FamilyRecord],
    *,
    min_failures: int = 1,
    min_runs: int = MIN_DEMOTION_RUNS,
) -> tuple[list[str], list[str], list[str]]:
    """Reorder recommended families by what memory says happened on these symbols.

    A family with at least one pass moves to the front ("promoted"). One with at least
    ``min_failures`` failures over at least ``min_runs`` earlier runs and no pass moves to
    the back ("demoted", fewest failures first), unless that would demote every family:
    then the order stays and a note says why. Nothing is removed: memory reorders, the
    gate still decides. Returns (families, notes, demoted).
    """
    promoted, neutral, demoted = [], [], []
    notes: list[str] = []
    for fam in families:
        rec = outcomes.get(fam)
        if rec and rec.n_passed > 0:
            promoted.append(fam)
            notes.append(
                f"promoted {fam}: {rec.n_passed} past variant(s) passed the gate on "
                f"{', '.join(rec.symbols)} (best score {fmt(rec.best_score, '.2f')}; "
                f"{rec.n_failed} failed)"
            )
        elif rec and rec.n_failed >= min_failures and len(rec.runs) >= min_runs:
            demoted.append(fam)
        else:
            neutral.append(fam)
    if demoted and len(demoted) == len(families):
        notes.append(
            f"no demotion: every family ({', '.join(demoted)}) failed before on these symbols, "
            "so memory cannot say which to try first"
        )
        return list(families), notes, []
    why_unknown = "no reason recorded"
    for fam in demoted:
        rec = outcomes[fam]
        notes.append(
            f"demoted {fam}: {rec.n_failed} past variant(s) failed the gate on "
            f"{', '.join(rec.symbols)} over {len(rec.runs)} runs and none passed (runs "
            f"{', '.join(rec.runs[:3])}); e.g. {rec.reasons[0] if rec.reasons else why_unknown}"
        )
    demoted.sort(key=lambda f: outcomes[f].n_failed)  # stable: fewest failures first
    return promoted + neutral + demoted, notes, demoted
