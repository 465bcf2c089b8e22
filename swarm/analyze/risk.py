"""The risk team (risky, safe, neutral), the risk judge, and the deterministic risk engine.

The team and the judge decide *whether* to act on the trader's thesis; the engine decides
whether the account *may*, and how much: ``quantity = floor(capital x risk_pct / 100 /
|entry - stop|)``. One failed check rejects the trade, whatever the judge said.

The price forecast is evidence for the analysts and the debate only: the team reads the
bundle through :func:`risk_evidence`, which lets through only the volatility and trend
numbers its rules name, and the engine reads nothing but the thesis and the account. A
naive drift band must not veto (or allow) a trade the desk argued for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple

from swarm.analyze.contracts import (
    RULES,
    Action,
    AnalysisConfig,
    CheckName,
    DebateVerdict,
    Direction,
    RiskCheck,
    RiskEngineResult,
    RiskJudgement,
    RiskRound,
    RiskStance,
    RiskTurn,
    TraderThesis,
)

HIGH_NATR = 4.0  # daily ATR above 4% of price: a volatile name for a 2-ATR stop
MAX_OPPOSITION = 0.3  # more of the sided analysts than this against the winner: a concern
LOW_CONVICTION = 0.4
# The only evidence keys the risk team's rules read (never the forecast band).
RISK_EVIDENCE_KEYS = ("NATR_14", "ADX_14")

ACTION_OF = {Direction.LONG: Action.BUY, Direction.SHORT: Action.SELL, Direction.FLAT: Action.HOLD}


# --------------------------------------------------------------------------- the team


def risk_evidence(ev: Mapping[str, float]) -> dict[str, float]:
    """The part of the feature bundle the risk team may read: ``RISK_EVIDENCE_KEYS`` only."""
    return {k: float(ev[k]) for k in RISK_EVIDENCE_KEYS if k in ev}


class ConcernKind(StrEnum):
    INVALID_THESIS = "invalid_thesis"
    LOW_CONVICTION = "low_conviction"
    OPPOSITION = "opposition"
    WIDE_STOP = "wide_stop"


# What the risky side can answer from round 2: a wide stop only shrinks the engine's size (the
# risk stays risk_pct of capital), and the opposition is already priced into the conviction by
# the calibration haircut. An invalid thesis or a low conviction has no answer.
ANSWERS = {
    ConcernKind.WIDE_STOP: "a wide stop only shrinks the engine's size: the risk stays "
    "{risk_pct:g}% of capital",
    ConcernKind.OPPOSITION: "the opposition is already in the conviction {conviction:.2f} "
    "(the calibration haircut)",
}


class Concern(NamedTuple):
    kind: ConcernKind
    text: str


def concern_list(
    thesis: TraderThesis, verdict: DebateVerdict, ev: Mapping[str, float], cfg: AnalysisConfig
) -> list[Concern]:
    """What the safe analyst objects to, each with the number behind it."""
    out = []
    if not thesis.valid:
        failed = [c.name for c in thesis.validator if not c.ok]
        out.append(
            Concern(
                ConcernKind.INVALID_THESIS, f"the thesis fails its validator ({', '.join(failed)})"
            )
        )
    if verdict.conviction < LOW_CONVICTION:
        out.append(
            Concern(
                ConcernKind.LOW_CONVICTION,
                f"conviction {verdict.conviction:.2f} is below {LOW_CONVICTION}",
            )
        )
    if verdict.opposition > MAX_OPPOSITION:
        out.append(
            Concern(
                ConcernKind.OPPOSITION,
                f"{verdict.opposition:.0%} of the analysts that took a side oppose the "
                f"{verdict.winner.value}",
            )
        )
    natr = ev.get("NATR_14")
    if natr is not None and natr > HIGH_NATR:
        out.append(
            Concern(
                ConcernKind.WIDE_STOP, f"NATR_14 {natr:.2f}% makes a {cfg.stop_atr:g}-ATR stop wide"
            )
        )
    return out


def concerns(
    thesis: TraderThesis, verdict: DebateVerdict, ev: Mapping[str, float], cfg: AnalysisConfig
) -> list[str]:
    """The safe analyst's objections as sentences."""
    return [c.text for c in concern_list(thesis, verdict, ev, cfg)]


def supports(thesis: TraderThesis, verdict: DebateVerdict, ev: Mapping[str, float]) -> list[str]:
    """What the risky analyst argues for, each with the number behind it."""
    out = []
    if thesis.valid:
        out.append(
            f"a {thesis.direction.value} with stop {thesis.stop:.2f} and target "
            f"{thesis.target:.2f} pays 2R on a risk of {thesis.risk_per_share:.2f} a share"
        )
    if verdict.conviction >= LOW_CONVICTION:
        out.append(f"conviction {verdict.conviction:.2f} after calibration")
    adx = ev.get("ADX_14")
    if adx is not None and adx >= 25:
        out.append(f"ADX_14 {adx:.1f} shows a trend to ride")
    return out


