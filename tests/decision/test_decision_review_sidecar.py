"""Past reviews are recalled from the sidecar beside the store (``swarm.memory.sidecar``):
the same records the store's own recall finds, none whose horizon ends after the analysis
date, a torn or stale sidecar costs a read of the store (logged), never a wrong answer."""

from __future__ import annotations

import json
import logging

import pytest

from swarm.analyze.contracts import OUTCOME_TAG, Action, Direction, Outcome, OutcomeTag, Review
from swarm.analyze.review import (
    RECALL_ALL,
    RECALL_ANY_RELEVANCE,
    RECALL_MAX,
    REVIEW_RUN_PREFIX,
    Recalled,
    parse_review_run_id,
    recall_reviews,
    review_run_id,
    reviewed_dates,
    store_review,
)
from swarm.memory import ResearchMemory
from swarm.memory import sidecar as sidecar_mod
from swarm.memory.index import db_stamp

pytestmark = pytest.mark.integration

# (ticker, decision date, horizon end, outcome)
REVIEWS = [
    ("NVDA", "2015-06-01", "2015-06-15", Outcome.LOSS),
    ("NVDA", "2017-06-01", "2017-06-15", Outcome.WIN),
    ("NVDA", "2018-01-02", "2018-01-17", Outcome.SCRATCH),
    ("NVDA", "2019-03-01", "2019-03-15", Outcome.WIN),
    ("NVDA", "2019-05-28", "2019-06-11", Outcome.LOSS),  # horizon ends after 2019-06-03
    ("AAPL", "2016-01-04", "2016-01-19", Outcome.WIN),
    ("AAPL", "2019-05-20", "2019-06-03", Outcome.LOSS),  # ends on the analysis date
]
DATES = ["2015-06-12", "2015-06-15", "2016-03-01", "2018-06-01", "2019-06-03", "2019-07-01"]


def _review(ticker: str, day: str, end: str, outcome: Outcome) -> Review:
    return Review(
        ticker=ticker,
        date=day,
        action=Action.HOLD,
        direction=Direction.LONG,
        horizon_days=10,
        horizon_end=end,
        outcome=outcome,
        tag=OUTCOME_TAG[outcome],
        exit_price=1.0,
        exit_reason=f"{outcome.value} by {end}",
        move_atr=0.5,
        critique="c",
        lessons=[f"lesson of {ticker} {day}"],
    )


def _store_path(memory: ResearchMemory, ticker: str, date: str) -> list[Recalled]:
    """recall_reviews as it was before the sidecar: through the store's recall."""
    out = []
    for rec in memory.recall(
        [ticker], kinds=("lesson",), k=RECALL_ALL, min_relevance=RECALL_ANY_RELEVANCE
    ):
        parts = parse_review_run_id(rec.run_id)
        if parts is None or parts[0] != ticker or parts[2] > date:
            continue
        tag = next((t for t in OutcomeTag if t.value.lower() == rec.outcome), None)
        out.append(Recalled(id=rec.id, date=parts[1], tag=tag, text=rec.text))
    out.sort(key=lambda r: (r.date, r.id), reverse=True)
    return out[:RECALL_MAX]


@pytest.fixture
def store(tmp_path):
    """A memory holding REVIEWS plus other lessons about the same symbols."""
    path = tmp_path / "memory"
    mem = ResearchMemory(path)
    for r in REVIEWS:
        assert store_review(mem, _review(*r))
    mem.remember_lesson(
        "run-1", 1, "NVDA gate lesson: momentum failed", symbols=["NVDA"], outcome="failed"
    )
    mem.remember_lesson(
        f"{REVIEW_RUN_PREFIX}:MSFT:2016-01-04:2016-01-19",
        None,
        "a lesson flagged for NVDA only",
        symbols=["NVDA"],
    )
    return path


