"""Memory: a persistent ChromaDB store with our own offline embedding, recall, and the
family adjustments it drives. Every store lives in tmp_path, never in the user cache."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

import swarm.memory.store as memory_mod
from swarm.memo import RunMemo
from swarm.memory import (
    EMBEDDING_NAME,
    FamilyRecord,
    HashingEmbedding,
    ResearchMemory,
    adjust_families,
    hashed_vector,
    memory_for,
)

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def no_real_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Any code path that falls back to the default store lands in tmp_path."""
    fake = tmp_path / "default-cache" / "memory"
    monkeypatch.setattr(memory_mod, "default_memory_dir", lambda: fake)
    return fake


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def _variant(vid: str, family: str, **params) -> dict:
    return {
        "variant_id": vid,
        "iteration": 1,
        "route": "INITIAL",
        "spec": {
            "family": family,
            "name": f"{family} {vid}",
            "entry": f"{family}_entry",
            "filters": [],
            "exits": ["stop_loss"],
            "parameters": params,
        },
    }


def _evaluation(vid: str, family: str, *, passed: bool, score: float, sharpe: float) -> dict:
    return {
        "variant_id": vid,
        "family": family,
        "trial_key": vid,
        "passed": passed,
        "score": score,
        "dsr": 0.5,
        "metrics": {"sharpe": sharpe, "n_trades": 40, "max_drawdown_pct": 18.0},
        "vetoes": [] if passed else ["deflated Sharpe 0.50 < 0.95"],
        "criteria_met": {"sharpe>=1": passed},
    }


def test_embedding_function_is_ours_deterministic_and_offline(tmp_path, monkeypatch, no_network):
    onnx_dir = tmp_path / "onnx_models"
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", onnx_dir)
    ef = HashingEmbedding()
    a, b = ef(["momentum failed on AAPL", "momentum failed on AAPL"])
    assert np.allclose(a, b) and abs(float(np.linalg.norm(a)) - 1) < 1e-6
    assert np.allclose(a, hashed_vector("momentum failed on AAPL"))  # stable across instances
    assert HashingEmbedding.name() == EMBEDDING_NAME
    assert HashingEmbedding.build_from_config(ef.get_config()).dim == ef.dim

    mem = ResearchMemory(tmp_path / "mem")
    assert mem.available, mem.reason
    assert isinstance(mem._col._embedding_function, HashingEmbedding)
    assert mem.remember_lesson("r1", 1, "breakout whipsawed on NVDA", symbols=["NVDA"]) == 1
    assert mem.recall(["NVDA"], k=3)[0].text == "breakout whipsawed on NVDA"
    # Nothing downloaded: Chroma's default ONNX model folder was never created.
    assert not onnx_dir.exists()
    assert not (Path.home() / ".cache" / "chroma" / "onnx_models").exists()


def test_store_persists_and_recall_ranks_by_symbols_style_and_regime(tmp_path):
    path = tmp_path / "mem"
    mem = ResearchMemory(path)
    mem.remember_lesson(
        "r1",
        2,
        "momentum crossover whipsawed",
        symbols=["AAPL"],
        family="momentum",
        regime="trending-up",
        outcome="failed",
    )
    mem.remember_lesson(
        "r1", 2, "mean reversion on energy names", symbols=["XOM"], family="mean_reversion"
    )
    mem.remember_research(
        "r1",
        {
            "regime": "range-bound",
            "signal": 0.1,
            "confidence": 0.3,
            "quality": "low",
            "recommended_families": ["breakout"],
            "gaps": [],
        },
        symbols=["MSFT"],
    )
    mem.remember_findings(
        "r1",
        [
            {
                "symbol": "AAPL",
                "type": "technical",
                "specialization": "trend",
                "interpretation": "x",
                "signal": 0.5,
                "confidence": 0.5,
                "as_of": "2017-01-03",
            }
        ],
    )

    again = ResearchMemory(path)  # a new handle on the same folder: it persisted
    assert again.count() == 4
    got = again.recall(["AAPL", "MSFT"], "momentum", "trending-up", k=5)
    # Filtered: the XOM lesson matches neither the symbols nor the style; findings are
    # not among the recalled kinds.
    assert {r.kind for r in got} == {"lesson", "research"}
    assert all("XOM" not in r.symbols for r in got)
    top = got[0]
    assert top.symbols == ["AAPL"] and top.family == "momentum" and top.outcome == "failed"
    assert "symbols AAPL" in top.matched and "style momentum" in top.matched
    assert [r.relevance for r in got] == sorted((r.relevance for r in got), reverse=True)
    # Style alone never reaches other symbols' lessons (a first run on new symbols recalls
    # nothing from unrelated runs).
    assert again.recall(["TSLA"], "mean_reversion") == []
    assert again.recall(["TSLA"], None, None) == []


