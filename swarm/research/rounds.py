"""Which study a research round runs, chosen from the gate's failure analysis.

The first round reads the indicators (the baseline). A RESEARCH round after a failure
studies something the earlier rounds did not: the failure's hints name the studies that
could explain it, in order (``HINT_STUDIES``), then the rest in ``DEFAULT_ORDER``; the first
one that applies to this universe and has not been run on it is chosen. A study is the same
as an earlier one when its signature (kind, parameters, universe, in-sample window) is: when
every applicable study has been run, the round would repeat the last one exactly, so it is
skipped and the reason recorded. Pure functions; ``swarm.nodes.research`` applies them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from gate.contracts import FailureAnalysis, Hint
from gate.routing import ResearchOutlook


class StudyKind(StrEnum):
    BASELINE = "baseline"  # the 15 subagents' indicator reading (every round)
    HORIZONS = "horizons"  # other horizons of the indicators
    CROSS_SECTION = "cross_section"  # dispersion and rank persistence across symbols
    PAIRS = "pairs"  # correlation and cointegration of pairs
    SUBPERIODS = "subperiods"  # the regime by year
    UNIVERSE = "universe_expansion"  # related symbols from the data folder (opt-in)


# What each failure hint could be explained by, most likely first.
HINT_STUDIES: dict[Hint, tuple[StudyKind, ...]] = {
    Hint.ZERO_TRADES: (StudyKind.HORIZONS,),
    Hint.TOO_FEW_TRADES: (StudyKind.HORIZONS,),
    Hint.COST_DRAG: (StudyKind.HORIZONS,),
    Hint.NEAR_THRESHOLD: (StudyKind.HORIZONS,),
    Hint.FOLD_COLLAPSE: (StudyKind.SUBPERIODS, StudyKind.HORIZONS),
    Hint.REGIME_MISMATCH: (StudyKind.SUBPERIODS,),
    Hint.DEEP_DRAWDOWN: (StudyKind.SUBPERIODS,),
    Hint.MARKET_EXPOSURE: (StudyKind.CROSS_SECTION, StudyKind.PAIRS),
    Hint.LOW_ALPHA: (StudyKind.CROSS_SECTION, StudyKind.PAIRS, StudyKind.HORIZONS),
    Hint.REALITY_CHECK: (StudyKind.CROSS_SECTION, StudyKind.PAIRS),
    Hint.NO_EDGE: (StudyKind.HORIZONS, StudyKind.CROSS_SECTION, StudyKind.UNIVERSE),
    Hint.LOW_DSR: (StudyKind.UNIVERSE, StudyKind.HORIZONS),
    Hint.FAR_FROM_THRESHOLDS: (StudyKind.CROSS_SECTION, StudyKind.PAIRS, StudyKind.UNIVERSE),
    # A weak premise: first whether it contradicts the regime year by year, then more names
    # to read (when the user allows it), then other horizons.
    Hint.LOW_RESEARCH_CONFIDENCE: (
        StudyKind.SUBPERIODS,
        StudyKind.UNIVERSE,
        StudyKind.HORIZONS,
        StudyKind.CROSS_SECTION,
    ),
}
DEFAULT_ORDER: tuple[StudyKind, ...] = (
    StudyKind.HORIZONS,
    StudyKind.SUBPERIODS,
    StudyKind.CROSS_SECTION,
    StudyKind.PAIRS,
    StudyKind.UNIVERSE,
)
MIN_SYMBOLS = {StudyKind.CROSS_SECTION: 3, StudyKind.PAIRS: 2}
# Hints saying the signal's horizon is too slow / too fast: which horizons to look at.
_SHORTER = {Hint.ZERO_TRADES, Hint.TOO_FEW_TRADES}
_LONGER = {Hint.COST_DRAG, Hint.FOLD_COLLAPSE}
INDEX_ETFS: tuple[str, ...] = ("SPY", "QQQ", "IWM", "DIA")
MAX_ADDED_SYMBOLS = 4


class StudyRecord(BaseModel):
    """One research round: what it studied and why, or why it was skipped, and what changed."""

    research_round: int
    kind: StudyKind
    why: str
    hints: list[Hint] = Field(default_factory=list)  # the failure hints that chose it
    params: dict[str, Any] = Field(default_factory=dict)
    symbols: list[str] = Field(default_factory=list)  # the universe studied
    window: str = ""  # in-sample start..end
    signature: str = ""
    skipped: bool = False
    skip_reason: str | None = None
    lines: list[str] = Field(default_factory=list)  # what it found, with the numbers
    numbers: dict[str, float] = Field(default_factory=dict)
    table: list[dict[str, Any]] = Field(default_factory=list)
    favoured_families: list[str] = Field(default_factory=list)
    portfolio_families: list[str] = Field(default_factory=list)
    suggested_changes: dict[str, list[Any]] = Field(default_factory=dict)  # key: [before, after]
    families_before: list[str] = Field(default_factory=list)
    families_after: list[str] = Field(default_factory=list)
    added_symbols: list[str] = Field(default_factory=list)

    @field_validator("table", "params", mode="after")
    @classmethod
    def _plain_values(cls, value: Any) -> Any:
        """Plain Python values only (the checkpoint's msgpack and strict JSON refuse numpy
        scalars and non-finite floats): numpy -> Python, inf/nan -> None."""
        return _plain(value)

    @field_validator("numbers", mode="after")
    @classmethod
    def _finite_numbers(cls, value: dict[str, float]) -> dict[str, float]:
        return {k: float(v) for k, v in value.items() if math.isfinite(v)}

    def updated(self, **changes: Any) -> StudyRecord:
        """A copy with ``changes``, validated (``model_copy`` would skip the validators)."""
        return StudyRecord.model_validate(self.model_dump() | changes)

    def headline(self) -> str:
        """The round in one line: its kind, the symbols it added and why (or why it was skipped)."""
        if self.skipped:
            return f"round {self.research_round}: skipped ({self.skip_reason})"
        what = f"round {self.research_round}: {self.kind.value}"
        if self.added_symbols:
            what += f" (+{', '.join(self.added_symbols)})"
        return f"{what}: {self.why}"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def signature(
    kind: StudyKind, params: Mapping[str, Any], symbols: Sequence[str], window: str
) -> str:
    """Equal signatures mean the same computation on the same data: a repeat."""
    text = json.dumps(
        {"kind": kind.value, "params": dict(params), "symbols": sorted(symbols), "window": window},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def horizon_params(hints: Sequence[Hint], current: int | None) -> dict[str, Any]:
    """Which horizons the horizon study compares, from what the failure says."""
    names = set(hints)
    if names & _SHORTER:
        direction = "shorter"
    elif names & _LONGER:
        direction = "longer"
    else:
        direction = "other"
    return {"direction": direction, "current": current}


def horizon_candidates(params: Mapping[str, Any], horizons: Sequence[int]) -> list[int]:
    """The horizons to try next: shorter or longer than the current one as asked, else any other."""
    cur, direction = params.get("current"), params.get("direction")
    if cur is None:
        return list(horizons)
    if direction == "shorter":
        out = [h for h in horizons if h < cur]
    elif direction == "longer":
        out = [h for h in horizons if h > cur]
    else:
        out = [h for h in horizons if h != cur]
    return out or [h for h in horizons if h != cur]


def candidate_order(hints: Sequence[Hint]) -> tuple[list[StudyKind], dict[StudyKind, Hint]]:
    """Studies in the order the failure points to them, then the rest; and, per study, the
    hint that put it there."""
    order: list[StudyKind] = []
    cause: dict[StudyKind, Hint] = {}
    for hint in hints:
        for kind in HINT_STUDIES.get(hint, ()):
            if kind not in order:
                order.append(kind)
                cause[kind] = hint
    order += [k for k in DEFAULT_ORDER if k not in order]
    return order, cause


def plan_round(
    *,
    research_round: int,
    failure: FailureAnalysis | None,
    done: Sequence[StudyRecord],
    symbols: Sequence[str],
    window: str,
    current_lookback: int | None,
    expansion: Sequence[str] = (),
    allow_expansion: bool = False,
) -> StudyRecord:
    """The study of this round, or a skipped record with the reason.

    ``done``: every earlier round's record (skipped ones included). ``expansion``: the
    related symbols the data folder holds (``related_symbols``); used only when
    ``allow_expansion``.
    """
    hints = list(failure.hints) if failure else []
    base = {"research_round": research_round, "symbols": list(symbols), "window": window}
    if research_round <= 1 or not done:
        sig = signature(StudyKind.BASELINE, {}, symbols, window)
        return StudyRecord(
            kind=StudyKind.BASELINE,
            why="first round: the indicators of every symbol",
            signature=sig,
            **base,
        )
    seen = {r.signature for r in done if not r.skipped}
    order, cause = candidate_order(hints)
    passed_over: list[str] = []
    for kind in order:
        params: dict[str, Any] = {}
        if kind == StudyKind.HORIZONS:
            params = horizon_params(hints, current_lookback)
        elif kind == StudyKind.UNIVERSE:
            if not allow_expansion:
                passed_over.append("universe expansion needs --allow-universe-expansion")
                continue
            if not expansion:
                passed_over.append("no related symbol in the data folder")
                continue
            params = {"add": list(expansion)}
        need = MIN_SYMBOLS.get(kind, 1)
        if len(symbols) < need:
            passed_over.append(f"{kind.value} needs {need}+ symbols")
            continue
        # The lookback a horizon study starts from is not part of what it studies: the same
        # direction on the same data is the same study, whatever the last brief suggested.
        sig = signature(kind, {k: v for k, v in params.items() if k != "current"}, symbols, window)
        if sig in seen:
            continue
        why = (
            f"hint {cause[kind].value} points to it"
            if kind in cause
            else "no hint left unexplored: next in the default order"
        )
        if failure is not None:
            why += f" (failure {failure.failure_type.value})"
        return StudyRecord(kind=kind, why=why, hints=hints, params=params, signature=sig, **base)
    last = next((r for r in reversed(done) if not r.skipped), done[-1])
    reason = (
        f"would repeat round {last.research_round} ({last.kind.value}) exactly: every study "
        f"that applies to {len(symbols)} symbol(s) on {window} has been run"
        + (f"; {'; '.join(dict.fromkeys(passed_over))}" if passed_over else "")
    )
    return StudyRecord(
        kind=last.kind,
        why="nothing new to study",
        hints=hints,
        params=last.params,
        signature=last.signature,
        skipped=True,
        skip_reason=reason,
        **base,
    )


def research_outlook(next_study: StudyRecord, *, last_changed: bool | None) -> ResearchOutlook:
    """Whether a research round now can change the plan the strategy half reads.

    ``next_study``: what the next round would study (:func:`plan_round` for the current
    failure); ``last_changed``: whether the last round changed the plan (None: no round has
    been compared yet). A round that would only repeat a study cannot; nor can one after a
    round that changed nothing: a study that moved nothing is not followed by another.
    """
    if next_study.skipped:
        return ResearchOutlook(can_change=False, why=next_study.skip_reason or "nothing new")
    if last_changed is False:
        return ResearchOutlook(
            can_change=False,
            why=f"research round {next_study.research_round - 1} left the plan unchanged",
        )
    return ResearchOutlook(
        can_change=True, why=f"the {next_study.kind.value} study has not been run"
    )


def related_symbols(
    symbols: Sequence[str],
    data_dir: Path | None,
    sectors: Mapping[str, Sequence[str]],
    *,
    ranking: Sequence[str] = (),
    limit: int = MAX_ADDED_SYMBOLS,
) -> list[str]:
    """Symbols related to the universe that the data folder holds: members of every sector
    list holding one of ``symbols`` (the directive's sector lists), then the index ETFs.
    ``ranking`` (symbols best first, e.g. from the fundamental and sentiment views) puts
    the sectors of the better-ranked symbols first."""
    if data_dir is None or not Path(data_dir).is_dir():
        return []
    held = set(symbols)
    files = {p.stem.upper() for p in Path(data_dir).glob("*.csv")}
    rank = {s: i for i, s in enumerate(ranking)}
    anchors = sorted(symbols, key=lambda s: (rank.get(s, len(rank)), list(symbols).index(s)))
    out: list[str] = []
    for anchor in anchors:
        for name in sorted(sectors):
            members = sectors[name]
            if anchor in members:
                out += [m for m in members if m not in held and m not in out]
    out += [e for e in INDEX_ETFS if e not in held and e not in out]
    return [s for s in out if s.upper() in files][:limit]


def apply_suggested(
    suggested: Mapping[str, Any], updates: Mapping[str, Any], note: str
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The data brief's suggestion with a study's updates: (new, {key: [before, after]})."""
    out = dict(suggested)
    changes: dict[str, list[Any]] = {}
    for key, value in updates.items():
        if out.get(key) != value:
            changes[key] = [out.get(key), value]
            out[key] = value
    if changes:
        text = ", ".join(f"{k} {a}->{b}" for k, (a, b) in changes.items())
        out["reasoning"] = f"{str(out.get('reasoning', '')).rstrip('.')}; {note}: {text}"
    return out, changes


def favour(families: Sequence[str], favoured: Sequence[str]) -> list[str]:
    """``favoured`` first (in its order), then the rest in their order."""
    return list(dict.fromkeys([*favoured, *families]))


def render_study_md(record: StudyRecord, history: Sequence[StudyRecord]) -> list[str]:
    """The data brief's section on this round's study and the earlier ones."""
    lines = ["## This round's study", ""]
    if record.skipped:
        lines += [f"Round {record.research_round} skipped: {record.skip_reason}.", ""]
    else:
        lines += [
            f"Round {record.research_round}: **{record.kind.value}**. Why: {record.why}.",
            "",
            *[f"- {line}" for line in record.lines],
            "",
        ]
        if record.added_symbols:
            lines += [
                f"Universe expanded for the next round: +{', '.join(record.added_symbols)} "
                "(related symbols from the data folder, --allow-universe-expansion).",
                "",
            ]
        if record.suggested_changes:
            lines.append(
                "Added to the starting parameters: "
                + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in record.suggested_changes.items())
            )
            lines.append("")
        if record.favoured_families or record.portfolio_families:
            lines.append(
                "Families the study favours: "
                + ", ".join(record.favoured_families + record.portfolio_families)
            )
            lines.append("")
    earlier = [r for r in history if r.research_round < record.research_round]
    if earlier:
        lines += ["Earlier rounds:", "", *[f"- {r.headline()}" for r in earlier], ""]
    return lines
