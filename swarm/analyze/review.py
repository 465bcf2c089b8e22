"""The reviewer: once the horizon has passed in the data, what happened to the thesis.

The outcome comes from the prices alone (:func:`classify`). A trade (a BUY or SELL the risk
engine sized) is graded as one: the target touched first is a win, the stop touched first
a loss (both in one bar counts as the stop, the conservative reading), neither by the
horizon a scratch; its P&L is in currency (size x the move to the exit, before costs). A
HOLD is never graded as a trade: no R, no P&L, no levels; it is judged as a stand-aside by
the close's move in ATRs (:func:`stand_aside_state`). Each outcome carries one of seed
002's five signal-evolution states (:class:`OutcomeTag`). Rules (or the model) write only
the critique and the lessons; the tagged record goes to memory, where later analyses of the
same symbol recall it (never before its horizon ended).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from swarm.analyze.contracts import (
    RULES,
    Action,
    Decision,
    Direction,
    Outcome,
    OutcomeTag,
    Recalled,
    Review,
    TraderThesis,
)
from swarm.analyze.memory_notes import review_text
from swarm.memory.records import flag

STAND_ASIDE_ATR = 2.0  # a close within 2 ATR at the horizon: standing aside cost nothing
REVIEW_RUN_PREFIX = "decision-review"
RECALL_MAX = 3
# memory.recall's k and relevance floor when every review of a symbol is wanted (the date,
# not the text, decides which ones matter).
RECALL_ALL = 5_000
RECALL_ANY_RELEVANCE = -2.0


@dataclass(frozen=True)
class PriceOutcome:
    outcome: Outcome
    exit_price: float
    exit_reason: str
    horizon_end: str
    r_multiple: float | None
    move_atr: float
    tag: OutcomeTag = OutcomeTag.UNKNOWN
    pnl: float = 0.0
    size: int = 0


class HorizonNotPassedError(ValueError):
    """The data does not reach the end of the decision's horizon yet."""


def is_trade(decision: Decision) -> bool:
    """A BUY or SELL with a valid directional thesis and a size: the only thing graded as a
    trade. A HOLD (judged, rejected or degraded) never is."""
    t = decision.trader
    return (
        decision.action != Action.HOLD
        and t is not None
        and t.valid
        and t.direction != Direction.FLAT
        and decision.risk.size >= 1
    )


def trade_state(outcome: Outcome, r_end: float | None) -> OutcomeTag:
    """A trade's signal-evolution state: target first Realized, stop first Falsified; neither
    by the horizon: Strengthened if the close is on the thesis's side of the entry (the move
    is coming, slower than the horizon), Weakened otherwise."""
    if outcome == Outcome.WIN:
        return OutcomeTag.REALIZED
    if outcome == Outcome.LOSS:
        return OutcomeTag.FALSIFIED
    if r_end is None or not math.isfinite(r_end):
        return OutcomeTag.UNKNOWN
    return OutcomeTag.STRENGTHENED if r_end > 0 else OutcomeTag.WEAKENED


def stand_aside_state(move_atr: float, lean: Direction) -> OutcomeTag:
    """A HOLD's state from the close's move in ATRs by the horizon. Within ``STAND_ASIDE_ATR``
    the hold is Realized (standing aside cost nothing). Beyond it: Falsified if the move went
    the way the desk leaned but did not trade (the hold missed it), Strengthened if it went
    against that lean (the hold avoided it), Weakened with no lean (a move nobody called).
    Unknown without an ATR to measure by."""
    if not math.isfinite(move_atr):
        return OutcomeTag.UNKNOWN
    if abs(move_atr) <= STAND_ASIDE_ATR:
        return OutcomeTag.REALIZED
    sign = {Direction.LONG: 1.0, Direction.SHORT: -1.0}.get(lean, 0.0)
    if sign == 0.0:
        return OutcomeTag.WEAKENED
    return OutcomeTag.FALSIFIED if move_atr * sign > 0 else OutcomeTag.STRENGTHENED


def walk(thesis: TraderThesis, window: pd.DataFrame) -> tuple[Outcome, float, str, float]:
    """(outcome, exit price, why, R) of ``thesis`` traded over ``window``: the first level
    touched (the stop when both are in one bar), else the close at the horizon."""
    sign = 1.0 if thesis.direction == Direction.LONG else -1.0
    for day, bar in window.iterrows():
        hit_stop = bar["low"] <= thesis.stop if sign > 0 else bar["high"] >= thesis.stop
        hit_target = bar["high"] >= thesis.target if sign > 0 else bar["low"] <= thesis.target
        if hit_stop:
            both = " (the target too, same bar: counted as the stop)" if hit_target else ""
            return Outcome.LOSS, thesis.stop, f"stop hit on {day.date()}{both}", -1.0
        if hit_target:
            r = abs(thesis.target - thesis.entry) / thesis.risk_per_share
            return Outcome.WIN, thesis.target, f"target hit on {day.date()}", r
    close_end = float(window["close"].iloc[-1])
    r = sign * (close_end - thesis.entry) / thesis.risk_per_share
    return Outcome.SCRATCH, close_end, "neither stop nor target by the horizon", r


