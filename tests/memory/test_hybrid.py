"""The hybrid retriever's pure parts, one test each (tokens, the floor, BM25, the dense
ranking, RRF, precision), its precision on the hand-labelled review set, and the store's
``search`` agreeing with the pure ranking (Chroma over the offline embedding)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarm.memory import hybrid

pytestmark = pytest.mark.unit
FIXTURE = Path(__file__).parent / "fixtures" / "recall_reviews.json"


@pytest.fixture(scope="module")
def fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_tokenize_lowercases_and_drops_stopwords_and_single_characters():
    assert hybrid.tokenize("The NVDA long was Falsified: a stop-hit, at 0.62 (BUY, long)") == [
        "nvda",
        "long",
        "falsified",
        "stop-hit",
        "62",
        "buy",
        "long",
    ]
    assert hybrid.tokenize("the and of a") == []


def test_the_floor_needs_one_shared_content_word():
    q = hybrid.tokenize("earnings gap")
    assert hybrid.shares_term(q, hybrid.tokenize("a gap down after the report"))
    assert not hybrid.shares_term(q, hybrid.tokenize("the trend of the day"))
    assert not hybrid.shares_term(hybrid.tokenize("the of"), hybrid.tokenize("the of"))


def test_bm25_ranks_the_rare_shared_word_first_and_keeps_input_order_on_ties():
    docs = [["trend", "long"], ["earnings", "gap", "long"], ["trend", "short"], ["range"]]
    assert hybrid.bm25_ranking(["earnings", "long"], docs)[0] == 1
    assert hybrid.bm25_ranking(["nothing"], docs) == [0, 1, 2, 3]
    assert hybrid.bm25_ranking(["x"], []) == []
    assert hybrid.bm25_ranking(["x"], [[], []]) == [0, 1]  # empty texts do not divide by zero


def test_dense_ranking_is_the_offline_embeddings_cosine():
    docs = ["stop hit on an earnings gap", "target hit in an uptrend", "quiet range"]
    assert hybrid.dense_ranking("earnings gap stop", docs)[0] == 0
    assert hybrid.dense_ranking("uptrend target", docs)[0] == 1
    assert hybrid.dense_ranking("q", []) == []


def test_rrf_sums_reciprocal_ranks_with_k_60():
    fused = dict(hybrid.rrf_fuse([["a", "b", "c"], ["b", "c"]]))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert [i for i, _ in hybrid.rrf_fuse([["a", "b", "c"], ["b", "c"]])] == ["b", "c", "a"]
    # a tie goes to the first ranking's order
    assert [i for i, _ in hybrid.rrf_fuse([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert hybrid.rrf_fuse([]) == []


def test_hybrid_rank_drops_records_sharing_no_word_and_takes_the_stores_dense_order():
    ids, texts = ["r1", "r2", "r3"], ["earnings gap down", "uptrend resumed", "gap and go"]
    assert set(hybrid.hybrid_rank("earnings gap", ids, texts)) == {"r1", "r3"}
    assert hybrid.hybrid_rank("earnings gap", ids, texts)[0] == "r1"
    # a store that ranked r3 first and did not return r1: r1 still ranks, after it
    assert hybrid.hybrid_rank("gap", ids, texts, dense=["r3"]) == ["r3", "r1"]
    with pytest.raises(ValueError, match="one text per id"):
        hybrid.hybrid_rank("q", ["a"], [])


def test_precision_at_counts_empty_slots_as_misses():
    assert hybrid.precision_at(["a", "b", "c"], {"a", "c"}, 3) == pytest.approx(2 / 3)
    assert hybrid.precision_at(["a"], {"a"}, 3) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        hybrid.precision_at(["a"], {"a"}, 0)


def _mean_precision(fixture: dict, rank, k: int) -> float:
    ids = [r["id"] for r in fixture["records"]]
    texts = [r["text"] for r in fixture["records"]]
    got = [
        hybrid.precision_at(rank(q["query"], ids, texts), q["relevant"], k)
        for q in fixture["queries"]
    ]
    return sum(got) / len(got)


def _dense(query, ids, texts):
    return [ids[i] for i in hybrid.dense_ranking(query, texts)]


def test_hybrid_precision_at_3_on_the_labelled_reviews_is_at_least_dense_only(fixture):
    hybrid_p3 = _mean_precision(fixture, hybrid.hybrid_rank, 3)
    dense_p3 = _mean_precision(fixture, _dense, 3)
    assert hybrid_p3 >= dense_p3
    assert hybrid_p3 == pytest.approx(4 / 6)  # the README's figure (benchmarks/memory_recall.py)


@pytest.mark.integration
def test_the_stores_search_is_the_pure_hybrid_over_chroma(fixture, tmp_path):
    from swarm.memory.store import ResearchMemory

    memory = ResearchMemory(tmp_path / "memory")
    assert memory.available, memory.reason
    for r in fixture["records"]:
        memory.remember_lesson(f"fx-{r['id']}", None, r["text"], symbols=r["symbols"])
    symbols = sorted({s for r in fixture["records"] for s in r["symbols"]})
    ids = [r["id"] for r in fixture["records"]]
    texts = [r["text"] for r in fixture["records"]]
    n = len(ids)
    for q in fixture["queries"]:
        found = memory.search(q["query"], symbols, k=n, kinds=("lesson",))
        assert [str(x.run_id)[3:] for x in found] == hybrid.hybrid_rank(q["query"], ids, texts)
        dense = memory.search(q["query"], symbols, k=n, kinds=("lesson",), fuse=False)
        assert [str(x.run_id)[3:] for x in dense] == _dense(q["query"], ids, texts)
    assert memory.search("earnings", ["TSLA"], k=3) == []  # out of scope: nothing
