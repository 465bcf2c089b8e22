"""Calls in flight at once are capped per client (``--llm-concurrency``): parallel callers
queue at the client, not at a one-slot local server where they waited past the timeout."""

from __future__ import annotations

import threading
import time

import pytest
from langchain_core.messages import AIMessage
from llm_fakes import tool_call
from pydantic import BaseModel

from swarm.llm.client import LLMClient
from swarm.llm.settings import LLMSettings, parse_llm_arg

pytestmark = pytest.mark.unit


class Answer(BaseModel):
    n: int


class SlowChat:
    """A chat model whose answers take 30 ms and that counts how many are asked at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inflight = 0
        self.peak = 0

    def with_structured_output(self, schema, method, include_raw):
        return self

    def invoke(self, messages):
        with self.lock:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
        time.sleep(0.03)
        with self.lock:
            self.inflight -= 1
        raw: AIMessage = tool_call("Answer", {"n": 1})
        return {"raw": raw, "parsed": Answer(n=1), "parsing_error": None}


def _peak(tmp_path, settings: LLMSettings, callers: int = 8) -> int:
    chat = SlowChat()
    client = LLMClient(settings, cache_dir=tmp_path / "cache", model_factory=lambda s, m: chat)
    threads = [
        threading.Thread(
            target=client.structured, args=("research_subagent", [("human", f"q{i}")], Answer)
        )
        for i in range(callers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(client.calls) == callers and all(c.ok for c in client.calls)
    return chat.peak


def test_an_openai_compatible_server_gets_one_call_at_a_time_by_default(tmp_path) -> None:
    local = parse_llm_arg("openai-compatible:gemma", base_url="http://127.0.0.1:8080/v1")
    assert local.max_concurrency == 1
    assert _peak(tmp_path / "a", local) == 1
    three = parse_llm_arg(
        "openai-compatible:gemma", base_url="http://127.0.0.1:8080/v1", concurrency=3
    )
    assert _peak(tmp_path / "b", three) == 3
    assert parse_llm_arg("openai:gpt-4o-mini").max_concurrency == 8


def test_a_concurrency_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="--llm-concurrency: 0 must be at least 1"):
        parse_llm_arg("openai-compatible:gemma", base_url="http://127.0.0.1:8080/v1", concurrency=0)


def test_callers_queued_while_the_budget_is_spent_are_refused_not_sent(tmp_path) -> None:
    """The budget is read once a caller holds the slot: with one slot and a budget the first
    answer spends, the seven callers queued behind it never reach the model (before, each
    had passed the check on arrival and was sent in turn: a CI run went past 25 minutes)."""
    settings = parse_llm_arg(
        "openai-compatible:gemma", base_url="http://127.0.0.1:8080/v1", max_tokens=10
    )
    chat = SlowChat()
    client = LLMClient(settings, cache_dir=tmp_path / "cache", model_factory=lambda s, m: chat)
    threads = [
        threading.Thread(
            target=client.structured, args=("research_subagent", [("human", f"q{i}")], Answer)
        )
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.n_live_calls == 1 and client.exhausted
    assert sorted(c.error or "" for c in client.calls) == [""] + ["budget exhausted"] * 7
