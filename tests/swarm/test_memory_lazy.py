"""A lazy memory: nothing to recall costs no chromadb import and no store open; when records
about the symbol exist, recall opens the store and finds exactly what an eager memory finds.
The index beside the store is a superset of its records, even when a writer bypasses it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.memory import ResearchMemory
from swarm.memory import index as store_index

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def _lesson(mem: ResearchMemory, text: str, symbols: list[str], **kw) -> None:
    assert mem.remember_lesson("r1", 1, text, symbols=symbols, **kw) == 1


def _texts(found) -> list[str]:
    return [r.text for r in found]


def _run(code: str) -> dict:
    """``code`` in a fresh interpreter (sys.modules shows what it imported); its last line
    of stdout is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LAZY_RECALL = """
import json, sys
from swarm.memory import ResearchMemory
mem = ResearchMemory({path!r}, lazy=True)
found = mem.recall({symbols!r}, kinds=("lesson",), k=50, min_relevance=-2.0)
print(json.dumps({{"texts": [r.text for r in found], "opened": mem.opened,
                  "chromadb": "chromadb" in sys.modules, "status": mem.status()}}))
"""


def test_nothing_to_recall_imports_no_chromadb_and_creates_nothing(tmp_path):
    empty = tmp_path / "memory"
    got = _run(LAZY_RECALL.format(path=str(empty), symbols=["NVDA"]))
    assert got == {"texts": [], "opened": False, "chromadb": False, "status": got["status"]}
    assert got["status"]["opened"] is False and got["status"]["records"] is None
    assert not empty.exists()  # nothing was created for a read

    # A store about other symbols only: its index rules NVDA out without opening it.
    mem = ResearchMemory(empty)
    _lesson(mem, "breakout whipsawed on AAPL", ["AAPL"])
    assert json.loads((empty / store_index.INDEX_FILE).read_text())["symbol_flags"] == ["sym_AAPL"]
    got = _run(LAZY_RECALL.format(path=str(empty), symbols=["NVDA"]))
    assert (got["texts"], got["opened"], got["chromadb"]) == ([], False, False)


def test_records_about_the_symbol_are_recalled_as_by_an_eager_memory(tmp_path):
    path = tmp_path / "memory"
    writer = ResearchMemory(path)
    _lesson(writer, "NVDA stop hit: the breakout failed", ["NVDA"], outcome="falsified")
    _lesson(writer, "NVDA and AMD moved together", ["NVDA", "AMD"])
    _lesson(writer, "AAPL drifted", ["AAPL"])
    eager = ResearchMemory(path).recall(["NVDA"], kinds=("lesson",), k=50, min_relevance=-2.0)
    assert len(eager) == 2

    lazy = ResearchMemory(path, lazy=True)
    assert not lazy.opened
    assert _texts(lazy.recall(["nvda"], kinds=("lesson",), k=50, min_relevance=-2.0)) == _texts(
        eager
    )
    assert lazy.opened and lazy.available and lazy.status()["records"] == 3
    # In a fresh process: opened (chromadb imported) only because NVDA has records.
    got = _run(LAZY_RECALL.format(path=str(path), symbols=["NVDA"]))
    assert got["texts"] == _texts(eager) and got["opened"] and got["chromadb"]
    assert got["status"]["available"] is True and got["status"]["records"] == 3


def test_a_lazy_memory_writes_and_then_recalls(tmp_path):
    mem = ResearchMemory(tmp_path / "memory", lazy=True)
    assert mem.recall(["MSFT"]) == [] and not mem.opened
    _lesson(mem, "MSFT gap filled in two days", ["MSFT"])
    assert mem.opened and _texts(mem.recall(["MSFT"], kinds=("lesson",))) == [
        "MSFT gap filled in two days"
    ]
    assert ResearchMemory(tmp_path / "memory", lazy=True).family_outcomes(["TSLA"]) == {}


def test_a_sector_scope_is_indexed_too(tmp_path):
    path = tmp_path / "memory"
    _lesson(
        ResearchMemory(path),
        "tech names mean-revert after gaps",
        ["AAPL"],
        scope={"sector": "tech"},
    )
    assert store_index.may_hold(path, ["XOM"], "tech")
    assert not store_index.may_hold(path, ["XOM"], "energy")
    lazy = ResearchMemory(path, lazy=True)
    assert _texts(lazy.recall(["XOM"], sector="tech", kinds=("lesson",), min_relevance=-2.0)) == [
        "tech names mean-revert after gaps"
    ]


def test_a_store_without_an_index_is_opened_and_the_index_rebuilt(tmp_path):
    """A store written before the index existed (or its index lost) is never trusted empty."""
    path = tmp_path / "memory"
    _lesson(ResearchMemory(path), "NVDA gap and go", ["NVDA"])
    (path / store_index.INDEX_FILE).unlink()
    assert store_index.may_hold(path, ["TSLA"])  # unknown: open and look
    lazy = ResearchMemory(path, lazy=True)
    assert lazy.recall(["TSLA"]) == [] and lazy.opened
    rebuilt = store_index.read_index(path)
    assert rebuilt is not None and rebuilt.symbol_flags == {"sym_NVDA"}
    assert store_index.is_current(path, rebuilt)
    assert not store_index.may_hold(path, ["TSLA"]) and store_index.may_hold(path, ["NVDA"])


def test_a_writer_that_bypasses_the_index_is_noticed(tmp_path):
    """Chroma written behind the index's back (an older version of the lab sharing the folder):
    the database no longer matches the index's stamp, so a lazy recall opens the store."""
    path = tmp_path / "memory"
    mem = ResearchMemory(path)
    _lesson(mem, "AAPL drifted", ["AAPL"])
    assert not store_index.may_hold(path, ["NVDA"])
    mem._col.upsert(
        ids=["foreign"],
        documents=["NVDA squeezed higher"],
        metadatas=[{"kind": "lesson", "symbols": "NVDA", "sym_NVDA": True}],
    )
    assert store_index.may_hold(path, ["NVDA"])
    found = ResearchMemory(path, lazy=True).recall(["NVDA"], kinds=("lesson",), min_relevance=-2.0)
    assert _texts(found) == ["NVDA squeezed higher"]
    assert store_index.read_index(path).symbol_flags == {"sym_AAPL", "sym_NVDA"}


def test_the_index_is_written_before_the_records_it_covers(tmp_path, monkeypatch):
    """A write that dies after the index update and before Chroma's leaves a superset."""
    path = tmp_path / "memory"
    mem = ResearchMemory(path)
    _lesson(mem, "AAPL drifted", ["AAPL"])

    def crash(**kwargs):
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(mem._col, "upsert", crash)
    assert mem.remember_lesson("r2", 1, "NVDA lesson", symbols=["NVDA"]) == 0  # degraded
    assert store_index.read_index(path).symbol_flags == {"sym_AAPL", "sym_NVDA"}
    assert ResearchMemory(path, lazy=True).recall(["NVDA"]) == []  # opened, nothing there


def test_a_corrupt_store_still_degrades_when_lazy(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "chroma.sqlite3").write_bytes(b"not a database" * 100)
    mem = ResearchMemory(bad, lazy=True)
    assert mem.recall(["AAPL"]) == [] and mem.opened
    assert not mem.available and "not a database" in mem.reason
    assert mem.status()["available"] is False
