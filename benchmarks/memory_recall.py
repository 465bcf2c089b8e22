"""Recall precision of memory's retrievers on a small hand-labelled set of reviews.

    PYTHONPATH=. .venv/bin/python benchmarks/memory_recall.py [--fixture PATH] [--no-chroma]

The fixture (``tests/memory/fixtures/recall_reviews.json``): 16 records in the desk's review
format (plus a gate lesson and a research note) and 6 queries labelled with the records that
answer them. Prints the mean precision@k (k = 1, 3, 5) over the queries of

* bm25         - BM25 (Okapi) over the words alone;
* dense        - the offline embedding's cosine ranking (``swarm.memory.hybrid.dense_ranking``,
                 what a Chroma collection with ``HashingEmbedding`` returns);
* hybrid       - the two fused by RRF (k = 60), the relevance floor applied;
* chroma dense - the store's own cosine query (``ResearchMemory.search(fuse=False)``), in a
                 temporary store;
* chroma hybrid- ``ResearchMemory.search``: Chroma's dense ranking fused with BM25.

Offline: the store embeds with the project's hashing embedding; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from swarm.memory import hybrid

FIXTURE = Path(__file__).resolve().parents[1] / "tests/memory/fixtures/recall_reviews.json"
KS = (1, 3, 5)


def local_rankings(fixture: dict) -> dict[str, list[list[str]]]:
    """Per retriever, its ranking of the records for each query (pure, no store)."""
    ids = [r["id"] for r in fixture["records"]]
    texts = [r["text"] for r in fixture["records"]]
    toks = [hybrid.tokenize(t) for t in texts]
    out: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": []}
    for q in fixture["queries"]:
        out["bm25"].append([ids[i] for i in hybrid.bm25_ranking(hybrid.tokenize(q["query"]), toks)])
        out["dense"].append([ids[i] for i in hybrid.dense_ranking(q["query"], texts)])
        out["hybrid"].append(hybrid.hybrid_rank(q["query"], ids, texts))
    return out


def chroma_rankings(fixture: dict, folder: Path) -> dict[str, list[list[str]]]:
    """The store's rankings: its existing dense recall and its hybrid search."""
    from swarm.memory.store import ResearchMemory

    memory = ResearchMemory(folder)
    for r in fixture["records"]:
        memory.remember_lesson(f"bench-{r['id']}", None, r["text"], symbols=r["symbols"])
    symbols = sorted({s for r in fixture["records"] for s in r["symbols"]})
    n = len(fixture["records"])
    rid = {f"bench-{r['id']}": r["id"] for r in fixture["records"]}

    def ids(found) -> list[str]:
        return [rid[str(x.run_id)] for x in found]

    out: dict[str, list[list[str]]] = {"chroma dense": [], "chroma hybrid": []}
    for q in fixture["queries"]:
        dense = memory.search(q["query"], symbols, k=n, kinds=("lesson",), fuse=False)
        out["chroma dense"].append(ids(dense))
        out["chroma hybrid"].append(ids(memory.search(q["query"], symbols, k=n, kinds=("lesson",))))
    return out


def precision_table(
    fixture: dict, rankings: dict[str, list[list[str]]]
) -> dict[str, dict[int, float]]:
    """Mean precision@k over the queries, per retriever."""
    rel = [q["relevant"] for q in fixture["queries"]]
    return {
        name: {
            k: sum(hybrid.precision_at(r, g, k) for r, g in zip(ranks, rel, strict=True)) / len(rel)
            for k in KS
        }
        for name, ranks in rankings.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    ap.add_argument("--no-chroma", action="store_true", help="skip the temporary Chroma store")
    args = ap.parse_args()
    fixture = json.loads(args.fixture.read_text(encoding="utf-8"))
    rankings = local_rankings(fixture)
    if not args.no_chroma:
        with tempfile.TemporaryDirectory() as tmp:
            rankings |= chroma_rankings(fixture, Path(tmp) / "memory")
    table = precision_table(fixture, rankings)
    print(f"{len(fixture['records'])} records, {len(fixture['queries'])} queries")
    print(f"{'retriever':<14}" + "".join(f"{'P@' + str(k):>8}" for k in KS))
    for name, row in table.items():
        print(f"{name:<14}" + "".join(f"{row[k]:>8.3f}" for k in KS))


if __name__ == "__main__":
    main()
