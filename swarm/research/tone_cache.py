"""Headline tones kept across runs: the finance-VADER score of a table's texts, scored once.

Scoring the corpus's tweets and headlines (~54,000 texts) takes ~15 s of pure-Python VADER,
and every run that finds the corpus's alternative data did it again. The tones of a column
of texts are kept in the user cache dir, one ``.npy`` a column, named by the digest of the
scorer's identity (VADER's version, the finance lexicon, the scorer's name) and of every
text in order: a changed text, lexicon or VADER gives another name, so a kept file is the
scores those texts would get now, float for float. A file that cannot be read or written
costs the scoring, never a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from swarm.research.news import FINANCE_LEXICON, score_headline

FORMAT = 1  # bump when the file's meaning changes


@lru_cache(maxsize=1)
def scorer_tag() -> str:
    """What the headline scorer's tones depend on, besides the text."""
    try:
        vader = importlib.metadata.version("vaderSentiment")
    except importlib.metadata.PackageNotFoundError:
        vader = "unknown"
    lexicon = hashlib.sha256(repr(sorted(FINANCE_LEXICON.items())).encode()).hexdigest()
    name = f"{score_headline.__module__}.{score_headline.__qualname__}"
    return f"tones-v{FORMAT}|vader {vader}|lexicon {lexicon}|{name}"


def digest(texts: Sequence[str], tag: str) -> str:
    """The name of a column's file: the scorer's tag and every text, in order."""
    h = hashlib.sha256(tag.encode())
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))  # length-prefixed: no two lists collide
        h.update(raw)
    return h.hexdigest()


def score_all(texts: Sequence[str], score: Callable[[str], float]) -> list[float]:
    """``score`` of each text, each distinct text scored once (copies share a tone)."""
    memo: dict[str, float] = {}
    out = []
    for text in texts:
        tone = memo.get(text)
        if tone is None:
            tone = memo[text] = float(score(text))
        out.append(tone)
    return out


def cached_tones(texts: Sequence[str], folder: Path | None) -> list[float]:
    """The headline scorer's tone of each text (``swarm.research.news.score_headline``), read
    from ``folder`` when these texts were scored before, else scored and kept there.
    ``folder`` None: scored, nothing kept."""
    if folder is None:
        return score_all(texts, score_headline)
    path = folder / f"{digest(texts, scorer_tag())}.npy"
    with contextlib.suppress(OSError, ValueError):
        kept = np.load(path, allow_pickle=False)
        if kept.dtype == np.float64 and kept.shape == (len(texts),):
            return kept.tolist()
    tones = score_all(texts, score_headline)
    with contextlib.suppress(OSError):
        _write(path, np.asarray(tones, dtype=np.float64))
    return tones


def _write(path: Path, values: np.ndarray) -> None:
    """Atomically: a concurrent run reads the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tones-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, values, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def default_tone_dir() -> Path:
    """``tones/`` in the lab's user cache dir."""
    from backtest.data import default_cache_dir

    return default_cache_dir() / "tones"
