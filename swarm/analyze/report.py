"""``report.md``: the decision as an approval screen — the order first, then why.

A HOLD shows no direction, entry, stop or target: it sets none, and levels on a screen read
as an order. Every unit the screen uses is defined in its legend (:data:`LEGEND`).
"""

from __future__ import annotations

from swarm.analyze.contracts import Action, DebateTurn, Decision, Outcome, Review

# One line per unit the screens print; the report and the review both end with it.
LEGEND = (
    ("stance", "an analyst's lean, -1 (bearish) .. +1 (bullish); within +/-0.05 it takes no side"),
    ("confidence", "how much an analyst trusts its own stance, 0 .. 1 (an abstention: 0.15)"),
    ("took a side", "an analyst that did not abstain, has confidence > 0 and |stance| > 0.05"),
    ("opposition", "of the analysts that took a side, the share that opposes the winner"),
    (
        "conviction",
        "the research manager's confidence in the winner, 0 .. 1, after code cuts "
        "it by 60% x opposition",
    ),
    (
        "expectation gap",
        "what came in vs what was expected, a signed fraction (EPS surprise; "
        "close vs the drift band's forecast for today)",
    ),
    ("ATR14", "average true range over 14 bars, in price units; stops sit 2 x ATR away"),
    ("R", "a trade's result in multiples of its risk |entry - stop|; a 2R target pays twice it"),
    ("risk %", "capital lost at the stop, % of the account"),
    ("P&L", "profit or loss in the account currency, size x the move to the exit, before costs"),
    ("move (ATR)", "the close's move from the decision's close to the horizon, in ATRs"),
)


