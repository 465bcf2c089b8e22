"""A store left torn by a killed process: chromadb 1.5.9 segfaults opening it (#7238, #6949,
#6979); the lab probes such a store in a subprocess, rebuilds it from SQLite with every
record, keeps the old folder aside, and says so in one line. A sound store is probed once.

The torn shape, pinned here: a vector segment persisted to disk whose ``data_level0.bin`` is
half overwritten (a flush cut short), with log entries Chroma has still to replay into it.
Truncating the file alone does not crash 1.5.9 (it reads zeros or raises)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.memory import ResearchMemory, safety
from swarm.memory import index as store_index

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
SYMBOLS = ("AAPL", "MSFT", "NVDA")
PERSISTED, UPDATED, ADDED = 300, 20, 20  # records in the segment; then left in the log

BUILD = """
import sys, chromadb
from chromadb.config import Settings
from swarm.memory import ResearchMemory
from swarm.memory.embedding import chroma_embedding_class
from swarm.memory.records import lesson_record
path = sys.argv[1]
syms = {symbols!r}
client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
# small batches, so Chroma persists the vector segment after every 50 records
client.create_collection("swarm_memory", embedding_function=chroma_embedding_class()(),
    configuration={{"hnsw": {{"space": "cosine", "batch_size": 50, "sync_threshold": 50}}}})
mem = ResearchMemory(path)
def rec(i, tag):
    sym = syms[i % len(syms)]
    _, text, meta = lesson_record("r1", 1, f"{{sym}} breakout lesson {{i}} ({{tag}})", None,
        symbols=[sym], family="breakout", regime=None, outcome="failed", scope={{}})
    return f"lesson-{{i}}", text, meta
for start in range(0, {persisted}, 50):
    assert mem._upsert([rec(i, "first") for i in range(start, start + 50)]) == 50
# fewer than a batch: stays in the log, replayed into the segment at the next open
tail = [rec(i, "second") for i in range({updated})]
tail += [rec(i, "first") for i in range({persisted}, {persisted} + {added})]
assert not tail or mem._upsert(tail) == len(tail)
"""

PLAIN_OPEN = """
import sys, chromadb
from chromadb.config import Settings
from swarm.memory.embedding import chroma_embedding_class
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
col = client.get_collection("swarm_memory", embedding_function=chroma_embedding_class()())
print(col.count(), flush=True)  # segfaults here when the log has entries to replay
print(col.query(query_texts=["AAPL breakout"], n_results=3)["ids"])  # else here
"""

OPEN_VIA_LAB = """
import json, sys
from swarm.memory import ResearchMemory
mem = ResearchMemory(sys.argv[1])
found = mem.recall(["AAPL"], kinds=("lesson",), k=400, min_relevance=-2.0)
got = mem._col.get(include=["documents"]) if mem._col is not None else {"ids": [], "documents": []}
print(json.dumps({"available": mem.available, "reason": mem.reason, "notice": mem.notice,
                  "count": mem.count(), "recalled": [r.text for r in found],
                  "records": dict(zip(got["ids"], got["documents"])),
                  "outcomes": {k: v.model_dump(mode="json")
                               for k, v in mem.family_outcomes(["AAPL"]).items()}}))
"""


def _python(code: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _tear(store: Path) -> None:
    """A flush cut short: the second half of the vector segment's level-0 data is garbage."""
    (level0,) = store.glob("*/data_level0.bin")
    data = bytearray(level0.read_bytes())
    data[len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)
    level0.write_bytes(bytes(data))


def _expected_records() -> dict[str, str]:
    out = {}
    for i in range(PERSISTED + ADDED):
        sym = SYMBOLS[i % len(SYMBOLS)]
        tag = "second" if i < UPDATED else "first"
        out[f"lesson-{i}"] = f"{sym} breakout lesson {i} ({tag})"
    return out


def _torn(tmp_path_factory, *, updated: int, added: int) -> Path:
    """A lab store torn the way a killed writer leaves it; skipped unless plain chromadb
    really segfaults on it (another chromadb may raise or cope instead)."""
    store = tmp_path_factory.mktemp("torn") / "memory"
    build = BUILD.format(symbols=SYMBOLS, persisted=PERSISTED, updated=updated, added=added)
    done = _python(build, str(store))
    assert done.returncode == 0, done.stderr
    if not list(store.glob("*/data_level0.bin")):
        pytest.skip("this chromadb did not persist a vector segment for the test store")
    _tear(store)
    (store / safety.WRITING_MARKER).write_text("12345\n")  # the writer died mid-flush
    check = store.with_name("plain-check")
    shutil.copytree(store, check)
    plain = _python(PLAIN_OPEN, str(check), timeout=60)
    if plain.returncode != -11:
        pytest.skip(f"plain chromadb does not segfault on the torn store (exit {plain.returncode})")
    return store


