"""Persistent research memory: findings, fact sheets, strategies tried and gate lessons.

A ChromaDB store on disk (``chromadb.PersistentClient``), by default under the user cache
dir (``platformdirs.user_cache_dir("swarm-lab")/memory``). Chroma's default embedding
function downloads an ONNX model on first use and fails offline, so every collection is
opened with :class:`HashingEmbedding`: a deterministic, offline vectoriser (signed feature
hashing of words, word bigrams and character 4-grams). Nothing is ever downloaded.

Every record carries metadata: ``kind`` (finding, fact_sheet, research, strategy, lesson),
``run_id``, ``iteration``, ``symbols`` plus one ``sym_<SYMBOL>`` flag per symbol,
``family`` plus ``fam_<family>`` flags, ``regime``, ``outcome`` (passed / failed).
:meth:`ResearchMemory.recall` filters on symbol / family flags and ranks by similarity
plus metadata matches.

Memory is an aid, never a dependency: a store that cannot be opened (corrupt, locked,
unwritable) degrades to "no memory" with a logged reason and every call becomes a no-op.
Chroma's Rust core holds the GIL while it waits on a locked SQLite file, so a lock held by
another process would hang the run: each operation first takes a cross-process file lock
(bounded wait) and probes SQLite with a short timeout, and gives up cleanly instead.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import math
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
from pydantic import BaseModel, Field

log = logging.getLogger("swarm.memory")

COLLECTION = "swarm_memory"  # Chroma needs >= 3 characters
EMBEDDING_NAME = "swarm-hashing-v1"
EMBEDDING_DIM = 512
KINDS = ("finding", "fact_sheet", "research", "strategy", "lesson")
RECALL_KINDS = ("lesson", "strategy", "research")
LOCK_WAIT_S = 5.0  # how long an operation waits for another process's use of the store
SQLITE_PROBE_TIMEOUT_S = 1.0

MetaValue = str | int | float | bool


def default_memory_dir() -> Path:
    """``<user cache dir>/swarm-lab/memory``; no environment variable is consulted."""
    return Path(platformdirs.user_cache_dir("swarm-lab")) / "memory"


# --------------------------------------------------------------------------- embedding

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


try:  # pragma: no branch - chromadb is a declared dependency; guarded for broken installs
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    _CHROMA_IMPORT_ERROR: str | None = None
except Exception as exc:  # an unusable chromadb degrades memory, not the run
    EmbeddingFunction = object  # type: ignore[assignment,misc]
    Documents = Embeddings = Any  # type: ignore[misc]
    _CHROMA_IMPORT_ERROR = f"chromadb unavailable ({type(exc).__name__}: {exc})"

    def register_embedding_function(cls):  # type: ignore[no-redef]
        return cls


@register_embedding_function
class HashingEmbedding(EmbeddingFunction):  # type: ignore[misc,valid-type]
    """Chroma EmbeddingFunction: deterministic, offline, no model, no download."""

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma's protocol name
        return [hashed_vector(text, self.dim) for text in input]

    @staticmethod
    def name() -> str:
        return EMBEDDING_NAME

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashingEmbedding:
        return HashingEmbedding(dim=int(config.get("dim", EMBEDDING_DIM)))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]


# --------------------------------------------------------------------------- records


class Recollection(BaseModel):
    """One record recalled from memory, with why it was judged relevant."""

    id: str
    kind: str
    text: str
    run_id: str | None = None
    iteration: int | None = None
    symbols: list[str] = Field(default_factory=list)
    family: str | None = None
    regime: str | None = None
    outcome: str | None = None  # passed / failed (strategies and gate lessons)
    similarity: float  # 1 - cosine distance of the hashed embeddings
    relevance: float  # similarity + metadata matches: the ranking key
    matched: list[str] = Field(default_factory=list)  # e.g. "symbols AAPL", "style momentum"
    created_at: str | None = None


class FamilyRecord(BaseModel):
    """What memory knows about one strategy family on (some of) the asked symbols."""

    family: str
    n_passed: int = 0
    n_failed: int = 0
    best_score: float | None = None
    symbols: list[str] = Field(default_factory=list)
    runs: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)  # why failures failed, most recent first


def _key(prefix: str, value: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_.-]", "_", value)


def _clean_meta(meta: Mapping[str, Any]) -> dict[str, MetaValue]:
    out: dict[str, MetaValue] = {}
    for k, v in meta.items():
        if v is None:
            continue
        if isinstance(v, bool | int | str):
            out[k] = v
        elif isinstance(v, float):
            if math.isfinite(v):
                out[k] = v
        else:
            out[k] = str(v)
    return out


def _meta(
    kind: str,
    run_id: str,
    *,
    iteration: int | None = None,
    symbols: Iterable[str] = (),
    family: str | None = None,
    families: Iterable[str] = (),
    regime: str | None = None,
    outcome: str | None = None,
    **extra: Any,
) -> dict[str, MetaValue]:
    syms = sorted({s.upper() for s in symbols})
    fams = list(dict.fromkeys([*([family] if family else []), *families]))
    meta: dict[str, Any] = {
        "kind": kind,
        "run_id": run_id,
        "iteration": iteration,
        "symbols": ",".join(syms),
        "family": family,
        "families": ",".join(fams),
        "regime": regime,
        "outcome": outcome,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
    meta.update({_key("sym_", s): True for s in syms})
    meta.update({_key("fam_", f): True for f in fams})
    return _clean_meta(meta)


def _dump(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return dict(obj)


def _fmt(x: Any, spec: str = ".3g") -> str:
    return format(x, spec) if isinstance(x, int | float) else "n/a"


def _or(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$or": conditions}


def _and(conditions: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    conds = [c for c in conditions if c]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else {"$and": conds}


# --------------------------------------------------------------------------- the store


class ResearchMemory:
    """The persistent store. Construct it with a folder; it never raises afterwards.

    ``available`` says whether it works; ``reason`` says why not. Write methods return
    the number of records stored (0 when unavailable), read methods an empty result.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        collection: str = COLLECTION,
        lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_memory_dir()
        self.embedding = HashingEmbedding()
        self.reason: str | None = None
        self.lock_wait_s = lock_wait_s
        self._collection_name = collection
        self._col: Any = None
        self._thread_lock = threading.Lock()
        if _CHROMA_IMPORT_ERROR:
            self._disable(_CHROMA_IMPORT_ERROR)
            return
        if len(collection) < 3:
            self._disable(f"collection name {collection!r} is shorter than 3 characters")
            return
        self._guarded("open", self._open, None)

    @classmethod
    def disabled(cls, reason: str) -> ResearchMemory:
        """A memory that remembers nothing (e.g. switched off by config)."""
        mem = cls.__new__(cls)
        mem.path, mem.embedding, mem.reason = None, HashingEmbedding(), None
        mem.lock_wait_s, mem._collection_name = 0.0, COLLECTION
        mem._col, mem._thread_lock = None, threading.Lock()
        mem._disable(reason, warn=False)
        return mem

    # ---- plumbing

    @property
    def available(self) -> bool:
        return self._col is not None and self.reason is None

    def status(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "available": self.available,
            "reason": self.reason,
            "embedding": EMBEDDING_NAME,
            "records": self.count() if self.available else 0,
        }

    def _disable(self, reason: str, *, warn: bool = True) -> None:
        self._col = None
        self.reason = reason
        if warn:
            log.warning("research memory disabled: %s", reason)

    def _open(self) -> None:
        import chromadb
        from chromadb.config import Settings

        self.path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )
        col = client.get_or_create_collection(
            self._collection_name,
            embedding_function=self.embedding,
            configuration={"hnsw": {"space": "cosine"}},
        )
        col.count()  # touches the store: a corrupt database fails here, not later
        self._col = col

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Cross-process lock on the store, then a SQLite probe: fail fast, never hang."""
        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / "swarm-memory.lock", "a+") as fh:
            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"store busy: another process held its lock for {self.lock_wait_s:g}s"
                        ) from None
                    time.sleep(0.05)
            try:
                db = self.path / "chroma.sqlite3"
                if db.exists():
                    con = sqlite3.connect(db, timeout=SQLITE_PROBE_TIMEOUT_S)
                    try:
                        con.execute("BEGIN IMMEDIATE")
                        con.rollback()
                    finally:
                        con.close()
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _guarded(self, what: str, fn, default):
        if what != "open" and not self.available:
            return default
        with self._thread_lock:
            try:
                with self._exclusive():
                    return fn()
            except Exception as exc:  # memory must never kill a run
                self._disable(
                    f"{what} failed at {self.path}: {type(exc).__name__}: {str(exc)[:200]}"
                )
                return default

    def _upsert(self, records: list[tuple[str, str, dict[str, MetaValue]]]) -> int:
        if not records:
            return 0
        ids = [r[0] for r in records]
        if len(set(ids)) != len(ids):  # last one wins, as an upsert would
            records = list({r[0]: r for r in records}.values())

        def go() -> int:
            self._col.upsert(
                ids=[r[0] for r in records],
                documents=[r[1] for r in records],
                metadatas=[r[2] for r in records],
            )
            return len(records)

        return self._guarded("write", go, 0)

    def count(self) -> int:
        return self._guarded("count", lambda: int(self._col.count()), 0)

    # ---- writes

    def remember_findings(
        self,
        run_id: str,
        findings: Sequence[Any],
        *,
        iteration: int | None = None,
        regime: str | None = None,
    ) -> int:
        """One record per finding (abstentions too: a gap is worth remembering)."""
        recs = []
        for raw in findings:
            f = _dump(raw)
            sym, dom, spec = f.get("symbol", "?"), f.get("type", "?"), f.get("specialization", "?")
            if f.get("abstained"):
                body = f"abstained: {f.get('reason')}"
            else:
                body = f.get("interpretation", "")
            text = (
                f"{sym} {dom}.{spec} finding as of {f.get('as_of')}: signal "
                f"{_fmt(f.get('signal'), '+.2f')} confidence {_fmt(f.get('confidence'), '.2f')}; "
                f"{body}"
            )
            rid = f"{run_id}:finding:{iteration or 0}:{sym}:{dom}.{spec}"
            recs.append((rid, text, _meta(
                "finding", run_id, iteration=iteration, symbols=[sym], regime=regime,
                domain=dom, specialization=spec, signal=f.get("signal"),
                confidence=f.get("confidence"), abstained=bool(f.get("abstained")),
                as_of=f.get("as_of"),
            )))  # fmt: skip
        return self._upsert(recs)

    def remember_fact_sheets(
        self,
        run_id: str,
        sheets: Sequence[Any],
        *,
        symbols: Sequence[str],
        iteration: int | None = None,
        regime: str | None = None,
    ) -> int:
        recs = []
        for raw in sheets:
            s = _dump(raw)
            dom = s.get("domain", "?")
            text = (
                f"{dom} fact sheet on {', '.join(symbols)} ({regime or 'unknown regime'}): "
                f"signal {_fmt(s.get('signal'), '+.2f')} confidence "
                f"{_fmt(s.get('confidence'), '.2f')}. Approach: {s.get('recommended_approach')}. "
                f"Insights: {' | '.join(s.get('key_insights', [])[:3])}. "
                f"Risks: {' | '.join(s.get('risks', [])[:3]) or 'none noted'}. "
                f"Gaps: {' | '.join(s.get('gaps', [])[:3]) or 'none'}."
            )
            recs.append((f"{run_id}:fact_sheet:{iteration or 0}:{dom}", text, _meta(
                "fact_sheet", run_id, iteration=iteration, symbols=symbols, regime=regime,
                families=s.get("recommended_families", []), domain=dom,
                signal=s.get("signal"), confidence=s.get("confidence"),
            )))  # fmt: skip
        return self._upsert(recs)

    def remember_research(
        self,
        run_id: str,
        synthesis: Any,
        *,
        symbols: Sequence[str],
        iteration: int | None = None,
        window: str | None = None,
    ) -> int:
        """The leader's conclusion as a lesson-like note a later run can recall."""
        s = _dump(synthesis)
        families = list(s.get("recommended_families", []))
        gaps = s.get("gaps", [])
        text = (
            f"Research on {', '.join(symbols)}"
            + (f" over {window}" if window else "")
            + f": regime {s.get('regime')}, final signal {_fmt(s.get('signal'), '+.2f')} at "
            f"confidence {_fmt(s.get('confidence'), '.2f')} ({s.get('quality')} quality); "
            f"families recommended: {', '.join(families) or 'none'}. "
            f"Gaps: {' | '.join(gaps[:4]) or 'none'}."
        )
        meta = _meta(
            "research", run_id, iteration=iteration, symbols=symbols, families=families,
            regime=s.get("regime"), signal=s.get("signal"), confidence=s.get("confidence"),
            quality=s.get("quality"), window=window,
        )  # fmt: skip
        return self._upsert([(f"{run_id}:research:{iteration or 0}", text, meta)])

    def remember_strategy(
        self,
        run_id: str,
        variant: Any,
        evaluation: Any,
        *,
        symbols: Sequence[str],
        regime: str | None = None,
        iteration: int | None = None,
    ) -> int:
        """A variant tried (``StrategyVariant`` dump) and its gate evaluation summary."""
        v, e = _dump(variant), _dump(evaluation)
        spec = v.get("spec") or {}
        family = spec.get("family") or e.get("family")
        metrics = e.get("metrics") or {}
        passed = bool(e.get("passed"))
        missed = [k for k, ok in (e.get("criteria_met") or {}).items() if not ok]
        vetoes = list(e.get("vetoes") or [])
        errors = list(e.get("errors") or [])[:2]
        why = "; ".join(
            ([f"vetoes: {', '.join(vetoes)}"] if vetoes else [])
            + ([f"criteria missed: {', '.join(missed)}"] if missed else [])
            + ([f"errors: {' | '.join(errors)}"] if errors else [])
        )
        params = spec.get("parameters") or {}
        iteration = iteration if iteration is not None else v.get("iteration")
        text = (
            f"Strategy {spec.get('name', v.get('variant_id'))} ({family}; entry "
            f"{spec.get('entry')}, filters {', '.join(spec.get('filters') or []) or 'none'}, "
            f"exits {', '.join(spec.get('exits') or []) or 'none'}; "
            + ", ".join(f"{k}={params[k]}" for k in sorted(params))
            + f") on {', '.join(symbols)} in a {regime or 'unknown'} regime: "
            f"{'PASSED' if passed else 'FAILED'} the gate with score {_fmt(e.get('score'), '.2f')}, "
            f"Sharpe {_fmt(metrics.get('sharpe'), '.2f')}, max drawdown "
            f"{_fmt(metrics.get('max_drawdown_pct'), '.1f')}%, {metrics.get('n_trades', 'n/a')} "
            f"trades, DSR {_fmt(e.get('dsr'), '.2f')}" + (f"; {why}" if why else "") + "."
        )
        vid = v.get("variant_id") or e.get("variant_id") or "variant"
        meta = _meta(
            "strategy", run_id, iteration=iteration, symbols=symbols, family=family,
            regime=regime, outcome="passed" if passed else "failed", variant_id=vid,
            score=e.get("score"), sharpe=metrics.get("sharpe"), n_trades=metrics.get("n_trades"),
            dsr=e.get("dsr"), reason=why or None, trial_key=e.get("trial_key"),
            route=v.get("route"),
        )  # fmt: skip
        return self._upsert([(f"{run_id}:strategy:{vid}", text, meta)])

    def remember_lesson(
        self,
        run_id: str,
        iteration: int | None,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        symbols: Sequence[str] = (),
        family: str | None = None,
        regime: str | None = None,
        outcome: str | None = None,
    ) -> int:
        """A free-text lesson. With ``family`` and ``outcome`` it counts for or against
        that family in :meth:`family_outcomes` (unless ``metadata['source'] == 'gate'``)."""
        extra = dict(metadata or {})
        for k in ("kind", "run_id", "iteration", "symbols", "family", "regime", "outcome"):
            extra.pop(k, None)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        meta = _meta(
            "lesson", run_id, iteration=iteration, symbols=symbols, family=family,
            regime=regime, outcome=outcome, **extra,
        )  # fmt: skip
        return self._upsert([(f"{run_id}:lesson:{iteration or 0}:{digest}", text, meta)])

    def remember_gate_decision(
        self,
        run_id: str,
        decision: Any,
        variants: Sequence[Any],
        *,
        symbols: Sequence[str],
        regime: str | None = None,
    ) -> int:
        """Store one iteration's outcome: every evaluated variant as a strategy tried, and
        one gate lesson (route, reasoning, failure analysis, best variant). This is what
        the router calls after each decision."""
        d = _dump(decision)
        by_id = {_dump(v).get("variant_id"): v for v in variants}
        evals = [_dump(e) for e in d.get("evaluations", [])]
        iteration = d.get("iteration")
        n = 0
        for e in evals:
            n += self.remember_strategy(
                run_id, by_id.get(e.get("variant_id")) or {"variant_id": e.get("variant_id")},
                e, symbols=symbols, regime=regime, iteration=iteration,
            )  # fmt: skip
        best = next((e for e in evals if e.get("variant_id") == d.get("best_variant_id")), None)
        failure = d.get("failure") or {}
        passed = [e for e in evals if e.get("passed")]
        fam_scores: dict[str, float] = {}
        for e in evals:
            fam = e.get("family") or "?"
            fam_scores[fam] = max(fam_scores.get(fam, -1.0), float(e.get("score") or 0.0))
        parts = [
            f"Iteration {iteration} on {', '.join(symbols)} ({regime or 'unknown regime'}): "
            f"the gate routed {d.get('decision')}: {d.get('reasoning', '')}".rstrip(": "),
            f"{len(passed)} of {len(evals)} variants passed; best score per family: "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(fam_scores.items(), key=lambda x: -x[1])),
        ]
        if best:
            m = best.get("metrics") or {}
            parts.append(
                f"best {best.get('variant_id')} ({best.get('family')}) score "
                f"{_fmt(best.get('score'), '.2f')}, Sharpe {_fmt(m.get('sharpe'), '.2f')}, "
                f"{m.get('n_trades', 'n/a')} trades"
            )
        if failure:
            parts.append(
                f"failure {failure.get('failure_type')}: {failure.get('root_cause')}"
                + (
                    f"; actions: {' | '.join(failure.get('actions', [])[:3])}"
                    if failure.get("actions")
                    else ""
                )  # fmt: skip
            )
        n += self.remember_lesson(
            run_id, iteration, ". ".join(parts) + ".", {"source": "gate",
            "route": d.get("decision"), "failure_type": failure.get("failure_type")},
            symbols=symbols, family=(best or {}).get("family"), regime=regime,
            outcome="passed" if passed else "failed",
        )  # fmt: skip
        return n

    # ---- reads

    def recall(
        self,
        symbols: Sequence[str],
        style: str | Sequence[str] | None = None,
        regime: str | None = None,
        k: int = 5,
        *,
        kinds: Sequence[str] = RECALL_KINDS,
    ) -> list[Recollection]:
        """The ``k`` most relevant past lessons / strategies / research notes.

        Filter: records about any of ``symbols`` or of the ``style`` family (metadata
        flags). Rank: cosine similarity of the hashed embeddings to a query built from
        symbols, style and regime, plus 0.3 x share of the asked symbols covered, 0.2 for
        the style family, 0.1 for the same regime and 0.1 for a gate lesson.
        """
        syms = sorted({s.upper() for s in symbols})
        styles = [style] if isinstance(style, str) else list(style or [])
        styles = [s for s in styles if s]
        scope = _or(
            [{_key("sym_", s): True} for s in syms] + [{_key("fam_", f): True} for f in styles]
        )
        kind_filter = {"kind": {"$in": list(kinds)}} if len(kinds) > 1 else {"kind": kinds[0]}
        where = _and([kind_filter, scope])
        query = (
            f"lessons and strategies tried on {' '.join(syms)} "
            f"{' '.join(styles)} {regime or ''} regime gate failed passed"
        )

        def go() -> list[Recollection]:
            total = self._col.count()
            if total == 0 or k <= 0:
                return []
            res = self._col.query(
                query_texts=[query], n_results=min(total, max(4 * k, 20)), where=where,
                include=["documents", "metadatas", "distances"],
            )  # fmt: skip
            out = []
            for rid, doc, meta, dist in zip(
                res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0],
                strict=True,
            ):  # fmt: skip
                out.append(self._recollection(rid, doc, meta or {}, dist, syms, styles, regime))
            out.sort(key=lambda r: (-r.relevance, r.id))
            return out[:k]

        return self._guarded("recall", go, [])

    @staticmethod
    def _recollection(
        rid: str,
        doc: str,
        meta: Mapping[str, Any],
        dist: float,
        syms: list[str],
        styles: list[str],
        regime: str | None,
    ) -> Recollection:
        rec_syms = [s for s in str(meta.get("symbols", "")).split(",") if s]
        fams = [f for f in str(meta.get("families", "")).split(",") if f]
        similarity = max(-1.0, min(1.0, 1.0 - float(dist)))
        overlap = sorted(set(rec_syms) & set(syms))
        style_hit = [f for f in styles if f in fams]
        matched = []
        relevance = similarity
        if overlap:
            matched.append(f"symbols {', '.join(overlap)}")
            relevance += 0.3 * len(overlap) / max(1, len(syms))
        if style_hit:
            matched.append(f"style {', '.join(style_hit)}")
            relevance += 0.2
        if regime and meta.get("regime") == regime:
            matched.append(f"regime {regime}")
            relevance += 0.1
        if meta.get("kind") == "lesson":
            relevance += 0.1
        it = meta.get("iteration")
        return Recollection(
            id=rid, kind=str(meta.get("kind", "?")), text=doc or "",
            run_id=meta.get("run_id"), iteration=int(it) if isinstance(it, int) else None,
            symbols=rec_syms, family=meta.get("family"), regime=meta.get("regime"),
            outcome=meta.get("outcome"), similarity=round(similarity, 6),
            relevance=round(relevance, 6), matched=matched, created_at=meta.get("created_at"),
        )  # fmt: skip

    def family_outcomes(
        self, symbols: Sequence[str], *, limit: int = 5000, exclude_run: str | None = None
    ) -> dict[str, FamilyRecord]:
        """Per family: strategies that passed / failed the gate on any of ``symbols``
        (plus explicit family lessons; gate summary lessons are not double-counted).

        ``exclude_run``: leave out that run's own records (a run's RESEARCH round reads its
        own verdicts from the run state, see ``swarm.research.feedback``; counting them here
        too would weigh them twice)."""
        syms = sorted({s.upper() for s in symbols})
        scope = _or([{_key("sym_", s): True} for s in syms])
        if scope is None:
            return {}
        where = _and([{"kind": {"$in": ["strategy", "lesson"]}}, scope])

        def go() -> dict[str, FamilyRecord]:
            got = self._col.get(where=where, include=["metadatas", "documents"], limit=limit)
            rows = sorted(
                (
                    {**m, "_text": doc}
                    for m, doc in zip(got["metadatas"] or [], got["documents"] or [], strict=False)
                    if m
                ),
                key=lambda m: str(m.get("created_at", "")),
                reverse=True,
            )
            out: dict[str, FamilyRecord] = {}
            for m in rows:
                fam, outcome = m.get("family"), m.get("outcome")
                if not fam or outcome not in ("passed", "failed"):
                    continue
                if m.get("kind") == "lesson" and m.get("source") == "gate":
                    continue
                if exclude_run is not None and m.get("run_id") == exclude_run:
                    continue
                rec = out.setdefault(fam, FamilyRecord(family=fam))
                if outcome == "passed":
                    rec.n_passed += 1
                else:
                    rec.n_failed += 1
                    why = m.get("reason") or (m["_text"] if m.get("kind") == "lesson" else None)
                    label = f"run {m.get('run_id')} iteration {m.get('iteration', '?')}"
                    score = m.get("score")
                    if isinstance(score, int | float):
                        label += f", score {score:.2f}"
                        if isinstance(m.get("sharpe"), int | float):
                            label += f", Sharpe {m['sharpe']:.2f}"
                    if why:
                        label += f": {why}"
                    if len(rec.reasons) < 3:
                        rec.reasons.append(label)
                score = m.get("score")
                if isinstance(score, int | float):
                    rec.best_score = max(rec.best_score or score, score)
                rec.symbols = sorted(
                    set(rec.symbols) | (set(str(m.get("symbols", "")).split(",")) & set(syms))
                )
                if m.get("run_id") and m["run_id"] not in rec.runs:
                    rec.runs.append(m["run_id"])
            return out

        return self._guarded("family_outcomes", go, {})


