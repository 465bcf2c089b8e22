"""Hybrid recall: BM25 over the words, fused with the dense ranking by Reciprocal Rank Fusion.

Why two rankings: the offline embedding (``swarm.memory.embedding``) hashes character
4-grams, so "falsified" lands near "fails" and a record about the same symbol with different
wording still ranks; but it also lets many loosely similar texts crowd out the one that
shares the query's rare words ("earnings", "gap"). BM25 rewards exactly those rare shared
words. RRF (Cormack et al. 2009, k = 60) fuses the two by rank alone, so neither score's
scale has to be calibrated against the other's.

Why a floor: a record that shares no content word with the query is only there because
every record gets some rank; it is dropped (:func:`shares_term`), whatever its fused rank.

Everything here is pure. The dense ranking is either the store's (ChromaDB's cosine
query over the same embedding, ``ResearchMemory.search``) or :func:`dense_ranking`, which
computes that cosine ranking in numpy without importing chromadb (an analysis that recalls
reviews from the sidecar never opens the store).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from swarm.memory.embedding import hashed_vector

RRF_K = 60  # the constant of Cormack et al.; larger flattens the head of each ranking
MIN_SHARED_TERMS = 1  # the relevance floor: content words a record must share with the query

_TOKEN = re.compile(r"[a-z0-9][a-z0-9_%+-]*")
# Function words: they match everywhere, so sharing one says nothing about relevance.
_STOP = (
    "a an and are as at be but by for from had has have in into is it its no not of on or "
    "so than that the their then there this to was were what when which while with"
)
STOPWORDS = frozenset(_STOP.split())


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stopwords and single characters ("a", "s")."""
    words = (w.strip("-+") for w in _TOKEN.findall(text.lower()))
    return [w for w in words if len(w) > 1 and w not in STOPWORDS]


def shares_term(query_tokens: Sequence[str], doc_tokens: Sequence[str]) -> bool:
    """The relevance floor: at least ``MIN_SHARED_TERMS`` content words in common."""
    return len(set(query_tokens) & set(doc_tokens)) >= MIN_SHARED_TERMS


def bm25_ranking(query_tokens: Sequence[str], docs_tokens: Sequence[Sequence[str]]) -> list[int]:
    """Indices of ``docs_tokens`` by BM25 (Okapi) score, best first; ties keep input order."""
    if not docs_tokens:
        return []
    from rank_bm25 import BM25Okapi

    # BM25Okapi divides by the average length: an all-empty corpus has none.
    corpus = [list(d) or ["\0"] for d in docs_tokens]
    scores = BM25Okapi(corpus).get_scores(list(query_tokens))
    return sorted(range(len(corpus)), key=lambda i: (-float(scores[i]), i))


def dense_ranking(query: str, docs: Sequence[str]) -> list[int]:
    """Indices of ``docs`` by cosine similarity of the offline embedding, best first: the
    ranking a ChromaDB collection with ``HashingEmbedding`` and cosine space returns."""
    if not docs:
        return []
    q = hashed_vector(query)
    sims = np.array([float(np.dot(q, hashed_vector(d))) for d in docs])
    return sorted(range(len(docs)), key=lambda i: (-sims[i], i))


def rrf_fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """(id, fused score) best first: each ranking adds 1 / (k + rank) for every id it holds
    (rank from 1). Ties go to the id ranked higher in the first ranking, then by id."""
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    for ranking in rankings:
        for rank, rid in enumerate(ranking, start=1):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (k + rank)
    for rank, rid in enumerate(rankings[0] if rankings else []):
        first.setdefault(rid, rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], first.get(kv[0], len(first)), kv[0]))


def hybrid_scored(
    query: str,
    ids: Sequence[str],
    texts: Sequence[str],
    *,
    dense: Sequence[str] | None = None,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """(id, fused score) of the records (``ids`` with their ``texts``) that pass the floor,
    by RRF of their dense and BM25 rankings, best first. ``dense``: the store's ranking of
    these ids (ids it did not return rank after it); None computes it with
    :func:`dense_ranking`."""
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids but {len(texts)} texts: give one text per id")
    q = tokenize(query)
    toks = [tokenize(t) for t in texts]
    bm25 = [ids[i] for i in bm25_ranking(q, toks)]
    if dense is None:
        dense_ids = [ids[i] for i in dense_ranking(query, texts)]
    else:
        known = set(ids)
        dense_ids = list(dict.fromkeys(i for i in dense if i in known))
        ranked = set(dense_ids)
        dense_ids += [i for i in ids if i not in ranked]
    keep = {rid for rid, t in zip(ids, toks, strict=True) if shares_term(q, t)}
    return [(rid, score) for rid, score in rrf_fuse([dense_ids, bm25], k) if rid in keep]


def hybrid_rank(
    query: str,
    ids: Sequence[str],
    texts: Sequence[str],
    *,
    dense: Sequence[str] | None = None,
    k: int = RRF_K,
) -> list[str]:
    """The ids of :func:`hybrid_scored`, best first."""
    return [rid for rid, _ in hybrid_scored(query, ids, texts, dense=dense, k=k)]


def precision_at(ranked: Sequence[str], relevant: Sequence[str] | set[str], k: int) -> float:
    """Share of the first ``k`` slots holding a relevant id (an empty slot counts as a miss,
    so a retriever cannot score by returning less)."""
    if k <= 0:
        raise ValueError(f"k={k}: precision needs k >= 1")
    rel = set(relevant)
    return sum(1 for rid in ranked[:k] if rid in rel) / k