def test_the_sidecar_recalls_what_the_store_recalls_without_opening_it(store):
    through_store = ResearchMemory(store)  # opening it makes the sidecar stale (see below)
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is None
    recall_reviews(ResearchMemory(store, lazy=True), "NVDA", DATES[0])  # reads it, rebuilds it
    for ticker in ("NVDA", "AAPL", "MSFT", "AMD"):
        for day in DATES:
            lazy = ResearchMemory(store, lazy=True)
            got = recall_reviews(lazy, ticker, day)
            assert got == _store_path(through_store, ticker, day), (ticker, day)
            assert lazy.opened is False  # answered by the sidecar
        assert reviewed_dates(ResearchMemory(store, lazy=True), ticker) == {
            r[1] for r in REVIEWS if r[0] == ticker
        }
    assert [
        r.date for r in recall_reviews(ResearchMemory(store, lazy=True), "NVDA", "2019-07-01")
    ] == ["2019-05-28", "2019-03-01", "2018-01-02"]


def test_no_review_whose_horizon_ends_after_the_analysis_date_is_recalled(store):
    for ticker in ("NVDA", "AAPL"):
        for day in DATES:
            got = recall_reviews(ResearchMemory(store, lazy=True), ticker, day)
            ends = {r[1]: r[2] for r in REVIEWS if r[0] == ticker}
            assert all(r.date <= day and ends[r.date] <= day for r in got), (ticker, day)
    assert recall_reviews(ResearchMemory(store, lazy=True), "NVDA", "2015-06-12") == []
    on_the_day = recall_reviews(ResearchMemory(store, lazy=True), "AAPL", "2019-06-03")
    assert [r.date for r in on_the_day] == ["2019-05-20", "2016-01-04"]
    assert [
        r.date for r in recall_reviews(ResearchMemory(store, lazy=True), "NVDA", "2019-06-03")
    ] == ["2019-03-01", "2018-01-02", "2017-06-01"]


def _truncate(path) -> None:
    path.write_text(path.read_text(encoding="utf-8")[:300], encoding="utf-8")


def _mistype(path) -> None:  # parses, stamp current, one row's id not a string
    body = json.loads(path.read_text(encoding="utf-8"))
    body["rows"][0]["id"] = 5
    path.write_text(json.dumps(body), encoding="utf-8")


@pytest.mark.parametrize("damage", [_truncate, _mistype])
def test_a_torn_sidecar_is_logged_and_the_store_answers_then_it_is_rebuilt(store, caplog, damage):
    expected = _store_path(ResearchMemory(store), "NVDA", "2019-07-01")
    recall_reviews(ResearchMemory(store, lazy=True), "NVDA", "2019-07-01")  # current again
    path = sidecar_mod.sidecar_path(store, REVIEW_RUN_PREFIX)
    damage(path)
    with caplog.at_level(logging.WARNING, logger="swarm.memory"):
        lazy = ResearchMemory(store, lazy=True)
        assert recall_reviews(lazy, "NVDA", "2019-07-01") == expected
    assert lazy.opened  # read from the store of record
    assert any(str(path) in m and "unreadable" in m for m in caplog.messages)
    again = ResearchMemory(store, lazy=True)
    assert recall_reviews(again, "NVDA", "2019-07-01") == expected and not again.opened


def test_a_torn_sidecar_with_no_usable_store_degrades_to_no_recall(store, caplog, monkeypatch):
    sidecar_mod.sidecar_path(store, REVIEW_RUN_PREFIX).write_text("[]", encoding="utf-8")

    def broken(self):
        raise RuntimeError("chromadb is broken")

    monkeypatch.setattr(ResearchMemory, "_open", broken)
    with caplog.at_level(logging.WARNING, logger="swarm.memory"):
        lazy = ResearchMemory(store, lazy=True)
        assert recall_reviews(lazy, "NVDA", "2019-07-01") == []
    assert any("unreadable" in m for m in caplog.messages)
    assert any("chromadb is broken" in m for m in caplog.messages)