@pytest.fixture(scope="module")
def torn_store(tmp_path_factory) -> Path:
    """Torn, with log entries still to replay: plain chromadb segfaults on ``count()``."""
    return _torn(tmp_path_factory, updated=UPDATED, added=ADDED)


@pytest.fixture(scope="module")
def torn_store_without_log(tmp_path_factory) -> Path:
    """Torn, its log fully applied: ``count()`` works, the first vector query segfaults."""
    return _torn(tmp_path_factory, updated=0, added=0)


def test_a_torn_store_is_rebuilt_with_every_record_and_the_old_one_kept(torn_store, tmp_path):
    store = tmp_path / "memory"
    shutil.copytree(torn_store, store)
    level0 = next(store.glob("*/data_level0.bin")).read_bytes()

    done = _python(OPEN_VIA_LAB, str(store))
    assert done.returncode == 0, done.stderr  # no segfault
    got = json.loads(done.stdout.strip().splitlines()[-1])
    n = PERSISTED + ADDED
    assert got["available"] is True and got["reason"] is None and got["count"] == n
    assert got["records"] == _expected_records()  # updates from the log included
    (aside,) = tmp_path.glob("memory.corrupt-*")
    assert got["notice"] == (
        f"research memory at {store} was unsound (opening it crashed chromadb (SIGSEGV)): "
        f"rebuilt it with {n} of {n} records; the old folder is kept at {aside}"
    )
    assert "\n" not in got["notice"]
    assert got["notice"] in done.stderr  # the one warning line
    assert next(aside.glob("*/data_level0.bin")).read_bytes() == level0  # kept as it was
    assert (aside / safety.WRITING_MARKER).exists()
    aapl = {t for t in _expected_records().values() if t.startswith("AAPL")}
    assert got["recalled"] and set(got["recalled"]) <= aapl  # the vector search works again
    assert got["outcomes"]["breakout"]["n_failed"] == len(aapl)  # family lessons, rebuilt

    # The rebuilt store is verified: the next open is a plain one, with the same records.
    assert not safety.needs_probe(store)
    assert not (store / safety.WRITING_MARKER).exists()
    assert store_index.read_index(store).symbol_flags == {f"sym_{s}" for s in SYMBOLS}
    again = _python(OPEN_VIA_LAB, str(store))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["notice"] is None
    assert list(tmp_path.glob("memory.corrupt-*")) == [aside]


def test_a_torn_store_with_nothing_to_replay_is_caught_by_the_probe_query(
    torn_store_without_log, tmp_path
):
    store = tmp_path / "memory"
    shutil.copytree(torn_store_without_log, store)
    (store / safety.WRITING_MARKER).unlink()
    (store / safety.VERIFIED_MARKER).unlink()  # a store from before this check
    done = _python(OPEN_VIA_LAB, str(store))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["count"] == PERSISTED and got["recalled"]
    assert f"rebuilt it with {PERSISTED} of {PERSISTED} records" in got["notice"]


def test_the_probe_tells_a_segfault_from_a_sound_store(torn_store, tmp_path):
    store = tmp_path / "memory"
    shutil.copytree(torn_store, store)
    found = safety.probe(store, "swarm_memory")
    assert found.verdict is safety.Verdict.CRASHED and "SIGSEGV" in found.detail
    sound = tmp_path / "sound"
    ResearchMemory(sound).remember_lesson("r1", 1, "AAPL drifted", symbols=["AAPL"])
    assert safety.probe(sound, "swarm_memory").verdict is safety.Verdict.SOUND


def test_salvage_reads_every_record_without_chromadb(torn_store):
    rescued = safety.salvage(torn_store, "swarm_memory")
    assert dict(zip(rescued.ids, rescued.documents, strict=True)) == _expected_records()
    meta = rescued.metadatas[rescued.ids.index("lesson-0")]
    assert meta["kind"] == "lesson" and meta["sym_AAPL"] is True and meta["iteration"] == 1
    assert safety.DOCUMENT_KEY not in meta
    assert safety.salvage(torn_store, "no_such_collection").ids == []


# ---- the decision to probe, without a torn store


class _Probes:
    """Counts probes; answers with ``verdict`` or runs the real one."""

    def __init__(self, verdict: safety.Verdict | None = None) -> None:
        self.calls = 0
        self.verdict = verdict
        self.real = safety.probe

    def __call__(self, store, collection, **kw):
        self.calls += 1
        if self.verdict is None:
            return self.real(store, collection, **kw)
        return safety.ProbeResult(self.verdict, f"pretend {self.verdict.value}")


def _store_with(path: Path, *texts: str) -> ResearchMemory:
    mem = ResearchMemory(path)
    for t in texts:
        assert mem.remember_lesson("r1", 1, t, symbols=["AAPL"]) == 1
    return mem