def test_gate_decision_becomes_strategies_and_a_lesson(tmp_path):
    mem = ResearchMemory(tmp_path / "mem")
    decision = {
        "iteration": 1,
        "decision": "TUNE",
        "best_variant_id": "v2",
        "reasoning": "PARAMETER_ISSUE: close to the bar, tune around the best",
        "evaluations": [
            _evaluation("v1", "momentum", passed=False, score=0.21, sharpe=0.3),
            _evaluation("v2", "trend", passed=False, score=0.48, sharpe=0.8),
        ],
        "failure": {
            "failure_type": "PARAMETER_ISSUE",
            "root_cause": "Sharpe below target",
            "confidence": 0.7,
            "actions": ["widen the lookback"],
        },
    }
    variants = [_variant("v1", "momentum", lookback=20), _variant("v2", "trend", fast=20)]
    assert (
        mem.remember_gate_decision(
            "run-a", decision, variants, symbols=["AAPL", "MSFT"], regime="trending-up"
        )
        == 3
    )
    lessons = mem.recall(["AAPL"], k=10, kinds=("lesson",))
    assert len(lessons) == 1 and "routed TUNE" in lessons[0].text
    assert "widen the lookback" in lessons[0].text
    strategies = mem.recall(["MSFT"], k=10, kinds=("strategy",))
    assert {r.family for r in strategies} == {"momentum", "trend"}
    assert all(r.outcome == "failed" for r in strategies)
    assert any("lookback=20" in r.text and "FAILED" in r.text for r in strategies)

    outcomes = mem.family_outcomes(["AAPL"])
    # Strategies count; the gate's summary lesson does not count a second time.
    assert outcomes["momentum"].n_failed == 1 and outcomes["trend"].n_failed == 1
    assert "deflated Sharpe" in outcomes["momentum"].reasons[0]
    assert mem.family_outcomes(["XOM"]) == {}


def test_adjust_families_demotes_failures_and_promotes_passes():
    outcomes = {
        "momentum": FamilyRecord(
            family="momentum",
            n_failed=3,
            symbols=["AAPL"],
            runs=["r1", "r2"],
            reasons=["run r1 iteration 1: Sharpe 0.2"],
        ),
        "trend": FamilyRecord(family="trend", n_failed=2, symbols=["AAPL"], runs=["r1", "r2"]),
        "volatility": FamilyRecord(family="volatility", n_failed=4, symbols=["AAPL"], runs=["r1"]),
        "breakout": FamilyRecord(
            family="breakout", n_passed=1, n_failed=2, best_score=0.7, symbols=["AAPL"]
        ),
    }
    families, notes, demoted = adjust_families(
        ["momentum", "trend", "mean_reversion", "breakout", "volatility"], outcomes
    )
    # volatility failed in one run only: not evidence enough to demote it.
    assert families == ["breakout", "mean_reversion", "volatility", "trend", "momentum"]
    assert demoted == ["trend", "momentum"]
    assert any(
        n.startswith("demoted momentum: 3 past variant(s) failed") and "Sharpe 0.2" in n
        for n in notes
    )
    assert any(n.startswith("promoted breakout") for n in notes)
    assert adjust_families(["momentum"], {}) == (["momentum"], [], [])