def test_a_write_that_skips_the_sidecar_makes_it_stale_and_the_store_answers(store):
    # Older code writes a review straight into the store: the sidecar no longer stands for it.
    late = _review("NVDA", "2019-04-01", "2019-04-15", Outcome.WIN)
    mem = ResearchMemory(store)
    mem.remember_lesson(
        review_run_id(late),
        None,
        "[Realized] NVDA late review",
        symbols=["NVDA"],
        outcome="realized",
    )
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is None  # stale: its stamp is older
    lazy = ResearchMemory(store, lazy=True)
    got = recall_reviews(lazy, "NVDA", "2019-07-01")
    assert lazy.opened and got == _store_path(mem, "NVDA", "2019-07-01")
    assert "2019-04-01" in [r.date for r in got]
    # Rebuilt from the store: the next reader is served by it and sees the same.
    rows = sidecar_mod.read(store, REVIEW_RUN_PREFIX)
    assert rows is not None and any(r.run_id == review_run_id(late) for r in rows)
    fresh = ResearchMemory(store, lazy=True)
    assert recall_reviews(fresh, "NVDA", "2019-07-01") == got and not fresh.opened


def test_an_older_memory_without_a_sidecar_gets_one_at_its_first_read(store):
    sidecar_mod.sidecar_path(store, REVIEW_RUN_PREFIX).unlink()
    first = ResearchMemory(store, lazy=True)
    got = recall_reviews(first, "AAPL", "2019-07-01")
    assert first.opened and len(got) == 2
    rows = sidecar_mod.read(store, REVIEW_RUN_PREFIX)
    assert rows is not None and len(rows) == len(REVIEWS) + 1  # + the MSFT-run lesson
    assert sorted(r.run_id for r in rows) == sorted(
        [review_run_id(_review(*r)) for r in REVIEWS]
        + [f"{REVIEW_RUN_PREFIX}:MSFT:2016-01-04:2016-01-19"]
    )
    second = ResearchMemory(store, lazy=True)
    assert recall_reviews(second, "AAPL", "2019-07-01") == got and not second.opened


def test_no_database_no_recall_whatever_the_sidecar_says(store):
    (store / "chroma.sqlite3").rename(store / "moved.sqlite3")
    assert db_stamp(store) is None
    lazy = ResearchMemory(store, lazy=True)
    assert recall_reviews(lazy, "NVDA", "2019-07-01") == [] and not lazy.opened


def test_opening_the_store_and_writing_other_records_keep_a_current_sidecar_current(store):
    recall_reviews(ResearchMemory(store, lazy=True), "NVDA", DATES[0])  # rebuilds it
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is not None
    opened = ResearchMemory(store)  # an open bumps the database's counter
    assert opened.opened
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is not None
    opened.remember_lesson("run-2", 1, "NVDA lesson of a develop run", symbols=["NVDA"])
    opened.recall(["NVDA"], kinds=("lesson",), k=5)
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is not None
    lazy = ResearchMemory(store, lazy=True)
    assert len(recall_reviews(lazy, "NVDA", "2019-07-01")) == 3 and lazy.opened is False
    # A review written around the sidecar leaves it stale, so the store answers again.
    opened.remember_lesson(
        f"{REVIEW_RUN_PREFIX}:NVDA:2019-06-10:2019-06-24",
        None,
        "later",
        symbols=["NVDA"],
        outcome="realized",
    )
    assert sidecar_mod.read(store, REVIEW_RUN_PREFIX) is None


def test_a_batch_of_reviews_is_one_write_and_the_sidecar_holds_them_all(tmp_path):
    from swarm.analyze.review import store_reviews

    mem = ResearchMemory(tmp_path / "memory")
    days = [f"2018-{m:02d}-01" for m in range(1, 13)]
    batch = [_review("INTC", d, d.replace("-01", "-15"), Outcome.WIN) for d in days]
    assert store_reviews(mem, batch) == 12
    assert store_reviews(mem, batch) == 12  # an upsert by id: the same records again
    rows = sidecar_mod.read(mem.path, REVIEW_RUN_PREFIX)
    assert rows is not None and len(rows) == 12 and mem.count() == 12
    assert reviewed_dates(ResearchMemory(mem.path, lazy=True), "INTC") == set(days)
    assert store_reviews(mem, []) == 0
