"""The research debate's rules brains (bull, bear, research manager) and the code-side
conviction calibration.

The bull argues from the strongest positive evidence, the bear from the strongest negative.
From round 2 each answers the other side's strongest point still standing with its own next
point: an answer at least as strong (|stance| x confidence) rebuts it, and a rebutted point
takes half its pull out of its analyst's stance (:func:`debated_stance`), so a round can move
a stance and the verdict with it (a close call can tip, a winner can lose its margin). The
manager weighs the debated stances by confidence and proposes a conviction;
:func:`calibrate_conviction` then cuts it by the share of the analysts that took a side who
oppose the winner, whatever brain proposed it.
"""

from __future__ import annotations

from collections.abc import Sequence

from swarm.analyze.analysts import SIDE_DEADBAND, took_side
from swarm.analyze.contracts import (
    RULES,
    AnalystNote,
    DebateRound,
    DebateTurn,
    DebateVerdict,
    Point,
    Side,
)

MAX_HAIRCUT = 0.6  # the conviction cut at full opposition
OPPOSE_DEADBAND = SIDE_DEADBAND  # a stance within +/-0.05 of zero opposes nobody
TIE_MARGIN = 0.1  # bull and bear weights closer than this share: no winner
FULL_WEIGHT = 0.6  # confidence x stance the winning side needs for full conviction
POINTS_PER_CASE = 3
REBUTTED_DISCOUNT = 0.5  # the share of its pull a rebutted point loses


# --------------------------------------------------------------------------- calibration


def opposition_share(notes: Sequence[AnalystNote], winner: Side) -> float:
    """Seed 002's opposition: of the analysts that took a side, the share that took the
    other one. Neutral and abstaining notes are left out of the denominator: counting them
    diluted a 1-against-1 split to 17% (AAPL 2020-03-16) where the desk was split 50/50.
    0 when no side won or nobody took a side."""
    if winner == Side.NONE:
        return 0.0
    sign = 1.0 if winner == Side.BULL else -1.0
    sided = [n for n in notes if took_side(n)]
    if not sided:
        return 0.0
    return sum(n.stance * sign < 0 for n in sided) / len(sided)


def haircut(proposed: float, opposition: float) -> float:
    """Unchanged without opposition, cut linearly by up to ``MAX_HAIRCUT`` (60%, to 40% of
    itself) when every analyst that took a side opposes the winner."""
    opposition = min(1.0, max(0.0, opposition))
    return min(1.0, max(0.0, proposed)) * (1.0 - MAX_HAIRCUT * opposition)


def calibrate_conviction(
    proposed: float, notes: Sequence[AnalystNote], winner: Side
) -> tuple[float, float]:
    """(calibrated conviction, opposition share). Code, not the manager, has the last word."""
    opposition = opposition_share(notes, winner)
    return round(haircut(proposed, opposition), 6), round(opposition, 6)


# --------------------------------------------------------------------------- bull and bear


def ranked_points(notes: Sequence[AnalystNote], side: Side) -> list[tuple[str, Point]]:
    """(analyst, point) leaning to ``side``, strongest first (|stance| x confidence)."""
    sign = 1.0 if side == Side.BULL else -1.0
    pts = [
        (n.role.value, p)
        for n in notes
        if not n.abstained
        for p in n.points
        if p.stance * sign > OPPOSE_DEADBAND and p.confidence > 0
    ]
    return sorted(pts, key=lambda rp: (-abs(rp[1].stance) * rp[1].confidence, rp[0], rp[1].name))


