"""Persistent research memory: findings, fact sheets, strategies tried and gate lessons.

- ``embedding``: the offline hashing embedding (nothing is downloaded);
- ``records``: what a record is, its metadata and text;
- ``store``: the ChromaDB store that degrades instead of failing;
- ``recall``: which records may speak to a run (scope, relevance floor) and demotion rules;
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