def standing(worries: Sequence[Concern], previous: RiskRound | None, act: Action) -> list[Concern]:
    """The concerns still standing after the risky side's answers of the previous round:
    an answerable one falls once the risky side argued for acting."""
    if previous is None or act == Action.HOLD:
        return list(worries)
    risky = next(t for t in previous.turns if t.stance == RiskStance.RISKY)
    if risky.favours != act:
        return list(worries)
    return [w for w in worries if w.kind not in ANSWERS]


def majority(rnd: RiskRound) -> Action:
    """The action most of a round's three turns favour (HOLD on a three-way split)."""
    votes = [t.favours for t in rnd.turns]
    return next((a for a in dict.fromkeys(votes) if votes.count(a) >= 2), Action.HOLD)


def team_round(
    thesis: TraderThesis,
    verdict: DebateVerdict,
    ev: Mapping[str, float],
    cfg: AnalysisConfig,
    rnd: int,
    previous: RiskRound | None = None,
) -> RiskRound:
    """One round. Round 1 states the cases; from round 2 each side reacts to the last round:
    the safe analyst drops the concerns the risky one answered (``ANSWERS``), the risky one
    concedes when the last round went against it on a concern it cannot answer, and the
    neutral one follows the two when they agree, else weighs what still stands."""
    act = ACTION_OF[thesis.direction] if thesis.valid else Action.HOLD
    worries, reasons = concern_list(thesis, verdict, ev, cfg), supports(thesis, verdict, ev)
    left = standing(worries, previous, act)
    again = " (again, answering the others)" if previous is not None else ""
    answered = [w for w in worries if w not in left]
    blocking = [w for w in worries if w.kind not in ANSWERS]
    concede = previous is not None and bool(blocking) and majority(previous) == Action.HOLD
    facts = {"risk_pct": cfg.risk_pct, "conviction": verdict.conviction}
    replies = "; ".join(ANSWERS[w.kind].format(**facts) for w in worries if w.kind in ANSWERS)
    if concede:
        risky_text = f"Risky{again}: the safe side's '{blocking[0].text}' has no answer: hold."
    else:
        risky_text = (
            f"Risky{again}: take it: "
            + ("; ".join(reasons) or "nothing argues against it")
            + (f". To the safe side: {replies}." if previous is not None and replies else ".")
        )
    risky = RiskTurn(
        stance=RiskStance.RISKY,
        round=rnd,
        favours=Action.HOLD if concede else act,
        argument=risky_text,
    )
    safe_text = (
        f"Safe{again}: "
        + (
            "hold: " + "; ".join(w.text for w in left)
            if left
            else "no objection: every concern checked is clear"
        )
        + (f" (answered: {'; '.join(w.text for w in answered)})" if answered else "")
        + "."
    )
    safe = RiskTurn(
        stance=RiskStance.SAFE, round=rnd, favours=Action.HOLD if left else act, argument=safe_text
    )
    if previous is not None and risky.favours == safe.favours:
        favours = risky.favours
        why = f"risky and safe agree on {favours.value}."
    else:
        balanced = (
            act != Action.HOLD and len(left) <= 1 and verdict.conviction >= cfg.conviction_floor
        )
        favours = act if balanced else Action.HOLD
        why = (
            "acceptable with the engine's sizing." if balanced else "not enough edge for the risk."
        )
    neutral = RiskTurn(
        stance=RiskStance.NEUTRAL,
        round=rnd,
        favours=favours,
        argument=f"Neutral{again}: {len(reasons)} argument(s) for, {len(left)} concern(s) "
        f"standing; {why}",
    )
    return RiskRound(round=rnd, turns=[risky, safe, neutral])


def team(
    thesis: TraderThesis, verdict: DebateVerdict, ev: Mapping[str, float], cfg: AnalysisConfig
) -> list[RiskRound]:
    """The rules risk team's ``cfg.risk_rounds`` rounds, each answering the one before, on risk
    evidence only."""
    ev = risk_evidence(ev)  # whatever the caller hands in, the forecast never reaches a rule
    rounds: list[RiskRound] = []
    for r in range(1, cfg.risk_rounds + 1):
        rounds.append(team_round(thesis, verdict, ev, cfg, r, rounds[-1] if rounds else None))
    return rounds


