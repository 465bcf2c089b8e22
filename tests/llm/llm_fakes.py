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
