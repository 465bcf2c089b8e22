"""Memory for every agent: the desk's past reviews of the symbol, as the roles see them.

Recall (``swarm.analyze.review.recall_reviews``) picks the past reviews relevant to today's
setup (:func:`setup_query`) with the hybrid retriever. Then:

- LLM brains: every analyst, bull, bear, manager, trader and risk agent gets them prepended
  to its prompt (:func:`memory_block`); numbers quoted from them count as grounded
  (:func:`memory_numbers`).
- Rules brains: the manager weighs them by a fixed, bounded rule (:func:`memory_tilt`): a
  past call in the winning side's direction on this symbol that the prices falsified takes
  ``TILT[FALSIFIED]`` (0.10) off the proposed conviction, a weakened one 0.05; a realized or
  strengthened one adds 0.05. The sum is capped at +/-``TILT_CAP`` (0.15) so memory can
  lean on a verdict but never make or unmake it by itself; holds (flat) and calls the other
  way do not count. With nothing recalled the tilt is 0 and the decision is the one a run
  without memory makes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from swarm.analyze.contracts import Direction, OutcomeTag, Recalled, Review, Side

TILT: dict[OutcomeTag, float] = {
    OutcomeTag.FALSIFIED: -0.10,  # the prices said no to this very call: lean off it
    OutcomeTag.WEAKENED: -0.05,  # drifted against it, no level reached
    OutcomeTag.STRENGTHENED: 0.05,  # on its way when the horizon ended
    OutcomeTag.REALIZED: 0.05,  # played out; a success is weaker news than a failure
}
TILT_CAP = 0.15  # memory leans on a conviction, it never decides one
SIDE_DIRECTION = {Side.BULL: Direction.LONG, Side.BEAR: Direction.SHORT}
# What a setup query says about the trend's lean: the words review texts use for the call.
LEAN_WORDS = {
    Side.BULL: "BUY long bull",
    Side.BEAR: "SELL short bear",
    Side.NONE: "HOLD flat",
}


# "(BUY, long)" in a review's memory text: :func:`review_text` writes it (for
# ``review.store_reviews``), :func:`review_direction` reads it back: the store keeps no
# direction field, only the text.
_HEAD = re.compile(r"\((?:BUY|SELL|HOLD), (long|short|flat)\)")


def review_text(review: Review) -> str:
    """The memory text of a review: tag, symbol, date, action and direction, exit, lessons."""
    return (
        f"[{review.tag.value}] {review.ticker} decision of {review.date} "
        f"({review.action.value}, {review.direction.value}): {review.exit_reason}. "
        f"Lessons: {' | '.join(review.lessons)}"
    )


def review_direction(text: str) -> Direction | None:
    """The direction of the position a review's memory text (:func:`review_text`) was about."""
    m = _HEAD.search(text)
    return Direction(m.group(1)) if m and m.group(1) else None


def setup_query(ticker: str, close: float, ema20: float) -> str:
    """The recall query of a decision: the symbol and the lean of its setup (close above or
    below the 20-day EMA), in the words a review's text uses for such a call."""
    if close > ema20:
        lean = Side.BULL
    elif close < ema20:
        lean = Side.BEAR
    else:
        lean = Side.NONE
    return f"{ticker.upper()} {LEAN_WORDS[lean]}"


def note_line(r: Recalled) -> str:
    """A recalled note in one line: date, tag and text."""
    return f"{r.date} {r.tag.value if r.tag else ''}: {r.text}"


def memory_block(recalled: Sequence[Recalled]) -> str:
    """The prompt prefix: the recalled notes, or an empty string when there are none."""
    if not recalled:
        return ""
    lines = "\n".join(f"- {note_line(r)}" for r in recalled)
    return (
        "Past notes from this desk's memory (reviews of earlier decisions on this symbol; "
        f"lessons, not today's evidence):\n{lines}\n\n"
    )


def memory_numbers(recalled: Sequence[Recalled]) -> dict[str, float]:
    """The numbers of the recalled notes, keyed for the grounding check (``m0``, ``m1``...)."""
    from swarm.llm.grounding import numbers_in

    text = " ".join(note_line(r) for r in recalled)
    return {f"m{i}": x for i, x in enumerate(numbers_in(text))}


def memory_tilt(recalled: Sequence[Recalled], winner: Side) -> tuple[float, list[str]]:
    """(conviction change, why) from past reviews of calls in ``winner``'s direction: the
    sum of ``TILT`` over them, capped at +/-``TILT_CAP``. 0 for no winner or no such call."""
    direction = SIDE_DIRECTION.get(winner)
    if direction is None:
        return 0.0, []
    total, why = 0.0, []
    for r in recalled:
        step = TILT.get(r.tag) if r.tag else None
        if step is None or review_direction(r.text) != direction:
            continue
        total += step
        why.append(f"{r.date} {direction.value} {r.tag.value.lower()} ({step:+.2f})")
    return round(max(-TILT_CAP, min(TILT_CAP, total)), 6), why


def tilted(proposed: float, tilt: float) -> float:
    """The proposed conviction moved by the tilt, kept in [0, 1]."""
    return round(min(1.0, max(0.0, proposed + tilt)), 6)
