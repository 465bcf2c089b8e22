"""The offline embedding: signed feature hashing, so nothing is ever downloaded.

Chroma's default embedding function downloads an ONNX model on first use and fails
offline; every collection is opened with :class:`HashingEmbedding` instead (words, word
bigrams and character 4-grams, hashed with blake2b so vectors are stable across processes).
chromadb itself is imported only when a store opens (:func:`chroma_embedding_class`): a
one-shot analysis with nothing to recall never pays for it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

EMBEDDING_NAME = "swarm-hashing-v1"
EMBEDDING_DIM = 512

_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.%+-]*")


def _features(text: str) -> Iterator[tuple[str, float]]:
    words = [w.strip(".") for w in _TOKEN.findall(text.lower())]
    words = [w for w in words if w]
    for w in words:
        yield "w:" + w, 1.0
    for a, b in zip(words, words[1:], strict=False):
        yield f"b:{a} {b}", 0.5
    for w in words:
        padded = f"^{w}$"
        for i in range(max(1, len(padded) - 3)):
            yield "c:" + padded[i : i + 4], 0.25


def hashed_vector(text: str, dim: int = EMBEDDING_DIM) -> np.ndarray:
    """Signed feature hashing (blake2b, so stable across processes), L2-normalised."""
    v = np.zeros(dim, dtype=np.float32)
    for feat, weight in _features(text):
        h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
        v[h % dim] += weight if (h >> 63) & 1 else -weight
    n = float(np.linalg.norm(v))
    if n == 0.0:
        v[0] = 1.0  # the empty text: a fixed unit vector (Chroma rejects zero vectors)
        return v
    return v / n


def chroma_import_error() -> str | None:
    """Why chromadb cannot be used here, or None. Imports it (~0.5 s): only the store calls
    this, when it opens."""
    try:
        chroma_embedding_class()
    except Exception as exc:  # an unusable chromadb degrades memory, not the run
        return f"chromadb unavailable ({type(exc).__name__}: {exc})"
    return None


class HashingEmbedding:
    """Deterministic, offline, no model, no download. Chroma's ``EmbeddingFunction``
    protocol, without importing chromadb: :func:`chroma_embedding_class` gives the
    registered Chroma subclass the store opens its collection with."""

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        self.dim = int(dim)

    def __call__(self, input: Any) -> list[np.ndarray]:  # noqa: A002 - Chroma's protocol name
        """One hashed vector per text (Chroma's embedding-function protocol)."""
        return [hashed_vector(text, self.dim) for text in input]

    @staticmethod
    def name() -> str:
        """The embedding's name, recorded with the collection."""
        return EMBEDDING_NAME

    def get_config(self) -> dict[str, Any]:
        """What rebuilds this embedding: its dimension."""
        return {"dim": self.dim}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> HashingEmbedding:
        """The embedding a collection was built with, from its stored config."""
        return cls(dim=int(config.get("dim", EMBEDDING_DIM)))

    def default_space(self) -> str:
        """Cosine: the vectors are L2-normalised."""
        return "cosine"

    def supported_spaces(self) -> list[str]:
        """The distance spaces Chroma may use with these vectors."""
        return ["cosine", "l2", "ip"]


@functools.cache
def chroma_embedding_class() -> type[HashingEmbedding]:
    """:class:`HashingEmbedding` as a Chroma ``EmbeddingFunction``, registered under its name
    (Chroma rebuilds a persisted collection's function from it). Built on first use, so
    importing this module never imports chromadb."""
    from chromadb.api.types import EmbeddingFunction
    from chromadb.utils.embedding_functions import register_embedding_function

    class ChromaHashingEmbedding(HashingEmbedding, EmbeddingFunction):  # type: ignore[misc]
        pass

    return register_embedding_function(ChromaHashingEmbedding)