def classify(decision: Decision, after: pd.DataFrame) -> PriceOutcome:
    """Outcome from the bars strictly after the decision date (first ``horizon_days`` used)."""
    thesis = decision.trader
    horizon = thesis.horizon_days if thesis else decision.config.horizon_days
    window = after.iloc[:horizon]
    if len(window) < horizon:
        last = after.index[-1].date() if len(after) else decision.date
        raise HorizonNotPassedError(
            f"the {horizon}-bar horizon after {decision.date} is not over in the data "
            f"(it has {len(window)} bars after it, up to {last}); review once it is"
        )
    end = str(window.index[-1].date())
    entry = thesis.entry if thesis else float("nan")
    atr = thesis.atr if thesis else float("nan")
    close_end = float(window["close"].iloc[-1])
    move_atr = (close_end - entry) / atr if atr and math.isfinite(atr) else float("nan")
    if not is_trade(decision):
        lean = thesis.direction if thesis is not None and thesis.valid else Direction.FLAT
        tag = stand_aside_state(move_atr, lean)
        if not math.isfinite(move_atr):
            reason = "stood aside; no ATR to measure the move by"
            return PriceOutcome(Outcome.STOOD_ASIDE, close_end, reason, end, None, 0.0, tag)
        reason = (
            f"stood aside; the close moved {move_atr:+.2f} ATR by the horizon "
            f"({'within' if abs(move_atr) <= STAND_ASIDE_ATR else 'beyond'} {STAND_ASIDE_ATR:g} ATR)"
        )
        return PriceOutcome(Outcome.STOOD_ASIDE, close_end, reason, end, None, move_atr, tag)
    outcome, exit_price, reason, r = walk(thesis, window)
    sign = 1.0 if thesis.direction == Direction.LONG else -1.0
    size = decision.risk.size
    pnl = round(sign * (exit_price - thesis.entry) * size, 6)
    return PriceOutcome(
        outcome, exit_price, reason, end, r, move_atr, trade_state(outcome, r), pnl, size
    )


def thesis_text(decision: Decision) -> str:
    """What the decision expected, in words a reviewer can hold the prices against. A HOLD's
    shows no levels: it set none."""
    t = decision.trader
    if is_trade(decision):
        return (
            f"{decision.action.value} {decision.risk.size}: a {t.direction.value} from "
            f"{t.entry:.2f} to the target {t.target:.2f} before the stop {t.stop:.2f}, within "
            f"{t.horizon_days} bars"
        )
    lean = t.direction.value if t is not None and t.valid else "no"
    return (
        f"HOLD ({decision.status.value}): no trade; the desk had {lean} directional "
        f"thesis; the bet is that standing aside costs no more than a "
        f"{STAND_ASIDE_ATR:g}-ATR move"
    )


def result_text(decision: Decision, po: PriceOutcome, window: pd.DataFrame | None) -> str:
    """What the prices did against :func:`thesis_text`. For a HOLD with a valid thesis, what
    that untraded thesis would have done (in R, no levels): information, not a grade."""
    text = f"{po.exit_reason} -> {po.tag.value}"
    if po.outcome != Outcome.STOOD_ASIDE:
        return text + f" ({po.r_multiple:+.2f}R, P&L {po.pnl:+,.2f})"
    t = decision.trader
    if window is not None and t is not None and t.valid and t.direction != Direction.FLAT:
        outcome, _, _, r = walk(t, window)
        text += f"; the untraded {t.direction.value} would have ended a {outcome.value} ({r:+.2f}R)"
    return text