def test_demotion_never_covers_every_family():
    two_runs = {"runs": ["r1", "r2"], "symbols": ["AAPL"]}
    outcomes = {
        "momentum": FamilyRecord(family="momentum", n_failed=3, **two_runs),
        "trend": FamilyRecord(family="trend", n_failed=2, **two_runs),
    }
    families, notes, demoted = adjust_families(["momentum", "trend"], outcomes)
    assert families == ["momentum", "trend"] and demoted == []
    assert notes and notes[0].startswith("no demotion: every family")


def test_recall_is_scoped_to_timeframe_symbols_or_sector(tmp_path):
    mem = ResearchMemory(tmp_path / "mem")
    daily = {"timeframe": "1d", "sector": "tech"}
    mem.remember_lesson(
        "r1",
        1,
        "momentum whipsawed on AAPL",
        symbols=["AAPL"],
        family="momentum",
        outcome="failed",
        scope=daily,
    )
    mem.remember_lesson(
        "r2",
        1,
        "hourly breakout on AAPL",
        symbols=["AAPL"],
        family="breakout",
        outcome="failed",
        scope={"timeframe": "1h"},
    )
    mem.remember_lesson(
        "r3", 1, "tech momentum on NVDA", symbols=["NVDA"], family="momentum", scope=daily
    )
    got = mem.recall(["AAPL"], "momentum", k=10, timeframe="1d")
    assert [r.run_id for r in got] == ["r1"]  # the hourly lesson is another timeframe
    by_sector = mem.recall(["MSFT"], "momentum", k=10, timeframe="1d", sector="tech")
    assert {r.run_id for r in by_sector} == {"r1", "r3"}
    assert all("sector tech" in r.matched for r in by_sector)
    assert mem.recall(["MSFT"], "momentum", k=10, timeframe="1d") == []  # no sector: nothing
    # The floor: everything that passes the scope must also be relevant enough.
    assert mem.recall(["AAPL"], k=10, timeframe="1d", min_relevance=5.0) == []
    outcomes = mem.family_outcomes(["AAPL"], timeframe="1h")
    assert set(outcomes) == {"breakout"}


def test_memory_line_is_short_and_points_to_the_file():
    from swarm.memory import memory_line

    line = memory_line([], demoted=["trend"], stored=34, reason=None)
    assert line == "recalled 0; demoted trend; stored 34 (research/recalled.json)"
    assert len(memory_line([], stored=0, reason="x" * 500)) < 160


def test_corrupt_store_degrades_to_no_memory(tmp_path, caplog):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "chroma.sqlite3").write_bytes(b"not a database" * 100)
    with caplog.at_level("WARNING", logger="swarm.memory"):
        mem = ResearchMemory(bad)
    assert not mem.available and "not a database" in mem.reason
    assert "research memory disabled" in caplog.text
    assert mem.recall(["AAPL"]) == [] and mem.family_outcomes(["AAPL"]) == {}
    assert mem.remember_lesson("r", 1, "x") == 0 and mem.count() == 0
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert not ResearchMemory(a_file).available


def test_locked_store_degrades_quickly_instead_of_hanging(tmp_path):
    path = tmp_path / "mem"
    mem = ResearchMemory(path)
    mem.remember_lesson("r", 1, "a lesson", symbols=["AAPL"])
    # Another process's write transaction (Chroma itself would block forever on it).
    con = sqlite3.connect(path / "chroma.sqlite3", timeout=0)
    con.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        assert mem.recall(["AAPL"]) == []
        assert not mem.available and "locked" in mem.reason
        other = ResearchMemory(path)
        assert not other.available and "locked" in other.reason
        assert time.monotonic() - t0 < 10
    finally:
        con.rollback()
        con.close()
    assert ResearchMemory(path).recall(["AAPL"])[0].text == "a lesson"


