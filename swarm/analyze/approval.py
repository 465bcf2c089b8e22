"""``approval.html``: the decision as one page a person reads before approving the order.

Beside ``report.md`` and made from the same typed :class:`Decision`, in seed 002's order: the
analysts' notes with stance bars; the debate's winner, conviction, rationale and falsifiers;
the thesis with its ATR-derived levels and why they are where they are; every risk check with
✓/✗; the lessons recalled from past reviews. It must open offline and show what it was given:
one file, inline CSS, no script, no external asset, and every string from the decision
escaped (headlines, notes and model answers are untrusted text, so a ``<script>`` in a note
shows as text). A HOLD shows no levels, as on ``report.md``: levels on a screen read as an order.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from swarm.analyze.contracts import Action, AnalystNote, Decision, Direction, Side
from swarm.analyze.report import LEGEND, book_line, quorum_line, turn_answer

APPROVAL_FILE = "approval.html"
PASS_MARK, FAIL_MARK = "✓", "✗"

# Section ids in page order: the tests read the page in this order.
SECTIONS = ("analysts", "debate", "thesis", "risk", "lessons")

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem;margin-bottom:.2rem}h2{font-size:1.1rem;border-bottom:1px solid #ccc;margin-top:1.6rem}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:.25rem .4rem;
text-align:left;vertical-align:top}.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.order{font-size:1.15rem}.warn{background:#fff3cd;border:1px solid #e0b400;padding:.5rem}
.bar{position:relative;width:12rem;height:.8rem;background:#eee;border-radius:2px}
.bar .mid{position:absolute;left:50%;top:0;bottom:0;border-left:1px solid #888}
.bar .fill{position:absolute;top:0;bottom:0}.bull{background:#2e8b57}.bear{background:#c0392b}
.ok{color:#2e8b57;font-weight:bold}.fail{color:#c0392b;font-weight:bold}.muted{color:#777}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _mark(ok: bool) -> str:
    cls, mark, word = ("ok", PASS_MARK, "pass") if ok else ("fail", FAIL_MARK, "fail")
    return f'<span class="{cls}" title="{word}">{mark}</span>'


def stance_bar(stance: float) -> str:
    """A bar centred on 0: a bullish stance fills right of the middle, a bearish one left,
    half the bar at ±1. Pure CSS widths, so it draws offline and in print."""
    s = max(-1.0, min(1.0, stance))
    width = 50.0 * abs(s)
    left = 50.0 if s >= 0 else 50.0 - width
    side = "bull" if s >= 0 else "bear"
    return (
        f'<div class="bar" role="img" aria-label="stance {s:+.2f}"><span class="mid"></span>'
        f'<span class="fill {side}" style="left:{left:.1f}%;width:{width:.1f}%"></span></div>'
    )


def _items(lines: Iterable[str]) -> str:
    body = "".join(f"<li>{_e(x)}</li>" for x in lines)
    return f"<ul>{body}</ul>" if body else ""


def _note_row(n: AnalystNote) -> str:
    gap = "n/a" if n.expectation_gap is None else f"{n.expectation_gap:+.1%}"
    state = "abstained" if n.abstained else f"stance {n.stance:+.2f}"
    points = "" if n.abstained else _items(n.key_points)
    row = (
        f"<tr><th>{_e(n.role.value)}</th><td>{stance_bar(n.stance)}</td>"
        f'<td class="num">{_e(state)} · confidence {n.confidence:.2f} · gap {gap}</td>'
        f'<td>{_e(n.summary)} <span class="muted">({_e(n.time_horizon.value)} · '
        f"{_e(n.model_used)})</span></td></tr>"
    )
    return row + (f'<tr><td></td><td colspan="3">{points}</td></tr>' if points else "")


def _header(d: Decision) -> list[str]:
    out = [f"<h1>{_e(d.ticker)} · {_e(d.date)} · {_e(d.action.value)} ({_e(d.status.value)})</h1>"]
    m = d.masking or {}
    if m.get("banner"):
        out.append(
            f'<p class="warn">Warning: {_e(m["banner"])} (an unmasked LLM run on data '
            f"before the model's cutoff {_e(m.get('cutoff') or 'unknown')}).</p>"
        )
    if (m.get("leaks") or {}).get("contaminated"):
        out.append(
            '<p class="warn">CONTAMINATED: the model named what it was not shown; '
            "do not approve.</p>"
        )
    order = d.action.value + (f" {d.risk.size} shares" if d.action != Action.HOLD else "")
    out.append(f'<p class="order"><strong>{_e(order)}</strong> · {_e(d.reason)}</p>')
    out.append(f'<p class="muted">brain {_e(d.brain)}</p>')
    return out


def _analysts(d: Decision) -> list[str]:
    return [
        f'<section id="analysts"><h2>Analysts</h2><p>{_e(quorum_line(d))}</p>',
        "<table>",
        *(_note_row(n) for n in d.analysts),
        "</table></section>",
    ]


def _debate(d: Decision) -> list[str]:
    db = d.debate
    out = ['<section id="debate"><h2>Debate</h2>']
    if db is None:
        return [*out, "<p>No debate: the quorum was not met.</p></section>"]
    winner = "no side (too close to call)" if db.winner == Side.NONE else db.winner.value
    out += [
        f"<p>Winner: <strong>{_e(winner)}</strong> · conviction "
        f"<strong>{db.conviction:.2f}</strong> (proposed {db.conviction_proposed:.2f}, "
        f"opposition {db.opposition:.0%}) · {_e(db.model_used)}</p>",
        f"<p>Rationale: {_e(db.rationale)}</p>",
        "<p>Falsifiers:</p>" + (_items(db.falsifiers) or "<p>none (no side won)</p>"),
    ]
    if db.key_disagreements:
        out.append("<p>Key disagreements:</p>" + _items(db.key_disagreements))
    rows = []
    for rnd in db.rounds:
        for t in (rnd.bull, rnd.bear):
            answer = turn_answer(t)
            rows.append(
                f'<tr><td class="num">round {rnd.round}</td><th>{_e(t.side.value)}</th>'
                f"<td>{_e(answer)}</td><td>{_e(t.argument)}</td></tr>"
            )
    if rows:
        out += ["<p>The rounds:</p><table>", *rows, "</table>"]
    return [*out, "</section>"]


def level_reasons(d: Decision) -> list[str]:
    """Why the entry, stop and target are where they are, with the numbers: the ATR anchors
    (or the sub-tick exception), from the thesis and the run's config."""
    t, cfg = d.trader, d.config
    if t is None:
        return []
    risk = t.risk_per_share
    away = "below" if t.direction == Direction.LONG else "above"
    toward = "above" if away == "below" else "below"
    atrs = f"{risk / t.atr:.2f}" if t.atr > 0 else "n/a"
    r_mult = f"{abs(t.target - t.entry) / risk:.2f}" if risk > 0 else "n/a"
    out = [
        f"entry {t.entry:.2f}: the close of {d.date}, the last bar read",
        f"stop {t.stop:.2f}: {risk:.2f} {away} the entry = {atrs} x ATR{t.atr_period} "
        f"{t.atr:.2f} (the rule: {cfg.stop_atr:g} ATR; the validator allows up to "
        f"{cfg.max_stop_atr:g})",
        f"target {t.target:.2f}: {abs(t.target - t.entry):.2f} {toward} the entry = {r_mult}R "
        f"(the rule: {cfg.reward_risk:g}R, R = the risk per share {risk:.2f})",
        f"horizon {t.horizon_days} bars for the thesis to play out",
    ]
    for ev in d.llm_events:
        if ev.get("kind") == "trader_anchored":
            out.append(
                f"the model proposed stop {ev['proposed_stop']:.2f} and target "
                f"{ev['proposed_target']:.2f}; code set the ATR anchors instead"
            )
        elif ev.get("kind") == "trader_subtick_kept":
            out.append(
                f"ATR {ev['atr']:.4f} is below one tick ({ev['tick']:g}): an anchor "
                "cannot be quoted, so the model's stop and target were kept"
            )
    return out


