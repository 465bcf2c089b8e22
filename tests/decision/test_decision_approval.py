"""Issue 28, item 7: the approval screen (``approval.html`` beside ``report.md``). One offline
page in seed 002's order (analysts with stance bars; debate winner, conviction, rationale and
falsifiers; the thesis with its ATR levels and why; every risk check with ✓/✗; recalled
lessons), every string from the decision escaped. Read twice: with ``html.parser`` (always),
and as Chromium renders it (skipped, saying so, when no Chromium is installed). Also the
book and the rebuttals that ``report.md`` now shows."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from swarm.analyze.approval import (
    APPROVAL_FILE,
    FAIL_MARK,
    PASS_MARK,
    SECTIONS,
    render_approval,
    stance_bar,
)
from swarm.analyze.contracts import (
    ABSTAIN_CONFIDENCE,
    ABSTAIN_MODEL,
    Action,
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    Debate,
    Decision,
    OutcomeTag,
    Point,
    Portfolio,
    Quorum,
    Recalled,
    Risk,
    RiskJudgement,
    Status,
)
from swarm.analyze.debate import debate_rounds, manage
from swarm.analyze.report import render_report
from swarm.analyze.risk import risk_engine
from swarm.analyze.trader import propose

SCRIPT = "<script>document.title='pwned'</script>"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _note(role: AnalystRole, stance: float, conf: float, points: list[Point], **kw) -> AnalystNote:
    return AnalystNote(
        role=role,
        ticker="XYZ",
        as_of="2020-01-02",
        stance=stance,
        confidence=conf,
        points=points,
        **kw,
    )


def _abstain(role: AnalystRole) -> AnalystNote:
    return AnalystNote(
        role=role,
        ticker="XYZ",
        as_of="2020-01-02",
        abstained=True,
        confidence=ABSTAIN_CONFIDENCE,
        model_used=ABSTAIN_MODEL,
        summary=f"Abstained: no {role.value} source offline.",
    )


def make_decision(*, portfolio: Portfolio | None = None) -> Decision:
    """A small decision made by the desk's own rules: a bearish market note with a bullish
    point, a bullish sentiment note, two abstentions; two debate rounds; an ATR-anchored
    short; the engine's seven checks. The market note carries untrusted markup."""
    cfg = AnalysisConfig(portfolio=portfolio or Portfolio())
    notes = [
        _note(
            AnalystRole.MARKET,
            -0.6,
            0.7,
            [
                Point(name="trend", stance=-0.9, confidence=0.9, text="a downtrend"),
                Point(name="momentum", stance=0.4, confidence=0.5, text="oversold"),
            ],
            summary=f"Technical picture bearish {SCRIPT}",
            key_points=["trend: <b>below</b> EMA20 & SMA50"],
        ),
        _note(
            AnalystRole.SENTIMENT,
            0.3,
            0.5,
            [Point(name="ratings", stance=0.5, confidence=0.6, text="two upgrades")],
            summary="Analyst ratings lean bullish",
        ),
        _abstain(AnalystRole.NEWS),
        _abstain(AnalystRole.FUNDAMENTALS),
    ]
    rounds = debate_rounds(notes, 2)
    verdict = manage(notes, rounds=rounds)
    debate = Debate(**verdict.model_dump(), rounds=rounds)
    thesis = propose(verdict.winner, close=100.0, atr=2.0, cfg=cfg, conviction=verdict.conviction)
    engine = risk_engine(thesis, cfg)
    action = Action.SELL if engine.approved else Action.HOLD
    risk = Risk(
        judge=RiskJudgement(action=Action.SELL, rationale="2 of 3 favour SELL."),
        checks={c.name.value: c.passed for c in engine.checks},
        check_details=engine.checks,
        size=engine.size,
        notional=engine.notional,
        risk_amount=engine.risk_amount,
        capital=cfg.capital,
        risk_pct=cfg.risk_pct,
        approved=engine.approved,
        rejected_by=engine.failed,
    )
    return Decision(
        ticker="XYZ",
        date="2020-01-02",
        action=action,
        status=Status.OK if engine.approved else Status.REJECTED,
        reason="every risk check passed" if engine.approved else "rejected by the engine",
        brain="rules",
        analysts=notes,
        quorum=Quorum(required=3, expected=4, notes=4, abstained=2, sided=2, met=True),
        debate=debate,
        trader=thesis,
        risk=risk,
        recalled=[
            Recalled(
                id="r1",
                date="2019-11-01",
                tag=OutcomeTag.FALSIFIED,
                text="XYZ SELL short bear: stopped out <i>fast</i> & hard",
            )
        ],
        config=cfg,
    )


