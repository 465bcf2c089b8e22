"""A chat model faked at the boundary: it answers with scripted tool calls, as a real
OpenAI-compatible endpoint does under function calling."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage


class ScriptedToolChat(GenericFakeChatModel):
    """Every invocation consumes the next scripted message; records the prompts it saw."""

    seen: list = []

    def bind_tools(self, tools: Any, **kwargs: Any):  # tools are implied by the script
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(messages)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def tool_call(name: str, args: dict[str, Any], tokens: int = 50) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": "call-1", "type": "tool_call"}],
        usage_metadata={"input_tokens": tokens - 10, "output_tokens": 10, "total_tokens": tokens},
    )


def scripted(*messages: AIMessage) -> tuple[ScriptedToolChat, list]:
    seen: list = []
    model = ScriptedToolChat(messages=iter(messages))
    model.seen = seen
    return model, seen


def factory_for(model: ScriptedToolChat):
    return lambda settings, name: model


def exhausting() -> Iterator[AIMessage]:
    raise AssertionError("the model must not be called")


class SchemaAwareChat(GenericFakeChatModel):
    """Answers whatever schema it is bound to, from the prompt it sees — a stand-in for a
    competent endpoint. ``mode`` injects misbehaviour: "good", "invent" (numbers not in the
    evidence) or "evil_code" (strategy code with a forbidden import)."""

    tool: str | None = None
    mode: str = "good"
    calls: list = []

    def bind_tools(self, tools: Any, **kwargs: Any):
        schema = tools[0]
        name = schema.__name__ if isinstance(schema, type) else schema["function"]["name"]
        return self.model_copy(update={"tool": name})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.outputs import ChatGeneration, ChatResult

        prompt = messages[-1].content if messages else ""
        self.calls.append((self.tool, prompt))
        args = _answer(self.tool, prompt, self.mode)
        msg = tool_call(self.tool or "none", args, tokens=max(20, len(prompt) // 4))
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _answer(tool: str | None, prompt: str, mode: str) -> dict[str, Any]:
    import json
    import re

    if tool == "LLMFinding":
        symbol = re.search(r"Symbol: ([A-Z.\-]+)\.", prompt).group(1)
        evidence = json.loads(re.search(r"Evidence: (\{.*?\})", prompt).group(1))
        key, value = next(iter(sorted(evidence.items())))
        text = f"{key} reads {value}." if mode != "invent" else f"{key} reads 123456.7."
        return {
            "symbol": symbol,
            "signal": 0.1,
            "confidence": 0.4,
            "interpretation": text,
            "cited": [{"key": key, "value": value}],
        }
    if tool == "LLMStrategyProposals":
        good = {
            "family": "trend",
            "entry": "ema_cross",
            "filters": ["adx"],
            "exits": ["atr_stop"],
            "sizing": "fixed_fraction",
            "parameters": [{"name": "fast_period", "value": 15}],
            "rationale": "trend following with a strength filter",
        }
        evil = {
            "family": "momentum",
            "entry": "custom",
            "rationale": "evil",
            "code": "import os\nimport backtrader as bt\n\nclass E(bt.Strategy):\n    def next(self):\n        os.system('id')\n",
        }
        return {"proposals": [good, evil] if mode == "evil_code" else [good]}
    if tool == "LLMFailure":
        return {
            "failure_type": "PARAMETER_ISSUE",
            "root_cause": "the best variant is close to the thresholds",
            "confidence": 0.5,
            "actions": ["tune parameters near the best"],
        }
    if tool == "LLMSummary":
        return {"summary": "The desk sees a mixed picture; see the fact sheets."}
    raise AssertionError(f"unexpected tool {tool}")
