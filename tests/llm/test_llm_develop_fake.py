"""The develop loop with LLM brains, the model faked at the chat-model boundary: calls are
made, validated, logged; bad output falls back; a rerun replays from the cache with 0 calls."""

import json

import pytest
from llm_fakes import SchemaAwareChat

import swarm.llm.client as client_mod
from experiments.tracker import read_records, strip_volatile
from swarm.develop import main

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _develop(tmp_path, daily_dir, monkeypatch, *, mode="good", out="runs", extra=()):
    fake = SchemaAwareChat(messages=iter([]), mode=mode)
    fake.calls = []
    monkeypatch.setattr(client_mod, "default_model_factory", lambda settings, model: fake)
    code = main(
        [
            "--directive",
            "trend following in tech",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2014-01-01",
            "--end",
            "2018-12-31",
            "--variants",
            "2",
            "--max-iterations",
            "2",
            "--folds",
            "2",
            "--workers",
            "2",
            "--offline",
            "--alt-data",  # the fake's scripted answers are for the technical prompts
            "off",
            "--quiet",
            "--memory-dir",
            "off",
            "--ledger-dir",  # a replay: the second run must see the first one's facts
            "off",
            "--out",
            str(tmp_path / out),
            "--llm",
            "openai-compatible:fake",
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "--llm-cache",
            str(tmp_path / "llm_cache"),
            *extra,
        ]
    )
    assert code == 0
    run_dir = next((tmp_path / out).iterdir())
    return run_dir, fake


def test_llm_brains_are_used_validated_and_replayed(tmp_path, daily_dir, monkeypatch, capsys):
    run_dir, fake = _develop(tmp_path, daily_dir, monkeypatch, mode="evil_code")
    tools = {t for t, _ in fake.calls}
    assert {"LLMFinding", "LLMStrategyProposals", "LLMSummary"} <= tools
    findings = json.loads((run_dir / "research" / "findings.json").read_text())
    assert any(
        f["interpretation"].endswith(
            "reads " + str(next(iter(sorted(f["evidence"].items())))[1]) + "."
        )
        for f in findings
        if f["type"] == "technical"
    )
    variants = json.loads((run_dir / "variants.json").read_text())
    assert any(
        v["spec"]["entry"] == "ema_cross" and "llm" in v["spec"]["name"] for v in variants.values()
    )
    assert not any(v["spec"]["entry"] == "custom" for v in variants.values())  # evil code never ran
    records = list(read_records(run_dir / "experiments.jsonl"))
    rejected = [r for r in records if r["kind"] == "llm_rejected"]
    assert rejected and "import" in json.dumps(rejected[0]["reasons"])
    usage = [r for r in records if r["kind"] == "llm_usage"]
    assert usage and usage[-1]["llm"]["calls"] > 0 and usage[-1]["llm_replay"]["live_calls"] > 0
    # The code-writing prompt saw no third-party text and no fence.
    assert all("UNTRUSTED_DATA" not in p for t, p in fake.calls if t == "LLMStrategyProposals")

    # Same inputs, same cache: zero live calls and the same log, timestamps aside.
    run2, fake2 = _develop(tmp_path, daily_dir, monkeypatch, mode="evil_code", out="runs2")
    assert fake2.calls == []
    again = list(read_records(run2 / "experiments.jsonl"))
    assert strip_volatile(again) == strip_volatile(records)


def test_invented_numbers_fall_back_to_the_rules_and_are_logged(tmp_path, daily_dir, monkeypatch):
    run_dir, _ = _develop(tmp_path, daily_dir, monkeypatch, mode="invent")
    records = list(read_records(run_dir / "experiments.jsonl"))
    fallbacks = [
        r for r in records if r["kind"] == "llm_fallback" and r["role"] == "research_subagent"
    ]
    assert fallbacks and all("123456.7" in json.dumps(r["reasons"]) for r in fallbacks)
    findings = json.loads((run_dir / "research" / "findings.json").read_text())
    assert not any("123456.7" in f["interpretation"] for f in findings)


def test_the_budget_stops_the_run_cleanly(tmp_path, daily_dir, monkeypatch):
    run_dir, _ = _develop(tmp_path, daily_dir, monkeypatch, extra=["--max-llm-tokens", "300"])
    verdict = json.loads((run_dir / "verdict.json").read_text())
    records = list(read_records(run_dir / "experiments.jsonl"))
    usage = [r for r in records if r["kind"] == "llm_usage"][-1]["llm"]
    assert usage["exhausted"] and usage["tokens_used"] >= 300
    if verdict["verdict"] == "ABANDON":
        assert verdict["reason"].startswith("budget")
    assert (run_dir / "report.md").exists() and (run_dir / "manifest.json").exists()