class Page(HTMLParser):
    """The page as a reader sees it: its text (style sheets left out), the tags it opens and
    the order of its sections."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.sections: list[str] = []
        self._skip = 0
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "section":
            self.sections.append(dict(attrs).get("id") or "")
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.chunks).split())


def expected_in_order(d: Decision) -> list[str]:
    """What a reader must meet, in seed 002's order."""
    db, t = d.debate, d.trader
    assert db is not None and t is not None
    return [
        "XYZ · 2020-01-02",
        "Analysts",
        "market",
        "stance -0.60",
        "sentiment",
        "stance +0.30",
        "news",
        "abstained",
        "fundamentals",
        "abstained",
        "Debate",
        f"Winner: {db.winner.value}",
        f"conviction {db.conviction:.2f}",
        "Rationale: Confidence-weighted stances",
        "Falsifiers:",
        db.falsifiers[0],
        "Thesis",
        f"entry {t.entry:.2f}",
        f"stop {t.stop:.2f}",
        f"target {t.target:.2f}",
        "Why these levels:",
        f"= 2.00 x ATR14 {t.atr:.2f}",
        "= 2.00R",
        "Risk",
        *(f"{PASS_MARK if c.passed else FAIL_MARK} {c.name.value}" for c in d.risk.check_details),
        "Recalled lessons",
        "2019-11-01 Falsified",
        "stopped out <i>fast</i> & hard",
        "Legend",
        "stance",
    ]


def assert_in_order(text: str, wanted: list[str]) -> None:
    at = 0
    for w in wanted:
        found = text.find(w, at)
        assert found >= 0, f"{w!r} not found after position {at}: …{text[at : at + 300]}…"
        at = found + len(w)


@pytest.fixture(scope="module")
def decision() -> Decision:
    return make_decision()


# --------------------------------------------------------------------------- html.parser


@pytest.mark.unit
def test_the_page_reads_in_seed_002s_order(decision):
    assert decision.action == Action.SELL and decision.risk.approved  # the fixture trades
    page = Page(render_approval(decision))
    assert page.sections == [*SECTIONS, "legend"]
    assert_in_order(page.text, expected_in_order(decision))
    assert page.text.count(PASS_MARK) >= 7 + len(decision.trader.validator)


@pytest.mark.unit
def test_untrusted_text_is_shown_as_text_and_nothing_is_fetched(decision):
    markup = render_approval(decision)
    page = Page(markup)
    assert SCRIPT in page.text and "trend: <b>below</b> EMA20 & SMA50" in page.text
    tags = {tag for tag, _ in page.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "b", "i"}, tags
    assert not [a for _, attrs in page.tags for a in ("src", "href") if a in attrs]
    assert "http://" not in markup and "https://" not in markup and "@import" not in markup


@pytest.mark.unit
@pytest.mark.parametrize(
    ("stance", "left", "width", "side"),
    [
        (-0.8, 10.0, 40.0, "bear"),
        (0.5, 50.0, 25.0, "bull"),
        (0.0, 50.0, 0.0, "bull"),
        (1.7, 50.0, 50.0, "bull"),
    ],
)
def test_stance_bars_are_css_widths_from_the_middle(stance, left, width, side):
    bar = stance_bar(stance)
    assert f'class="fill {side}" style="left:{left:.1f}%;width:{width:.1f}%"' in bar