def _thesis(d: Decision) -> list[str]:
    t = d.trader
    out = ['<section id="thesis"><h2>Thesis</h2>']
    if t is None:
        return [*out, "<p>No thesis: the desk stopped before the trader.</p></section>"]
    if d.action == Action.HOLD:  # not traded: its checks, never its levels (nor their details)
        lean = t.direction.value if t.valid else "no valid"
        marks = " · ".join(f"{_mark(c.ok)} {_e(c.name)}" for c in t.validator)
        return [
            *out,
            f"<p>{_e(lean)} thesis, not traded (HOLD): no entry, stop or target.</p>",
            f"<p>Validator: {marks}</p>",
            "</section>",
        ]
    checks = "".join(
        f"<tr><td>{_mark(c.ok)}</td><th>{_e(c.name)}</th><td>{_e(c.detail)}</td></tr>"
        for c in t.validator
    )
    validator = f"<p>Validator:</p><table>{checks}</table>"
    out += [
        f"<p><strong>{_e(t.direction.value)}</strong> · entry <strong>{t.entry:.2f}</strong> · "
        f"stop <strong>{t.stop:.2f}</strong> · target <strong>{t.target:.2f}</strong> · "
        f"ATR{t.atr_period} {t.atr:.2f} · {'valid' if t.valid else 'INVALID'} "
        f"({_e(t.model_used)})</p>",
        "<p>Why these levels:</p>" + _items(level_reasons(d)),
        f"<p>Trader: {_e(t.rationale)}</p>",
        validator,
    ]
    return [*out, "</section>"]