def test_a_sound_store_is_probed_once_then_never(tmp_path, monkeypatch):
    probes = _Probes()
    monkeypatch.setattr(safety, "probe", probes)
    path = tmp_path / "memory"
    _store_with(path, "AAPL drifted")
    assert probes.calls == 0  # created here: nothing to check
    assert not (path / safety.WRITING_MARKER).exists() and not safety.needs_probe(path)

    (path / safety.VERIFIED_MARKER).unlink()  # a store from before this check
    assert ResearchMemory(path).count() == 1 and probes.calls == 1
    assert (path / safety.VERIFIED_MARKER).read_text().strip() == safety.SAFETY_VERSION
    for _ in range(2):
        assert ResearchMemory(path).count() == 1
    assert probes.calls == 1


def test_a_writer_killed_mid_write_gets_the_store_probed(tmp_path, monkeypatch):
    probes = _Probes()
    monkeypatch.setattr(safety, "probe", probes)
    path = tmp_path / "memory"
    _store_with(path, "AAPL drifted")
    (path / safety.WRITING_MARKER).write_text("12345\n")  # a writer died inside an operation
    mem = ResearchMemory(path)
    assert probes.calls == 1 and mem.count() == 1 and mem.notice is None  # sound: kept
    assert not (path / safety.WRITING_MARKER).exists()
    assert list(tmp_path.iterdir()) == [path]


def test_an_operation_that_raises_leaves_the_marker(tmp_path, monkeypatch):
    path = tmp_path / "memory"
    mem = _store_with(path, "AAPL drifted")

    def crash(**kwargs):
        raise RuntimeError("chromadb failed mid-write")

    monkeypatch.setattr(mem._col, "upsert", crash)
    assert mem.remember_lesson("r1", 2, "AAPL gapped", symbols=["AAPL"]) == 0
    assert safety.needs_probe(path)


def test_a_store_that_crashes_the_probe_is_rebuilt_in_process(tmp_path, monkeypatch, caplog):
    path = tmp_path / "memory"
    _store_with(path, "AAPL drifted", "AAPL gapped")
    (path / safety.VERIFIED_MARKER).unlink()
    monkeypatch.setattr(safety, "probe", _Probes(safety.Verdict.CRASHED))
    mem = ResearchMemory(path)
    assert mem.available and mem.count() == 2
    assert sorted(r.text for r in mem.recall(["AAPL"], kinds=("lesson",), min_relevance=-2)) == [
        "AAPL drifted",
        "AAPL gapped",
    ]
    (aside,) = tmp_path.glob("memory.corrupt-*")
    assert "rebuilt it with 2 of 2 records" in mem.notice and str(aside) in mem.notice
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [mem.notice]
    assert mem.status()["notice"] == mem.notice
    # This process had the old store open: a new memory on the path sees the rebuilt one.
    assert ResearchMemory(path).count() == 2 and not safety.needs_probe(path)


def test_an_unreadable_database_starts_an_empty_store(tmp_path, monkeypatch):
    path = tmp_path / "memory"
    _store_with(path, "AAPL drifted")
    (path / safety.WRITING_MARKER).write_text("1\n")
    monkeypatch.setattr(safety, "probe", _Probes(safety.Verdict.HUNG))

    def unreadable(store, collection):
        raise OSError("disk I/O error")

    monkeypatch.setattr(safety, "salvage", unreadable)
    mem = ResearchMemory(path)
    assert mem.available and mem.count() == 0
    assert "started an empty store (rebuild failed: OSError: disk I/O error)" in mem.notice
    (aside,) = tmp_path.glob("memory.corrupt-*")
    assert (aside / "chroma.sqlite3").exists()  # the records are still there


def test_a_lazy_recall_ruled_out_by_the_index_never_probes(tmp_path, monkeypatch):
    path = tmp_path / "memory"
    _store_with(path, "AAPL drifted")
    (path / safety.WRITING_MARKER).write_text("1\n")
    probes = _Probes()
    monkeypatch.setattr(safety, "probe", probes)
    lazy = ResearchMemory(path, lazy=True)
    assert lazy.recall(["NVDA"]) == [] and not lazy.opened and probes.calls == 0


@pytest.mark.parametrize(
    ("code", "verdict", "detail"),
    [
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
            safety.Verdict.CRASHED,
            "SIGSEGV",
        ),
        ("import time; time.sleep(30)", safety.Verdict.HUNG, "hung for over 1s"),
        (
            "import json, sys; print(json.dumps({'error': 'X: bad'})); sys.exit(3)",
            safety.Verdict.FAILED,
            "X: bad",
        ),
        ("raise SystemExit(7)", safety.Verdict.UNCHECKED, "exited 7"),
        ("print('ok')", safety.Verdict.SOUND, ""),
    ],
)
def test_probe_verdicts(tmp_path, monkeypatch, code, verdict, detail):
    monkeypatch.setattr(safety, "_PROBE", code)
    found = safety.probe(tmp_path, "swarm_memory", timeout_s=1.0)
    assert found.verdict is verdict and detail in found.detail
    assert found.verdict.corrupt == (
        verdict in {safety.Verdict.CRASHED, safety.Verdict.HUNG, safety.Verdict.FAILED}
    )