def test_store_busy_with_another_swarm_process_degrades(tmp_path):
    import fcntl

    path = tmp_path / "mem"
    ResearchMemory(path)
    with open(path / "swarm-memory.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        mem = ResearchMemory(path, lock_wait_s=0.2)
        assert not mem.available and "busy" in mem.reason


class _Cfg:
    timeframe = "1d"
    universe_source = "--tickers"

    def __init__(self, memory_dir=None) -> None:
        self.memory_dir = memory_dir


class _Ctx:
    def __init__(self, memory_dir=None) -> None:
        self.memo = RunMemo()
        self.config = _Cfg(memory_dir)
        self.progress = None


def test_memory_for_context(tmp_path, no_real_cache):
    ctx = _Ctx(memory_dir=tmp_path / "ctx-mem")
    mem = memory_for(ctx)
    assert mem.available and mem.path == tmp_path / "ctx-mem"
    assert memory_for(ctx) is mem  # opened once per run
    off = memory_for(_Ctx(memory_dir=False))
    assert not off.available and "switched off" in off.reason
    default = memory_for(_Ctx())
    assert default.path == no_real_cache  # the (patched) user-cache default


def test_router_helper_stores_real_gate_models(tmp_path):
    from backtest.contracts import Metrics
    from gate.contracts import FailureAnalysis, FailureType, GateDecision, Route, VariantEvaluation
    from swarm.memory import remember_gate_outcome

    metrics = Metrics(
        sharpe=0.42,
        sharpe_per_period=0.03,
        sortino=0.6,
        cagr_pct=4.0,
        total_return_pct=20.0,
        max_drawdown_pct=25.0,
        win_rate_pct=48.0,
        profit_factor=1.1,
        n_trades=35,
        exposure_pct=40.0,
        final_value=1.2e5,
        n_obs=1000,
        skew=0.0,
        kurtosis=3.0,
    )
    evaluation = VariantEvaluation(
        variant_id="i01-v01-breakout",
        family="breakout",
        trial_key="abc",
        metrics=metrics,
        vetoes=["deflated Sharpe 0.40 < 0.95"],
        criteria_met={"sharpe>=1.0": False},
        score=0.3,
    )
    decision = GateDecision(
        iteration=1,
        decision=Route.REFINE,
        best_variant_id="i01-v01-breakout",
        evaluations=[evaluation],
        reasoning="DESIGN_FLAW: no edge after deflation",
        failure=FailureAnalysis(
            failure_type=FailureType.DESIGN_FLAW,
            root_cause="no edge",
            confidence=0.6,
            actions=["add a regime filter"],
        ),
    )

    class Run:
        root = tmp_path / "runs" / "20260101-000000-x"

    ctx = _Ctx(memory_dir=tmp_path / "mem")
    ctx.run, ctx.symbols = Run(), ["NVDA"]
    from swarm.research.models import Regime, ResearchSynthesis

    synthesis = ResearchSynthesis.model_construct(regime=Regime.HIGH_VOL_CHOP)
    state = {
        "synthesis": synthesis,
        "variants": [_variant("i01-v01-breakout", "breakout", donchian_period=55)],
    }
    assert remember_gate_outcome(ctx, state, decision) == 2
    got = memory_for(ctx).recall(["NVDA"], "breakout", "high-vol-chop", k=5, timeframe="1d")
    assert {r.kind for r in got} == {"lesson", "strategy"}
    assert all(r.run_id == "20260101-000000-x" and r.regime == "high-vol-chop" for r in got)
    assert memory_for(ctx).family_outcomes(["NVDA"], timeframe="1d")["breakout"].n_failed == 1
    broken = _Ctx(memory_dir=tmp_path / "mem2")  # no .run: the helper logs, never raises
    assert remember_gate_outcome(broken, state, decision) == 0