def _risk(d: Decision) -> list[str]:
    r = d.risk
    out = ['<section id="risk"><h2>Risk</h2>']
    if r.judge is not None:
        out.append(
            f"<p>Risk judge ({_e(r.judge.model_used)}): <strong>"
            f"{_e(r.judge.action.value)}</strong>. {_e(r.judge.rationale)}</p>"
        )
    turns = [
        f"round {rnd.round}, {t.stance.value} (favours {t.favours.value}): {t.argument}"
        for rnd in r.rounds
        for t in rnd.turns
    ]
    if turns:
        out.append("<p>Risk team:</p>" + _items(turns))
    out.append(f"<p>{_e(book_line(d))}</p>")
    if not r.check_details:
        return [*out, "<p>The risk engine did not run: nothing to size.</p></section>"]
    rows = "".join(
        f"<tr><td>{_mark(c.passed)}</td><th>{_e(c.name.value)}</th><td>{_e(c.detail)}</td></tr>"
        for c in r.check_details
    )
    out.append(f"<table>{rows}</table>")
    if r.approved:
        out.append(
            f'<p class="num">Size {r.size} shares, notional {r.notional:,.2f}, '
            f"{r.risk_amount:,.2f} at the stop ({r.risk_pct:g}% of capital targeted).</p>"
        )
    elif r.rejected_by:
        out.append(f"<p>Rejected by: {_e(', '.join(c.value for c in r.rejected_by))}.</p>")
    return [*out, "</section>"]


def _lessons(d: Decision) -> list[str]:
    out = ['<section id="lessons"><h2>Recalled lessons</h2>']
    if not d.recalled:
        return [*out, "<p>Nothing recalled for this setup.</p></section>"]
    rows = "".join(
        f'<tr><td class="num">{_e(x.date)}</td><th>{_e(x.tag.value if x.tag else "")}'
        f"</th><td>{_e(x.text)}</td></tr>"
        for x in d.recalled
    )
    return [*out, f"<table>{rows}</table></section>"]


def _legend() -> list[str]:
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in LEGEND)
    return [f'<section id="legend"><h2>Legend</h2><dl>{rows}</dl></section>']


def render_approval(d: Decision) -> str:
    """The page as one self-contained HTML string."""
    title = f"Approve? {d.ticker} {d.date} {d.action.value}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        *_header(d),
        *_analysts(d),
        *_debate(d),
        *_thesis(d),
        *_risk(d),
        *_lessons(d),
        *_legend(),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