@pytest.mark.unit
def test_a_hold_shows_its_checks_but_no_levels(decision):
    hold = decision.model_copy(update={"action": Action.HOLD, "reason": "judge held"})
    t = hold.trader
    text = Page(render_approval(hold)).text
    thesis = text[text.index("Thesis") : text.index("Risk judge")]
    assert "not traded (HOLD): no entry, stop or target" in thesis
    assert f"{t.stop:.2f}" not in thesis and f"{t.target:.2f}" not in thesis
    assert "Why these levels" not in text and "HOLD" in text.split("Analysts")[0]


@pytest.mark.unit
def test_a_failed_check_is_a_cross_and_the_book_is_shown():
    full = Portfolio(open_positions=10, gross_exposure=60_000.0, cash=40_000.0, loss_today=100)
    d = make_decision(portfolio=full)
    assert d.status == Status.REJECTED and "max_positions" in d.risk.rejected_by
    text = Page(render_approval(d)).text
    assert f"{FAIL_MARK} max_positions" in text and f"{PASS_MARK} size_nonzero" in text
    assert "Rejected by: max_positions" in text
    assert "Checked against the book: 10 open positions, gross exposure 60,000.00" in text


@pytest.mark.unit
def test_why_the_levels_names_the_model_proposal_code_overwrote(decision):
    t = decision.trader
    anchored = {
        "kind": "trader_anchored",
        "proposed_stop": 107.8,
        "proposed_target": 97.9,
        "stop": t.stop,
        "target": t.target,
        "atr": t.atr,
        "tick": 0.01,
    }
    d = decision.model_copy(update={"llm_events": [anchored]})
    assert (
        "the model proposed stop 107.80 and target 97.90; code set the ATR anchors instead"
        in Page(render_approval(d)).text
    )


@pytest.mark.unit
def test_report_md_shows_the_rebuttals_and_the_book(decision):
    text = render_report(decision)
    rounds = decision.debate.rounds
    assert len(rounds) == 2 and rounds[1].bull.answered is not None
    debate = text[text.index("## Debate") :]
    for t in (rounds[1].bull, rounds[1].bear):
        if t.answered:
            word = "rebutted" if t.rebutted else "stands"
            assert f"round 2, {t.side.value} (rules), answers {t.answered}: {word}" in debate
    fell = sorted({t.answered for t in (rounds[1].bull, rounds[1].bear) if t.rebutted})
    assert f"Rebutted in the debate: {', '.join(fell) or 'nothing'}." in debate
    assert "Checked against the book: 0 open positions" in text.split("## Analysts")[0]


# --------------------------------------------------------------------------- Chromium


def _browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


@pytest.mark.integration
@pytest.mark.skipif(
    _browser() is None,
    reason="no Chromium binary on PATH (Debian: apt-get install chromium): the page is read "
    "with html.parser only",
)
def test_chromium_renders_the_page_in_order(decision, tmp_path: Path):
    page_file = tmp_path / APPROVAL_FILE
    page_file.write_text(render_approval(decision), encoding="utf-8")
    done = subprocess.run(
        [
            _browser(),
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    dom = Page(done.stdout)  # the DOM after Chromium parsed the page (and ran any script)
    assert dom.sections == [*SECTIONS, "legend"]
    assert_in_order(dom.text, expected_in_order(decision))
    assert SCRIPT in dom.text and "pwned" not in done.stdout.split("</title>")[0]


@pytest.mark.unit
def test_a_degraded_decision_still_has_every_section(decision):
    degraded = decision.model_copy(
        update={
            "action": Action.HOLD,
            "status": Status.DEGRADED,
            "reason": "quorum not met",
            "debate": None,
            "trader": None,
            "recalled": [],
            "risk": Risk(capital=100_000.0, risk_pct=1.0),
        }
    )
    page = Page(render_approval(degraded))
    assert page.sections == [*SECTIONS, "legend"]
    assert_in_order(
        page.text,
        [
            "HOLD (DEGRADED)",
            "No debate",
            "No thesis",
            "The risk engine did not run",
            "Nothing recalled",
        ],
    )