def rules_critique(decision: Decision, po: PriceOutcome) -> tuple[str, list[str]]:
    """The rules reviewer's critique and lessons: from the decision's own numbers."""
    act, thesis = decision.action.value, decision.trader
    conv = decision.debate.conviction if decision.debate else 0.0
    traded = po.outcome != Outcome.STOOD_ASIDE
    direction = thesis.direction.value if thesis and traded else "no"
    tag = po.tag.value
    critique = (
        f"{decision.ticker} {decision.date}: {act} ({decision.status.value}) on "
        f"{'a ' + direction if traded else 'no'} position at conviction {conv:.2f}; by "
        f"{po.horizon_end}: {po.exit_reason} -> {tag}."
    )
    lessons: list[str] = []
    if po.outcome == Outcome.LOSS:
        worst = max(
            (decision.debate.key_disagreements if decision.debate else [])[:1] or ["none recorded"],
            key=len,
        )
        lessons.append(
            f"a {direction} at conviction {conv:.2f} was falsified; the debate's "
            f"disagreement was: {worst}"
        )
    elif po.outcome == Outcome.SCRATCH:
        lessons.append(
            f"the move was too slow for a {thesis.horizon_days}-bar horizon "
            f"({po.r_multiple:+.2f}R at the end)"
        )
    elif not traded and po.tag == OutcomeTag.FALSIFIED:
        lean = thesis.direction.value if thesis else "directional"
        lessons.append(f"the hold missed a {po.move_atr:+.2f}-ATR move the desk's {lean} lean saw")
    if not lessons:
        lessons.append(
            f"{'the ' + direction + ' thesis' if traded else 'standing aside'} "
            f"{tag.lower()}: {po.exit_reason}"
        )
    return critique, lessons


def review_decision(decision: Decision, bars: pd.DataFrame) -> Review:
    """Rules review of ``decision`` against ``bars`` (any data that reaches the horizon)."""
    after = bars.loc[
        bars.index > pd.Timestamp(decision.date) + pd.Timedelta(days=1) - pd.Timedelta(1)
    ]
    po = classify(decision, after)
    critique, lessons = rules_critique(decision, po)
    thesis = decision.trader
    horizon = thesis.horizon_days if thesis else decision.config.horizon_days
    traded = po.outcome != Outcome.STOOD_ASIDE
    return Review(
        ticker=decision.ticker,
        date=decision.date,
        action=decision.action,
        direction=thesis.direction if traded else Direction.FLAT,
        horizon_days=horizon,
        horizon_end=po.horizon_end,
        outcome=po.outcome,
        tag=po.tag,
        exit_price=po.exit_price,
        exit_reason=po.exit_reason,
        r_multiple=None if po.r_multiple is None else round(po.r_multiple, 6),
        size=po.size,
        pnl=po.pnl,
        thesis=thesis_text(decision),
        result=result_text(decision, po, after.iloc[:horizon]),
        move_atr=round(po.move_atr, 6) if math.isfinite(po.move_atr) else 0.0,
        critique=critique,
        lessons=lessons,
        model_used=RULES,
    )


def critique_client(llm, decision: Decision, review: Review, bars: pd.DataFrame, *, known=None):
    """The client a lone review (``swarm.analyze --review``) asks through: masked as the
    decision's own prompts were when the policy masks (alias, offsets from the decision day,
    prices rebased over the window before it). A run's client is masked already."""
    from swarm.llm.cutoff import policy_for
    from swarm.llm.mask import WINDOW_BARS, context_for
    from swarm.llm.masked import MaskedClient

    if isinstance(llm, MaskedClient):
        return llm
    cut = bars.loc[: pd.Timestamp(decision.date)]
    policy = policy_for(llm.settings, cut.index[-WINDOW_BARS:][0].date())
    if policy is None or not policy.masked:
        return llm
    prices = {
        "entry": decision.trader.entry if is_trade(decision) else None,
        "exit": review.exit_price,
    }
    evidence = {k: float(v) for k, v in prices.items() if v is not None}
    ctx = context_for([decision.ticker], decision.date, bars=cut, evidence=evidence, known=known)
    return MaskedClient(llm, ctx)


def critique_with_llm(llm, decision: Decision, review: Review, *, log) -> Review:
    """``review`` with the model's critique and lessons when they pass the grounding checks
    (numbers only from the facts); the rules' otherwise. The outcome is never the model's."""
    from swarm.analyze.llm_roles import llm_critique

    facts = {
        "entry": decision.trader.entry if is_trade(decision) else 0.0,
        "exit": review.exit_price,
        "r_multiple": review.r_multiple or 0.0,
        "pnl": review.pnl,
        "move_atr": review.move_atr,
    }
    critique, lessons, model = llm_critique(
        llm,
        critique=review.critique,
        lessons=review.lessons,
        facts=facts,
        summary=review.critique,
        log=log,
    )
    if not model:
        return review
    return review.model_copy(update={"critique": critique, "lessons": lessons, "model_used": model})


# --------------------------------------------------------------------------- memory


def review_run_id(review: Review) -> str:
    """Memory's run id for a review; it carries the dates recall filters on."""
    return f"{REVIEW_RUN_PREFIX}:{review.ticker}:{review.date}:{review.horizon_end}"


def store_review(memory, review: Review) -> bool:
    """The tagged record as a memory lesson about the symbol. False if memory is off."""
    return store_reviews(memory, [review]) > 0