def _yes(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def legend() -> list[str]:
    """The legend section: what each label of the report means."""
    return ["## Legend", "", *(f"- **{k}**: {v}" for k, v in LEGEND), ""]


def quorum_line(d: Decision) -> str:
    """'4/4 answered, 1 took a side': an abstention answers, only a stance takes a side."""
    q = d.quorum
    line = (
        f"{q.notes}/{q.expected} answered, {q.sided} took a side, {q.abstained} abstained; "
        f"quorum needs {q.required} answers ({'met' if q.met else 'NOT met'})"
    )
    return line + (f"; failed: {', '.join(f.value for f in q.failed)}" if q.failed else "")


def book_line(d: Decision) -> str:
    """The account the engine checked the trade against (``--book``, else empty)."""
    pf, r = d.config.portfolio, d.risk
    cash = f"{r.capital:,.2f} (the capital)" if pf.cash is None else f"{pf.cash:,.2f}"
    return (
        f"Checked against the book: {pf.open_positions} open positions, gross exposure "
        f"{pf.gross_exposure:,.2f}, cash {cash}, loss today {pf.loss_today:,.2f}, capital "
        f"{r.capital:,.2f}."
    )


def turn_answer(t: DebateTurn) -> str:
    """What a rebuttal answered and whether it fell: '' for an opening."""
    if t.answered is None:
        return ""
    return f"answers {t.answered}: {'rebutted' if t.rebutted else 'stands'}"


def debate_lines(d: Decision) -> list[str]:
    """Each round's bull and bear turns, with the point each rebuttal answered and whether it
    fell, then the points the debate rebutted (they lose pull in the manager's weighing)."""
    if d.debate is None:
        return []
    lines, down = [], []
    for rnd in d.debate.rounds:
        for t in (rnd.bull, rnd.bear):
            answer = turn_answer(t)
            lines.append(
                f"- round {rnd.round}, {t.side.value} ({t.model_used})"
                + (f", {answer}" if answer else "")
                + f": {_cell(t.argument)}"
            )
            if t.rebutted and t.answered and t.answered not in down:
                down.append(t.answered)
    if len(d.debate.rounds) > 1:
        lines += ["", "Rebutted in the debate: " + (", ".join(sorted(down)) or "nothing") + "."]
    return lines


def _order(d: Decision) -> list[str]:
    t, r = d.trader, d.risk
    rows = [
        ("Action", f"**{d.action.value}**" + (f" {r.size}" if d.action != Action.HOLD else "")),
        ("Status", d.status.value),
        ("Why", d.reason),
    ]
    if t is not None and d.action != Action.HOLD:
        rows += [
            ("Direction", t.direction.value),
            ("Entry / stop / target", f"{t.entry:.2f} / {t.stop:.2f} / {t.target:.2f}"),
            (
                "Risk per share",
                f"{t.risk_per_share:.2f} ({t.risk_per_share / t.atr:.2f} x ATR{t.atr_period} "
                f"{t.atr:.2f})"
                if t.atr
                else f"{t.risk_per_share:.2f}",
            ),
            ("Horizon", f"{t.horizon_days} bars"),
        ]
    if d.action != Action.HOLD:
        rows += [
            (
                "Size",
                f"{r.size} shares, notional {r.notional:,.2f} "
                f"({100 * r.notional / r.capital:.1f}% of capital)",
            ),
            (
                "Risk at the stop",
                f"{r.risk_amount:,.2f} ({100 * r.risk_amount / r.capital:.2f}% "
                f"of {r.capital:,.0f}; target {r.risk_pct:g}%)",
            ),
        ]
    if d.debate is not None:
        rows.append(
            (
                "Conviction",
                f"{d.debate.conviction:.2f} (proposed "
                f"{d.debate.conviction_proposed:.2f}, opposition "
                f"{d.debate.opposition:.0%})",
            )
        )
    rows.append(("Brain", d.brain))
    if d.masking is not None:
        rows.append(("Masking", masking_line(d.masking)))
    return ["| | |", "|---|---|", *(f"| {k} | {_cell(v)} |" for k, v in rows)]


def masking_line(m: dict) -> str:
    """Masked or not, the cutoff used and the leak counts: one line of the approval screen."""
    state = "masked" if m.get("masked") else "NOT masked"
    cutoff = m.get("cutoff") or "unknown (assumed after all data)"
    text = f"{state} (--mask {m.get('mode')}); model cutoff {cutoff} ({m.get('cutoff_source')})"
    leaks = m.get("leaks")
    if leaks:
        text += (
            f"; leak audit: {leaks['leaked']} of {leaks['audited']} answers rejected "
            f"(rate {leaks['leak_rate']:.1%}, contaminated above "
            f"{leaks['contaminated_above']:.0%})"
        )
    return text


def warnings(m: dict | None) -> list[str]:
    """The banners an LLM decision carries above everything else."""
    out = []
    if m and m.get("banner"):
        out.append(
            f"> **Warning: {m['banner']}** (an unmasked LLM run on data before the "
            f"model's cutoff {m.get('cutoff') or 'unknown'})."
        )
    if m and (m.get("leaks") or {}).get("contaminated"):
        out.append("> **CONTAMINATED: the model named what it was not shown; do not approve.**")
    return out + ([""] if out else [])


def render_report(d: Decision) -> str:
    """The decision's markdown: order, risk checks, analysts, debate, trader, risk team,
    memory, LLM fallbacks and the data read."""
    lines = [f"# {d.ticker} · {d.date} · {d.action.value} ({d.status.value})", ""]
    lines += warnings(d.masking)
    lines += _order(d) + [""]
    lines += _risk_engine_lines(d)
    lines += _analyst_lines(d)
    lines += _debate_section(d)
    lines += _trader_lines(d)
    lines += _risk_team_lines(d)
    lines += _recalled_and_llm_lines(d)
    data = d.data
    lines += [
        "## Data",
        "",
        f"{data.get('n_bars')} bars {data.get('first_bar')}..{data.get('last_bar')} "
        f"(sha256 {str(data.get('sha256'))[:12]}…); nothing after {d.date} was read.",
        "",
    ]
    return "\n".join(lines + legend())


def _risk_engine_lines(d: Decision) -> list[str]:
    """The risk engine's checks as a table, and what rejected the order (none without checks)."""
    lines: list[str] = []
    r = d.risk
    if r.check_details:
        lines += [
            "## Risk engine",
            "",
            book_line(d),
            "",
            "| check | result | detail |",
            "|---|---|---|",
        ]
        lines += [
            f"| {c.name.value} | {_yes(c.passed)} | {_cell(c.detail)} |" for c in r.check_details
        ]
        if r.rejected_by:
            lines += ["", f"Rejected by: {', '.join(c.value for c in r.rejected_by)}."]
        lines.append("")
    return lines


def _analyst_lines(d: Decision) -> list[str]:
    """One table row per analyst, then the key points of those who did not abstain."""
    lines = [
        f"## Analysts ({quorum_line(d)})",
        "",
        "| analyst | stance | confidence | expectation gap | horizon | model | summary |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in d.analysts:
        gap = "n/a" if n.expectation_gap is None else f"{n.expectation_gap:+.1%}"
        lines.append(
            f"| {n.role.value} | {n.stance:+.2f} | {n.confidence:.2f} | {gap} | "
            f"{n.time_horizon.value} | {n.model_used} | {_cell(n.summary)} |"
        )
    for n in d.analysts:
        if n.key_points and not n.abstained:
            lines += ["", f"**{n.role.value}**", ""] + [f"- {_cell(p)}" for p in n.key_points]
    lines.append("")
    return lines


def _debate_section(d: Decision) -> list[str]:
    """The bull/bear debate, its winner and the research manager's verdict (none without one)."""
    lines: list[str] = []
    if d.debate is not None:
        db = d.debate
        lines += [f"## Debate: {db.winner.value} wins", ""]
        lines += debate_lines(d)
        lines += ["", f"Research manager ({db.model_used}): {_cell(db.rationale)}", ""]
        if db.key_disagreements:
            lines += ["Key disagreements: " + "; ".join(db.key_disagreements), ""]
        if db.falsifiers:
            lines += ["Falsifiers: " + "; ".join(db.falsifiers), ""]
    return lines


def _trader_lines(d: Decision) -> list[str]:
    """The trader's thesis: its validator checks, and its rationale only when it was traded."""
    lines: list[str] = []
    if d.trader is not None and d.action == Action.HOLD:
        t = d.trader  # the thesis was not traded: its checks, never its levels
        lean = t.direction.value if t.valid else "no valid"
        lines += [
            f"## Trader ({t.model_used}): {lean} thesis, not traded (HOLD)",
            "",
            "Validator: " + ", ".join(f"{c.name} {_yes(c.ok)}" for c in t.validator),
            "",
        ]
    elif d.trader is not None:
        t = d.trader
        lines += [
            f"## Trader ({t.model_used}): {'valid' if t.valid else 'INVALID'} thesis",
            "",
            _cell(t.rationale),
            "",
            "| validator check | result | detail |",
            "|---|---|---|",
        ]
        lines += [f"| {c.name} | {_yes(c.ok)} | {_cell(c.detail)} |" for c in t.validator]
        lines.append("")
    return lines


def _risk_team_lines(d: Decision) -> list[str]:
    """The risk team's rounds of argument and the judge's call (none without rounds)."""
    lines: list[str] = []
    r = d.risk
    if r.rounds:
        lines += ["## Risk team", ""]
        for rnd in r.rounds:
            lines += [
                f"- round {rnd.round}, {t.stance.value} ({t.model_used}, favours "
                f"{t.favours.value}): {_cell(t.argument)}"
                for t in rnd.turns
            ]
        if r.judge is not None:
            lines += [
                "",
                f"Risk judge ({r.judge.model_used}): **{r.judge.action.value}**. "
                f"{_cell(r.judge.rationale)}",
            ]
        lines.append("")
    return lines


def _recalled_and_llm_lines(d: Decision) -> list[str]:
    """What memory recalled for the symbol, then the LLM answers accepted and fallen back."""
    lines = ["## Recalled from memory", ""]
    lines += [
        f"- {x.date} {x.tag.value if x.tag else ''}: {_cell(x.text)}" for x in d.recalled
    ] or ["- nothing recalled for this symbol"]
    lines.append("")
    if d.llm_events:
        fb = [e for e in d.llm_events if e.get("kind") == "llm_fallback"]
        ok = [e for e in d.llm_events if e.get("kind") == "llm_accepted"]
        lines += [
            "## LLM",
            "",
            f"{len(ok)} role answers accepted, {len(fb)} fell back to rules.",
            "",
        ]
        lines += [
            f"- fallback {e.get('what')}: {_cell('; '.join(e.get('reasons', []))[:300])}"
            for e in fb
        ]
        lines.append("")
    return lines


def render_review(rv: Review) -> str:
    """review.md: the outcome, the trade's exit and P&L (or why it stood aside) and the lesson."""
    traded = rv.outcome != Outcome.STOOD_ASIDE
    trade_rows = (
        [
            f"| Exit | {rv.exit_price:.2f}: {_cell(rv.exit_reason)} |",
            f"| R multiple | {'n/a' if rv.r_multiple is None else f'{rv.r_multiple:+.2f}'} |",
            f"| P&L | {rv.pnl:+,.2f} ({rv.size} shares, before costs) |",
        ]
        if traded
        else [
            f"| Stood aside | {_cell(rv.exit_reason)} |",
            "| P&L | 0.00 (no trade) |",
        ]
    )
    return "\n".join(
        [
            f"# Review: {rv.ticker} {rv.date} · {rv.tag.value}",
            "",
            "| | |",
            "|---|---|",
            f"| Decision | {rv.action.value}"
            + (f" ({rv.direction.value})" if traded else "")
            + " |",
            f"| Horizon | {rv.horizon_days} bars, ended {rv.horizon_end} |",
            f"| Thesis | {_cell(rv.thesis)} |",
            f"| Outcome | {_cell(rv.result) or rv.outcome.value} |",
            f"| Signal state | **{rv.tag.value}** (of Realized, Strengthened, Weakened, Falsified, "
            "Unknown) |",
            *trade_rows,
            f"| Move | {rv.move_atr:+.2f} ATR |",
            "",
            f"## Critique ({rv.model_used})",
            "",
            rv.critique,
            "",
            "## Lessons",
            "",
            *(f"- {x}" for x in rv.lessons),
            "",
            f"Stored in memory: {'yes' if rv.stored_in_memory else 'no (memory off or unavailable)'}.",
            "",
            *legend(),
        ]
    )