def judge(
    thesis: TraderThesis, verdict: DebateVerdict, rounds: Sequence[RiskRound], cfg: AnalysisConfig
) -> RiskJudgement:
    """Act on the thesis only if it is valid, the conviction clears the floor and at least
    two of the three risk analysts favour acting in the last round; otherwise hold."""
    act = ACTION_OF[thesis.direction]
    last = rounds[-1].turns if rounds else []
    votes = sum(t.favours == act for t in last)
    if not thesis.valid or act == Action.HOLD:
        why = "no valid directional thesis to act on"
        return RiskJudgement(
            action=Action.HOLD, rationale=why[0].upper() + why[1:] + ".", model_used=RULES
        )
    if verdict.conviction < cfg.conviction_floor:
        return RiskJudgement(
            action=Action.HOLD,
            model_used=RULES,
            rationale=(
                f"Conviction {verdict.conviction:.2f} is below the floor {cfg.conviction_floor:g}."
            ),
        )
    if votes < 2:
        return RiskJudgement(
            action=Action.HOLD,
            model_used=RULES,
            rationale=(
                f"Only {votes} of 3 risk analysts favour {act.value}; "
                + next((t.argument for t in last if t.stance == RiskStance.SAFE), "")
            ),
        )
    return RiskJudgement(
        action=act,
        model_used=RULES,
        rationale=(
            f"{votes} of 3 risk analysts favour {act.value} at conviction "
            f"{verdict.conviction:.2f}; entry {thesis.entry:.2f}, stop {thesis.stop:.2f}, target "
            f"{thesis.target:.2f}; size is the risk engine's."
        ),
    )


# --------------------------------------------------------------------------- the engine


def position_size(*, capital: float, risk_pct: float, entry: float, stop: float) -> int:
    """floor(capital x risk_pct / 100 / |entry - stop|); 0 when the risk per share is 0."""
    per_share = abs(entry - stop)
    if not (math.isfinite(per_share) and per_share > 0):
        return 0
    return max(0, math.floor(capital * risk_pct / 100.0 / per_share))


def risk_engine(thesis: TraderThesis, cfg: AnalysisConfig) -> RiskEngineResult:
    """Every check, in order, on the trade the judge asked for. Pure: no account is read
    but the one in ``cfg.portfolio``."""
    lim, pf = cfg.limits, cfg.portfolio
    capital = cfg.capital
    qty = position_size(
        capital=capital, risk_pct=cfg.risk_pct, entry=thesis.entry, stop=thesis.stop
    )
    notional = qty * thesis.entry if math.isfinite(thesis.entry) else math.inf
    risk_amount = qty * thesis.risk_per_share if qty else 0.0
    margin = notional * (lim.short_margin if thesis.direction == Direction.SHORT else 1.0)
    cash = capital if pf.cash is None else pf.cash
    loss_cap = capital * lim.max_daily_loss_pct / 100.0
    notional_cap = capital * lim.max_notional_pct / 100.0
    exposure_cap = capital * lim.max_exposure_pct / 100.0
    degenerate = not thesis.valid or thesis.direction == Direction.FLAT
    checks = [
        RiskCheck(
            name=CheckName.DEGENERATE_THESIS,
            passed=not degenerate,
            detail="valid directional thesis"
            if not degenerate
            else "thesis invalid or flat: "
            + ", ".join(c.name for c in thesis.validator if not c.ok),
        ),
        RiskCheck(
            name=CheckName.SIZE_NONZERO,
            passed=qty >= 1,
            detail=f"floor({capital:g} x {cfg.risk_pct:g}% / {thesis.risk_per_share:.4f}) = {qty}",
        ),
        RiskCheck(
            name=CheckName.DAILY_LOSS_CAP,
            passed=pf.loss_today + risk_amount <= loss_cap,
            detail=f"loss today {pf.loss_today:.2f} + at the stop {risk_amount:.2f} "
            f"vs cap {loss_cap:.2f} ({lim.max_daily_loss_pct:g}%)",
        ),
        RiskCheck(
            name=CheckName.MARGIN_SUFFICIENT,
            passed=margin <= cash,
            detail=f"needs {margin:.2f} of cash, has {cash:.2f}",
        ),
        RiskCheck(
            name=CheckName.MAX_NOTIONAL_PCT,
            passed=notional <= notional_cap,
            detail=f"notional {notional:.2f} vs {notional_cap:.2f} ({lim.max_notional_pct:g}%)",
        ),
        RiskCheck(
            name=CheckName.MAX_POSITIONS,
            passed=pf.open_positions + 1 <= lim.max_positions,
            detail=f"{pf.open_positions} open + 1 vs max {lim.max_positions}",
        ),
        RiskCheck(
            name=CheckName.EXPOSURE_CAP,
            passed=pf.gross_exposure + notional <= exposure_cap,
            detail=f"exposure {pf.gross_exposure:.2f} + {notional:.2f} vs {exposure_cap:.2f} "
            f"({lim.max_exposure_pct:g}%)",
        ),
    ]
    approved = all(c.passed for c in checks)
    return RiskEngineResult(
        checks=checks,
        size=qty if approved else 0,
        notional=round(notional if approved else 0.0, 6),
        risk_amount=round(risk_amount if approved else 0.0, 6),
        approved=approved,
    )