def _cite(points: Sequence[tuple[str, Point]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for _, p in points:
        out.update(p.cited)
    return out


def _describe(role: str, p: Point) -> str:
    return f"{role}/{p.name} ({p.stance:+.2f} at confidence {p.confidence:.2f}): {p.text}"


def opening(notes: Sequence[AnalystNote], side: Side) -> DebateTurn:
    """Round 1 for ``side``: its case from the analysts' strongest points on its side."""
    mine = ranked_points(notes, side)[:POINTS_PER_CASE]
    word = "bull" if side == Side.BULL else "bear"
    if not mine:
        text = f"The {word} finds no evidence on its side in the analysts' notes."
    else:
        text = f"The {word} case rests on " + " | ".join(_describe(r, p) for r, p in mine)
    return DebateTurn(side=side, round=1, argument=text, cited=_cite(mine))


def strength(p: Point) -> float:
    """How much a point weighs in the debate: |stance| × confidence."""
    return abs(p.stance) * p.confidence


def point_id(role: str, p: Point) -> str:
    """How a turn names the point it answers: ``analyst/point``."""
    return f"{role}/{p.name}"


def rebuts(reply: Point, target: Point) -> bool:
    """An answer rebuts a point when it is at least as strong."""
    return strength(reply) >= strength(target)


def rebuttal(
    notes: Sequence[AnalystNote], side: Side, rnd: int, down: frozenset[str] = frozenset()
) -> DebateTurn:
    """Answer the other side's strongest point not yet rebutted (``down``) with one's own
    ``rnd - 1``-th strongest point (cycling): round 2 pits the two best points."""
    other = Side.BEAR if side == Side.BULL else Side.BULL
    theirs = [(r, p) for r, p in ranked_points(notes, other) if point_id(r, p) not in down]
    mine = ranked_points(notes, side)
    word = "bull" if side == Side.BULL else "bear"
    if not theirs:
        return DebateTurn(
            side=side,
            round=rnd,
            cited={},
            argument=f"The {word} notes the other side has no point left standing.",
        )
    target_role, target = theirs[0]
    reply = mine[(rnd - 2) % len(mine)] if mine else None
    text = (
        f"The {word} answers {target_role}/{target.name} ({target.stance:+.2f} at confidence "
        f"{target.confidence:.2f})"
    )
    if reply is None:
        text += (
            ": it has no counter-evidence, only that the point's confidence is not 1; it stands."
        )
        cited: dict[str, float] = {}
        won = False
    else:
        won = rebuts(reply[1], target)
        text += f" with {_describe(*reply)}" + (
            ": as strong or stronger, the point is rebutted."
            if won
            else ": weaker, the point stands."
        )
        cited = dict(reply[1].cited)
    return DebateTurn(
        side=side,
        round=rnd,
        argument=text,
        cited=cited,
        answered=point_id(target_role, target),
        rebutted=won,
    )


def rebutted_points(rounds: Sequence[DebateRound]) -> frozenset[str]:
    """Every point (``analyst/point``) a turn of ``rounds`` rebutted."""
    return frozenset(
        t.answered for r in rounds for t in (r.bull, r.bear) if t.rebutted and t.answered
    )


def debate_rounds(notes: Sequence[AnalystNote], rounds: int) -> list[DebateRound]:
    """The rules debate: the openings, then ``rounds - 1`` rounds of rebuttals."""
    out = [DebateRound(round=1, bull=opening(notes, Side.BULL), bear=opening(notes, Side.BEAR))]
    for rnd in range(2, rounds + 1):
        down = rebutted_points(out)  # both sides answer what stood at the round's start
        out.append(
            DebateRound(
                round=rnd,
                bull=rebuttal(notes, Side.BULL, rnd, down),
                bear=rebuttal(notes, Side.BEAR, rnd, down),
            )
        )
    return out


# --------------------------------------------------------------------------- the manager


def debated_stance(note: AnalystNote, rebutted: frozenset[str] = frozenset()) -> float:
    """The note's stance once the debate has rebutted some of its points: each rebutted point
    takes ``REBUTTED_DISCOUNT`` of its pull (its stance times its share of the note's point
    confidence) out of the stance. A bullish note whose bearish point fell grows more bullish;
    one whose best bullish point fell, less."""
    total = sum(p.confidence for p in note.points)
    if total <= 0:
        return note.stance
    pull = sum(
        p.stance * p.confidence / total
        for p in note.points
        if point_id(note.role.value, p) in rebutted
    )
    return max(-1.0, min(1.0, note.stance - REBUTTED_DISCOUNT * pull))


def side_weights(
    notes: Sequence[AnalystNote], rebutted: frozenset[str] = frozenset()
) -> tuple[float, float]:
    """(bull, bear): the confidence-weighted stances on each side, after the debate."""
    live = [(n, debated_stance(n, rebutted)) for n in notes if not n.abstained]
    bull = sum(n.confidence * max(s, 0.0) for n, s in live)
    bear = sum(n.confidence * max(-s, 0.0) for n, s in live)
    return bull, bear


def _falsifiers(notes: Sequence[AnalystNote], winner: Side) -> list[str]:
    ev: dict[str, float] = {}
    for n in notes:
        ev.update(n.evidence)
    out: list[str] = []
    if winner == Side.BULL:
        if "SWING_LOW_5" in ev:
            out.append(f"a close below the last swing low {ev['SWING_LOW_5']:.2f}")
        if "EMA_20" in ev:
            out.append(f"a close below EMA20 {ev['EMA_20']:.2f}")
        if "MACDHIST_12_26_9" in ev:
            out.append(f"the MACD histogram ({ev['MACDHIST_12_26_9']:.3f}) staying below zero")
    elif winner == Side.BEAR:
        if "SWING_HIGH_5" in ev:
            out.append(f"a close above the last swing high {ev['SWING_HIGH_5']:.2f}")
        if "EMA_20" in ev:
            out.append(f"a close above EMA20 {ev['EMA_20']:.2f}")
        if "MACDHIST_12_26_9" in ev:
            out.append(f"the MACD histogram ({ev['MACDHIST_12_26_9']:.3f}) staying above zero")
    out.append("the stop being hit before the target")
    return out


def _disagreements(notes: Sequence[AnalystNote]) -> list[str]:
    live = [n for n in notes if not n.abstained]
    out = []
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            if a.stance * b.stance < 0 and min(abs(a.stance), abs(b.stance)) > OPPOSE_DEADBAND:
                out.append(f"{a.role.value} {a.stance:+.2f} vs {b.role.value} {b.stance:+.2f}")
    for n in live:  # components of one analyst pulling apart
        pos = [k for k, v in n.subscores.items() if v > OPPOSE_DEADBAND]
        neg = [k for k, v in n.subscores.items() if v < -OPPOSE_DEADBAND]
        if pos and neg:
            out.append(
                f"within {n.role.value}: {', '.join(pos)} lean bullish, {', '.join(neg)} bearish"
            )
    return out


def manage(
    notes: Sequence[AnalystNote],
    recalled: Sequence[str] = (),
    rounds: Sequence[DebateRound] = (),
) -> DebateVerdict:
    """The rules research manager: the side with the larger confidence-weighted stance, less
    what the debate rebutted, wins; the proposed conviction is the winning margin scaled by
    how much evidence there is."""
    down = rebutted_points(rounds)
    bull, bear = side_weights(notes, down)
    total = bull + bear
    margin = abs(bull - bear) / total if total > 0 else 0.0
    if total == 0 or margin < TIE_MARGIN:
        winner, proposed = Side.NONE, 0.0
    else:
        winner = Side.BULL if bull > bear else Side.BEAR
        proposed = margin * min(1.0, max(bull, bear) / FULL_WEIGHT)
    conviction, opposition = calibrate_conviction(proposed, notes, winner)
    rationale = (
        f"Confidence-weighted stances: bull {bull:.3f}, bear {bear:.3f} (margin {margin:.2f}); "
        + (f"{winner.value} wins, " if winner != Side.NONE else "too close to call, ")
        + f"proposed conviction {proposed:.2f}, {opposition:.0%} of the analysts that took a "
        f"side oppose the winner -> {conviction:.2f}."
    )
    if down:
        rationale += f" Rebutted in the debate: {', '.join(sorted(down))}."
    if recalled:
        rationale += " Recalled from past reviews of this symbol: " + " | ".join(recalled[:3])
    return DebateVerdict(
        winner=winner,
        rationale=rationale,
        key_disagreements=_disagreements(notes),
        falsifiers=_falsifiers(notes, winner) if winner != Side.NONE else [],
        conviction_proposed=round(proposed, 6),
        conviction=conviction,
        opposition=opposition,
        model_used=RULES,
    )