def store_reviews(memory, reviews: Sequence[Review]) -> int:
    """The tagged records as memory lessons about their symbols, in one write (a backtest
    stores hundreds: one lock and one sidecar rewrite, not one per review). Returns how many
    were written (0 if memory is off). A ResearchMemory also keeps its review sidecar
    (``swarm.memory.sidecar``) in step, under the same lock."""
    from swarm.memory.records import lesson_record
    from swarm.memory.sidecar import remember
    from swarm.memory.store import ResearchMemory

    if not reviews:
        return 0
    ours = isinstance(memory, ResearchMemory) and memory.path is not None
    recs, n = [], 0
    for review in reviews:
        text = review_text(review)
        meta = {
            "source": "decision_review",
            "tag": review.tag.value,
            "result": review.outcome.value,
        }
        run_id, outcome = review_run_id(review), review.tag.value.lower()
        if not ours:  # a stand-in memory
            n += memory.remember_lesson(
                run_id, None, text, meta, symbols=[review.ticker], outcome=outcome
            )
            continue
        # The record remember_lesson would write, written with the sidecar under one lock.
        recs.append(
            lesson_record(
                run_id,
                None,
                text,
                meta,
                symbols=[review.ticker],
                family=None,
                regime=None,
                outcome=outcome,
                scope={},
            )
        )
    return remember(memory, recs, REVIEW_RUN_PREFIX) if ours else n


def parse_review_run_id(run_id: str | None) -> tuple[str, str, str] | None:
    """(ticker, decision date, horizon end) of a review's memory run id; None for any other."""
    parts = (run_id or "").split(":")
    if len(parts) != 4 or parts[0] != REVIEW_RUN_PREFIX:
        return None
    return parts[1], parts[2], parts[3]


def review_rows(memory, ticker: str) -> list:
    """The stored lessons about ``ticker`` that may be reviews (``swarm.memory.sidecar.Row``s,
    to be selected by run id): the store's recall scope, the symbol's ``sym_`` flag. From the
    sidecar when it stands for the store (no chromadb), else from the store, which then has
    the sidecar rebuilt for the next reader."""
    from swarm.memory.sidecar import Row, read, refresh
    from swarm.memory.store import ResearchMemory

    ours = isinstance(memory, ResearchMemory) and memory.path is not None
    if ours and memory.reason is None:
        rows = read(memory.path, REVIEW_RUN_PREFIX)
        if rows is not None:
            key = flag("sym_", ticker.upper())
            return [r for r in rows if key in {flag("sym_", s) for s in r.symbols}]
    found = memory.recall(
        [ticker], kinds=("lesson",), k=RECALL_ALL, min_relevance=RECALL_ANY_RELEVANCE
    )
    if ours and memory.opened and memory.reason is None:  # not when the index ruled it out
        refresh(memory, REVIEW_RUN_PREFIX)
    return [
        Row(
            getattr(r, "id", ""),
            r.run_id or "",
            tuple(getattr(r, "symbols", ())),
            getattr(r, "outcome", None),
            getattr(r, "text", ""),
        )
        for r in found
    ]


def _about(row, ticker: str) -> tuple[str, str] | None:
    """(decision date, horizon end) of a review of ``ticker``; None for any other record."""
    parts = parse_review_run_id(row.run_id)
    if parts is None or parts[0] != ticker.upper():
        return None
    return parts[1], parts[2]


def reviewed_dates(memory, ticker: str) -> set[str]:
    """The decision dates of ``ticker`` that memory already holds a review of."""
    return {p[0] for row in review_rows(memory, ticker) if (p := _about(row, ticker))}


def recall_reviews(memory, ticker: str, date: str, *, query: str | None = None) -> list[Recalled]:
    """Past reviews of ``ticker`` whose horizon ended on or before ``date`` (so a later
    decision's review never leaks into an earlier analysis).

    Every review of the symbol is read (a backtest may have stored hundreds). Without
    ``query`` the newest ``RECALL_MAX`` before the date are recalled, newest first. With one
    (``swarm.analyze.memory_notes.setup_query``), those eligible are ranked by the hybrid
    retriever (``swarm.memory.hybrid``: BM25 and the store's embedding fused by RRF) and
    those sharing no content word with it dropped."""
    out = []
    for row in review_rows(memory, ticker):
        parts = _about(row, ticker)
        if parts is None:
            continue
        decided, horizon_end = parts
        if horizon_end > date:
            continue
        tag = next((t for t in OutcomeTag if t.value.lower() == row.outcome), None)
        out.append(Recalled(id=row.id, date=decided, tag=tag, text=row.text))
    out.sort(key=lambda r: (r.date, r.id), reverse=True)
    if query is not None and out:
        from swarm.memory.hybrid import hybrid_rank

        by_id = {r.id: r for r in out}
        ranked = hybrid_rank(query, list(by_id), [r.text for r in by_id.values()])
        out = [by_id[i] for i in ranked]
    return out[:RECALL_MAX]
