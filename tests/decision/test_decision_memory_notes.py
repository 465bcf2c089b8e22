"""Memory for every agent (issue 28, item 4): the recalled reviews reach every LLM role's
prompt, and the rules manager's conviction by a fixed, bounded tilt; with nothing recalled
the decision is the one a run without memory makes."""

from __future__ import annotations

import pytest
from conftest import corpus_bars
from decision_fakes import DecisionChat

from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    Direction,
    Outcome,
    OutcomeTag,
    Recalled,
    Review,
    Side,
)
from swarm.analyze.memory_notes import (
    TILT_CAP,
    memory_block,
    memory_numbers,
    memory_tilt,
    review_direction,
    review_text,
    setup_query,
    tilted,
)
from swarm.analyze.nodes import Brain
from swarm.analyze.pipeline import decide
from swarm.llm.client import LLMClient
from swarm.llm.settings import LLMSettings

pytestmark = pytest.mark.unit
CFG = AnalysisConfig()
BLOCK = "Past notes from this desk's memory"


def recalled(tag: OutcomeTag, action: str, direction: str, date: str = "2019-03-04") -> Recalled:
    text = (
        f"[{tag.value}] NVDA decision of {date} ({action}, {direction}): stop hit first. "
        "Lessons: a long at conviction 0.62 was falsified"
    )
    return Recalled(id=f"id-{date}-{tag.value}", date=date, tag=tag, text=text)


FALSIFIED_LONG = recalled(OutcomeTag.FALSIFIED, "BUY", "long")
FALSIFIED_SHORT = recalled(OutcomeTag.FALSIFIED, "SELL", "short")


@pytest.mark.parametrize(
    ("memory", "winner", "tilt"),
    [
        ([], Side.BULL, 0.0),
        ([FALSIFIED_LONG], Side.BULL, -0.10),
        ([FALSIFIED_LONG], Side.BEAR, 0.0),  # a call the other way says nothing of this one
        ([FALSIFIED_SHORT], Side.BEAR, -0.10),
        ([FALSIFIED_LONG], Side.NONE, 0.0),
        ([recalled(OutcomeTag.WEAKENED, "BUY", "long")], Side.BULL, -0.05),
        ([recalled(OutcomeTag.STRENGTHENED, "BUY", "long")], Side.BULL, 0.05),
        ([recalled(OutcomeTag.REALIZED, "SELL", "short")], Side.BEAR, 0.05),
        ([recalled(OutcomeTag.UNKNOWN, "BUY", "long")], Side.BULL, 0.0),
        ([recalled(OutcomeTag.FALSIFIED, "HOLD", "flat")], Side.BULL, 0.0),  # a hold: no call
        # bounded: three falsified longs move it by the cap, not by 0.30
        (
            [
                recalled(OutcomeTag.FALSIFIED, "BUY", "long", d)
                for d in ("2019-01-02", "2019-02-01", "2019-03-01")
            ],
            Side.BULL,
            -TILT_CAP,
        ),
        (
            [
                recalled(OutcomeTag.REALIZED, "BUY", "long", d)
                for d in ("2019-01-02", "2019-02-01", "2019-03-01", "2019-04-01")
            ],
            Side.BULL,
            TILT_CAP,
        ),
    ],
)
def test_memory_tilt_table(memory, winner, tilt):
    got, why = memory_tilt(memory, winner)
    assert got == pytest.approx(tilt)
    assert bool(why) == any(
        r.tag != OutcomeTag.UNKNOWN
        and winner != Side.NONE
        and review_direction(r.text)
        == {Side.BULL: Direction.LONG, Side.BEAR: Direction.SHORT}.get(winner)
        for r in memory
    )


def test_tilted_stays_in_the_unit_interval():
    assert tilted(0.05, -0.10) == 0.0 and tilted(0.95, 0.15) == 1.0 and tilted(0.5, 0.0) == 0.5


def test_review_direction_reads_what_review_text_writes():
    review = Review(
        ticker="NVDA",
        date="2019-06-03",
        action=Action.SELL,
        direction=Direction.SHORT,
        horizon_days=10,
        horizon_end="2019-06-17",
        outcome=Outcome.LOSS,
        tag=OutcomeTag.FALSIFIED,
        exit_price=1.0,
        exit_reason="stop hit first",
        move_atr=1.0,
        critique="",
        lessons=["x"],
    )
    assert review_direction(review_text(review)) == Direction.SHORT
    assert review_direction("Gate failed for momentum") is None


def test_setup_query_names_the_symbol_and_the_lean():
    assert setup_query("nvda", 10.0, 9.0) == "NVDA BUY long bull"
    assert setup_query("NVDA", 9.0, 10.0) == "NVDA SELL short bear"
    assert setup_query("NVDA", 9.0, 9.0) == "NVDA HOLD flat"


