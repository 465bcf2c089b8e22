"""Persistent research memory: findings, fact sheets, strategies tried and gate lessons.

- ``embedding``: the offline hashing embedding (nothing is downloaded);
- ``records``: what a record is, its metadata and text;
- ``store``: the ChromaDB store's operations (write, recall, count);
- ``lifecycle``: its life: opened at once or lazily, guarded, repaired, or disabled with a
  reason instead of failing; ``locking``: the cross-process lock and SQLite probe;
- ``sidecar``: a JSON copy of the decision reviews beside the store, so ``swarm.analyze``
  recalls them without importing chromadb;
- ``index``: the symbols and sectors the store holds, in a file beside it, so a recall that
  would find nothing is answered without importing chromadb or opening the store;
- ``safety``: a store a killed process left torn is probed in a subprocess and rebuilt
  from its SQLite records instead of crashing the run (the old folder is kept aside);
- ``recall``: which records may speak to a run (scope, relevance floor) and demotion rules;
- ``hybrid``: free-text recall: BM25 fused with the dense ranking by RRF, behind a floor of
  one shared content word (``ResearchMemory.search``; decision reviews, without the store);
- ``session``: a run's use of it (opened from the run config, one progress line).
"""

from swarm.memory.embedding import EMBEDDING_DIM, EMBEDDING_NAME, HashingEmbedding, hashed_vector
from swarm.memory.recall import (
    MIN_DEMOTION_RUNS,
    MIN_RELEVANCE,
    RECALL_KINDS,
    adjust_families,
)
from swarm.memory.records import KINDS, FamilyRecord, Recollection
from swarm.memory.session import (
    memory_for,
    memory_line,
    recollections_json,
    remember_gate_outcome,
    run_scope,
)
from swarm.memory.store import COLLECTION, ResearchMemory, default_memory_dir

__all__ = [
    "COLLECTION",
    "EMBEDDING_DIM",
    "EMBEDDING_NAME",
    "KINDS",
    "MIN_DEMOTION_RUNS",
    "MIN_RELEVANCE",
    "RECALL_KINDS",
    "FamilyRecord",
    "HashingEmbedding",
    "Recollection",
    "ResearchMemory",
    "adjust_families",
    "default_memory_dir",
    "hashed_vector",
    "memory_for",
    "memory_line",
    "recollections_json",
    "remember_gate_outcome",
    "run_scope",
]