# --------------------------------------------------------------------------- decisions


def adjust_families(
    families: Sequence[str], outcomes: Mapping[str, FamilyRecord], *, min_failures: int = 1
) -> tuple[list[str], list[str], list[str]]:
    """Reorder recommended families by what memory says happened on these symbols.

    A family with at least one pass moves to the front ("promoted"); one with at least
    ``min_failures`` failures and no pass moves to the back ("demoted", fewest failures
    first). Nothing is removed: memory reorders, the gate still decides.
    Returns (families, notes, demoted).
    """
    promoted, neutral, demoted = [], [], []
    notes: list[str] = []
    for fam in families:
        rec = outcomes.get(fam)
        if rec and rec.n_passed > 0:
            promoted.append(fam)
            notes.append(
                f"promoted {fam}: {rec.n_passed} past variant(s) passed the gate on "
                f"{', '.join(rec.symbols)} (best score {_fmt(rec.best_score, '.2f')}; "
                f"{rec.n_failed} failed)"
            )
        elif rec and rec.n_failed >= min_failures:
            demoted.append(fam)
            notes.append(
                f"demoted {fam}: {rec.n_failed} past variant(s) failed the gate on "
                f"{', '.join(rec.symbols)} and none passed (runs {', '.join(rec.runs[:3])}); "
                f"e.g. {rec.reasons[0] if rec.reasons else 'no reason recorded'}"
            )
        else:
            neutral.append(fam)
    demoted.sort(key=lambda f: outcomes[f].n_failed)  # stable: fewest failures first
    return promoted + neutral + demoted, notes, demoted