def test_the_memory_block_and_its_numbers():
    assert memory_block([]) == "" and memory_numbers([]) == {}
    block = memory_block([FALSIFIED_LONG])
    assert block.startswith(BLOCK) and FALSIFIED_LONG.text in block
    assert 0.62 in memory_numbers([FALSIFIED_LONG]).values()


def test_no_memory_decides_as_before_and_a_falsified_call_lowers_the_winners_conviction():
    bars = corpus_bars("NVDA")
    plain = decide("NVDA", "2019-06-03", bars, CFG)
    assert decide("NVDA", "2019-06-03", bars, CFG, recalled=[]) == plain
    assert plain.debate.winner == Side.BEAR  # the desk sold NVDA that day
    other_way = decide("NVDA", "2019-06-03", bars, CFG, recalled=[FALSIFIED_LONG])
    assert other_way.debate.conviction == plain.debate.conviction  # a long says nothing here
    burnt = decide("NVDA", "2019-06-03", bars, CFG, recalled=[FALSIFIED_SHORT])
    assert burnt.debate.conviction_proposed == pytest.approx(
        plain.debate.conviction_proposed - 0.10
    )
    assert burnt.debate.conviction < plain.debate.conviction
    assert "Memory tilts the proposed conviction by -0.10" in burnt.debate.rationale


def test_every_llm_role_sees_the_recalled_notes(tmp_path):
    settings = LLMSettings(
        provider="openai-compatible",
        quick_model="fake-quick",
        deep_model="fake-deep",
        base_url="http://127.0.0.1:1/v1",
        structured="function_calling",
    )
    chat = DecisionChat(messages=iter([]), mode="good")
    chat.calls = []
    client = LLMClient(settings, cache_dir=tmp_path / "cache", model_factory=lambda s, m: chat)
    bars = corpus_bars("NVDA").loc[:"2019-06-03"]
    d = decide("NVDA", "2019-06-03", bars, CFG, Brain(llm=client), recalled=[FALSIFIED_LONG])
    assert "llm_fallback" not in [e["kind"] for e in d.llm_events]
    tools = {tool for tool, prompt in chat.calls if BLOCK in prompt}
    assert tools == {"LLMNote", "LLMTurn", "LLMVerdict", "LLMThesis", "LLMJudgement"}
    assert all(BLOCK in prompt for _, prompt in chat.calls)
    roles = {
        "analyst",
        "bull researcher",
        "bear researcher",
        "research manager",
        "trader",
        "risk analyst",
        "risk judge",
    }
    assert all(any(r in p for _, p in chat.calls) for r in roles)


class _Rows:
    """A stand-in memory whose recall returns these review records (``review_rows``' path
    for a memory that is not a ResearchMemory)."""

    def __init__(self, rows):
        self.rows = rows

    def recall(self, symbols, **kwargs):
        return self.rows


def _row(day: str, action: str, direction: str, tag: OutcomeTag, why: str):
    from types import SimpleNamespace

    text = f"[{tag.value}] NVDA decision of {day} ({action}, {direction}): {why}. Lessons: {why}"
    return SimpleNamespace(
        id=f"r-{day}",
        run_id=f"decision-review:NVDA:{day}:{day}",
        symbols=("NVDA",),
        outcome=tag.value.lower(),
        text=text,
    )


def test_recall_with_a_setup_query_ranks_by_the_hybrid_and_drops_what_shares_no_word():
    from swarm.analyze.review import recall_reviews

    memory = _Rows(
        [
            _row("2019-01-02", "SELL", "short", OutcomeTag.REALIZED, "target hit first"),
            _row(
                "2019-03-04", "HOLD", "flat", OutcomeTag.REALIZED, "the close stayed within 2 ATR"
            ),
            _row("2019-05-06", "BUY", "long", OutcomeTag.FALSIFIED, "stop hit first"),
        ]
    )
    newest = [r.date for r in recall_reviews(memory, "NVDA", "2019-07-01")]
    assert newest == ["2019-05-06", "2019-03-04", "2019-01-02"]  # no query: as before
    short = recall_reviews(memory, "NVDA", "2019-07-01", query="NVDA SELL short bear")
    assert short[0].date == "2019-01-02"
    assert recall_reviews(memory, "NVDA", "2019-07-01", query="earnings gap") == []
    # the date still decides what may be recalled: the matching long ended after it
    early = recall_reviews(memory, "NVDA", "2019-03-31", query="NVDA BUY long")
    assert {r.date for r in early} == {"2019-01-02", "2019-03-04"}
