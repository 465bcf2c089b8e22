"""``report.md``: the decision as an approval screen — the order first, then why."""

from __future__ import annotations

from swarm.analyze.contracts import Action, Decision, Review


def _yes(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _order(d: Decision) -> list[str]:
    t, r = d.trader, d.risk
    rows = [("Action", f"**{d.action.value}**" + (f" {r.size}" if d.action != Action.HOLD else "")),
            ("Status", d.status.value), ("Why", d.reason)]  # fmt: skip
    if t is not None:
        rows += [
            ("Direction", t.direction.value),
            ("Entry / stop / target", f"{t.entry:.2f} / {t.stop:.2f} / {t.target:.2f}"),
            ("Risk per share", f"{t.risk_per_share:.2f} ({t.risk_per_share / t.atr:.2f} x ATR{t.atr_period} "
                               f"{t.atr:.2f})" if t.atr else f"{t.risk_per_share:.2f}"),
            ("Horizon", f"{t.horizon_days} bars"),
        ]  # fmt: skip
    if d.action != Action.HOLD:
        rows += [
            ("Size", f"{r.size} shares, notional {r.notional:,.2f} "
                     f"({100 * r.notional / r.capital:.1f}% of capital)"),
            ("Risk at the stop", f"{r.risk_amount:,.2f} ({100 * r.risk_amount / r.capital:.2f}% "
                                 f"of {r.capital:,.0f}; target {r.risk_pct:g}%)"),
        ]  # fmt: skip
    if d.debate is not None:
        rows.append(("Conviction", f"{d.debate.conviction:.2f} (proposed "
                                   f"{d.debate.conviction_proposed:.2f}, opposition "
                                   f"{d.debate.opposition:.0%})"))  # fmt: skip
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
        text += (f"; leak audit: {leaks['leaked']} of {leaks['audited']} answers rejected "
                 f"(rate {leaks['leak_rate']:.1%}, contaminated above "
                 f"{leaks['contaminated_above']:.0%})")  # fmt: skip
    return text


def warnings(m: dict | None) -> list[str]:
    """The banners an LLM decision carries above everything else."""
    out = []
    if m and m.get("banner"):
        out.append(f"> **Warning: {m['banner']}** (an unmasked LLM run on data before the "
                   f"model's cutoff {m.get('cutoff') or 'unknown'}).")  # fmt: skip
    if m and (m.get("leaks") or {}).get("contaminated"):
        out.append("> **CONTAMINATED: the model named what it was not shown; do not approve.**")
    return out + ([""] if out else [])


def render_report(d: Decision) -> str:
    lines = [f"# {d.ticker} · {d.date} · {d.action.value} ({d.status.value})", ""]
    lines += warnings(d.masking)
    lines += _order(d) + [""]
    r = d.risk
    if r.check_details:
        lines += ["## Risk engine", "", "| check | result | detail |", "|---|---|---|"]
        lines += [
            f"| {c.name.value} | {_yes(c.passed)} | {_cell(c.detail)} |" for c in r.check_details
        ]
        if r.rejected_by:
            lines += ["", f"Rejected by: {', '.join(c.value for c in r.rejected_by)}."]
        lines.append("")
    q = d.quorum
    lines += [f"## Analysts (quorum {q.notes}/{q.expected}, needs {q.required}; "
              f"{q.abstained} abstained{'; failed: ' + ', '.join(f.value for f in q.failed) if q.failed else ''})",
              "", "| analyst | stance | confidence | horizon | model | summary |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for n in d.analysts:
        lines.append(f"| {n.role.value} | {n.stance:+.2f} | {n.confidence:.2f} | "
                     f"{n.time_horizon.value} | {n.model_used} | {_cell(n.summary)} |")  # fmt: skip
    for n in d.analysts:
        if n.key_points and not n.abstained:
            lines += ["", f"**{n.role.value}**", ""] + [f"- {_cell(p)}" for p in n.key_points]
    lines.append("")
    if d.debate is not None:
        db = d.debate
        lines += [f"## Debate: {db.winner.value} wins", ""]
        for rnd in db.rounds:
            lines += [f"- round {rnd.round}, bull ({rnd.bull.model_used}): {_cell(rnd.bull.argument)}",
                      f"- round {rnd.round}, bear ({rnd.bear.model_used}): {_cell(rnd.bear.argument)}"]  # fmt: skip
        lines += ["", f"Research manager ({db.model_used}): {_cell(db.rationale)}", ""]
        if db.key_disagreements:
            lines += ["Key disagreements: " + "; ".join(db.key_disagreements), ""]
        if db.falsifiers:
            lines += ["Falsifiers: " + "; ".join(db.falsifiers), ""]
    if d.trader is not None:
        t = d.trader
        lines += [f"## Trader ({t.model_used}): {'valid' if t.valid else 'INVALID'} thesis", "",
                  _cell(t.rationale), "", "| validator check | result | detail |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {c.name} | {_yes(c.ok)} | {_cell(c.detail)} |" for c in t.validator]
        lines.append("")
    if r.rounds:
        lines += ["## Risk team", ""]
        for rnd in r.rounds:
            lines += [f"- round {rnd.round}, {t.stance.value} ({t.model_used}, favours "
                      f"{t.favours.value}): {_cell(t.argument)}" for t in rnd.turns]  # fmt: skip
        if r.judge is not None:
            lines += ["", f"Risk judge ({r.judge.model_used}): **{r.judge.action.value}**. "
                          f"{_cell(r.judge.rationale)}"]  # fmt: skip
        lines.append("")
    lines += ["## Recalled from memory", ""]
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
    data = d.data
    lines += ["## Data", "", f"{data.get('n_bars')} bars {data.get('first_bar')}..{data.get('last_bar')} "
              f"(sha256 {str(data.get('sha256'))[:12]}…); nothing after {d.date} was read.", ""]  # fmt: skip
    return "\n".join(lines)


def render_review(rv: Review) -> str:
    return "\n".join([
        f"# Review: {rv.ticker} {rv.date} · {rv.tag.value}", "",
        "| | |", "|---|---|",
        f"| Decision | {rv.action.value} ({rv.direction.value}) |",
        f"| Horizon | {rv.horizon_days} bars, ended {rv.horizon_end} |",
        f"| Outcome | {rv.outcome.value} -> **{rv.tag.value}** |",
        f"| Exit | {rv.exit_price:.2f}: {_cell(rv.exit_reason)} |",
        f"| R multiple | {'n/a' if rv.r_multiple is None else f'{rv.r_multiple:+.2f}'} |",
        f"| Move | {rv.move_atr:+.2f} ATR |", "",
        f"## Critique ({rv.model_used})", "", rv.critique, "",
        "## Lessons", "", *(f"- {x}" for x in rv.lessons), "",
        f"Stored in memory: {'yes' if rv.stored_in_memory else 'no (memory off or unavailable)'}.", "",
    ])  # fmt: skip