def memory_for(ctx: Any) -> ResearchMemory:
    """The run's memory, opened once and kept in ``ctx.cache['memory']``.

    Where it lives, first match wins: ``ctx.memory`` (a ResearchMemory, if the run context
    has one), ``ctx.cache['memory_dir']``, ``ctx.config.memory_dir``, else
    :func:`default_memory_dir`. A dir of ``False`` / ``"off"`` / ``"none"`` disables memory.
    """
    cache = ctx.cache
    mem = cache.get("memory")
    if isinstance(mem, ResearchMemory):
        return mem
    mem = getattr(ctx, "memory", None)
    if not isinstance(mem, ResearchMemory):
        where: Any = cache.get("memory_dir")
        if where is None:
            where = getattr(getattr(ctx, "config", None), "memory_dir", None)
        if where is False or (isinstance(where, str) and where.lower() in ("off", "none")):
            mem = ResearchMemory.disabled("memory switched off for this run")
        else:
            mem = ResearchMemory(where)
            if mem.reason and getattr(ctx, "progress", None) is not None:
                ctx.progress.stage("memory", f"no memory this run: {mem.reason}")
    cache["memory"] = mem
    return mem


def remember_gate_outcome(ctx: Any, state: Mapping[str, Any], decision: Any) -> int:
    """For the router, after each GateDecision: store the variants tried and the gate's
    lesson in the run's memory. Never raises; returns the number of records stored."""
    try:
        synthesis = state.get("synthesis") or {}
        return memory_for(ctx).remember_gate_decision(
            ctx.run.root.name,
            decision,
            list(state.get("variants") or []),
            symbols=list(ctx.symbols),
            regime=synthesis.get("regime"),
        )
    except Exception as exc:  # memory is an aid: never a reason to lose an iteration
        log.warning("gate lessons not stored: %s: %s", type(exc).__name__, exc)
        return 0


def recollections_json(
    recalled: Sequence[Recollection],
    *,
    query: Mapping[str, Any],
    outcomes: Mapping[str, FamilyRecord],
    notes: Sequence[str],
    status: Mapping[str, Any],
) -> dict[str, Any]:
    """The content of ``research/recalled.json``."""
    return json.loads(
        json.dumps(
            {
                "memory": dict(status),
                "query": dict(query),
                "recalled": [r.model_dump(mode="json") for r in recalled],
                "family_outcomes": {k: v.model_dump(mode="json") for k, v in outcomes.items()},
                "adjustments": list(notes),
            },
            default=str,
        )
    )
