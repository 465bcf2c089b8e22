"""Headline tones kept across runs (``swarm.research.tone_cache``): the same floats as
scoring, read back instead of re-scored, and a bad or unwritable cache costs only time."""

from __future__ import annotations

import numpy as np
import pytest

import swarm.research.tone_cache as tc
from swarm.research.news import score_headline

pytestmark = pytest.mark.unit

TEXTS = [
    "$AAPL beats estimates, shares surge",
    "Apple misses on revenue; guidance cut",
    "$AAPL beats estimates, shares surge",  # a copy: scored once, same tone
    "",
    "Neutral note on the quarter",
]


def test_tones_are_the_scorers_and_a_second_call_reads_them_back(tmp_path, monkeypatch):
    first = tc.cached_tones(TEXTS, tmp_path)
    assert first == [score_headline(t) for t in TEXTS]
    assert first[0] != first[1]  # the texts' tones differ: a constant could not pass
    (kept,) = tmp_path.glob("*.npy")

    def refuse(text: str) -> float:
        raise AssertionError("scored again")

    monkeypatch.setattr(tc, "score_headline", refuse)
    assert tc.cached_tones(TEXTS, tmp_path) == first
    assert list(tmp_path.glob("*.npy")) == [kept]


def test_each_distinct_text_is_scored_once():
    seen: list[str] = []

    def score(text: str) -> float:
        seen.append(text)
        return float(len(text))

    assert tc.score_all(TEXTS, score) == [float(len(t)) for t in TEXTS]
    assert sorted(seen) == sorted(set(TEXTS))


def test_another_text_list_or_scorer_is_another_file(tmp_path, monkeypatch):
    tc.cached_tones(TEXTS, tmp_path)
    changed = [*TEXTS[:-1], "Neutral note on the quarter!"]
    assert tc.cached_tones(changed, tmp_path)[-1] == score_headline(changed[-1])
    assert len(list(tmp_path.glob("*.npy"))) == 2
    # the order counts, and so does the scorer's identity (the lexicon, VADER's version)
    assert tc.digest(TEXTS, "a") != tc.digest(list(reversed(TEXTS)), "a")
    assert tc.digest(TEXTS, "a") != tc.digest(TEXTS, "b")
    assert tc.digest(["ab", "c"], "a") != tc.digest(["a", "bc"], "a")


@pytest.mark.parametrize("bad", [b"not a numpy file", "short", "ints"])
def test_a_bad_file_is_scored_again_and_replaced(tmp_path, bad):
    path = tmp_path / f"{tc.digest(TEXTS, tc.scorer_tag())}.npy"
    if bad == "short":
        np.save(path, np.zeros(2))
    elif bad == "ints":
        np.save(path, np.zeros(len(TEXTS), dtype=np.int64))
    else:
        path.write_bytes(bad)
    want = [score_headline(t) for t in TEXTS]
    assert tc.cached_tones(TEXTS, tmp_path) == want
    assert np.load(path).tolist() == want


def test_an_unwritable_cache_still_scores(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    assert tc.cached_tones(TEXTS, blocked / "tones") == [score_headline(t) for t in TEXTS]
    assert tc.cached_tones(TEXTS, None) == [score_headline(t) for t in TEXTS]
