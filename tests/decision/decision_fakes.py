"""A chat model faked at the boundary for the decision roles: it answers whichever schema it is
bound to from the prompt it sees, as a competent endpoint would under function calling.
``mode``: "good", "invent" (numbers that are not in the facts), "wrong_ticker",
"wrong_action" (the judge acts against the thesis's direction), "wide" (the trader's stop
3.9 ATR away with a 1.1R target), "name_real" (a model that
recognises the company and names its real ticker, NVDA, whatever it was shown), "unsure"
(analyst notes at confidence 0.3, 0.35 once asked to critique themselves)."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class DecisionChat(GenericFakeChatModel):
    tool: str | None = None
    mode: str = "good"
    calls: list = []

    def bind_tools(self, tools: Any, **kwargs: Any):
        schema = tools[0]
        name = schema.__name__ if isinstance(schema, type) else schema["function"]["name"]
        return self.model_copy(update={"tool": name})

    def reply(self, prompt: str) -> dict:
        """The tool call's arguments for ``prompt`` (a subclass answers other schemas)."""
        return answer(self.tool, prompt, self.mode)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        prompt = "\n".join(str(m.content) for m in messages)
        self.calls.append((self.tool, prompt))
        args = self.reply(prompt)
        msg = AIMessage(
            content="",
            tool_calls=[
                {"name": self.tool or "none", "args": args, "id": "c1", "type": "tool_call"}
            ],
            usage_metadata={"input_tokens": 90, "output_tokens": 10, "total_tokens": 100},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _ticker(prompt: str, mode: str) -> str:
    found = re.search(r"Ticker: ([A-Z.\-]+)\.", prompt)
    if mode in ("wrong_ticker", "name_real"):
        return {"wrong_ticker": "MSFT", "name_real": "NVDA"}[mode]
    return found.group(1) if found else ""


def answer(tool: str | None, prompt: str, mode: str) -> dict[str, Any]:
    ticker = _ticker(prompt, mode)
    extra = " It is worth 123456.7." if mode == "invent" else ""
    if tool == "LLMNote":
        evidence = json.loads(re.search(r"Evidence: (\{.*?\})", prompt).group(1))
        key, value = next(iter(sorted(evidence.items())))
        # "unsure": 0.3, and 0.35 after a self-critique (still under 0.40)
        confidence = (0.35 if "Critique your note" in prompt else 0.3) if mode == "unsure" else 0.6
        return {
            "ticker": ticker,
            "stance": 0.5,
            "confidence": confidence,
            "summary": f"The tape reads constructive.{extra}",
            "key_points": [f"{key} cited"],
            "cited": [{"key": key, "value": value}],
        }
    if tool == "LLMTurn":
        favours = None
        if "risk analyst" in prompt:
            favours = (
                "BUY"
                if "Proposal: long" in prompt
                else "SELL"
                if "Proposal: short" in prompt
                else "HOLD"
            )
        return {
            "ticker": ticker,
            "argument": f"My side has the better evidence.{extra}",
            "favours": favours,
        }
    if tool == "LLMVerdict":
        return {
            "ticker": ticker,
            "winner": "bull",
            "rationale": f"The bull case is stronger.{extra}",
            "key_disagreements": ["trend vs momentum"],
            "falsifiers": ["a lower close"],
            "conviction": 0.95,
        }
    if tool == "LLMThesis":
        facts = json.loads(re.search(r"Facts: (\{.*?\})", prompt).group(1))
        stop, target = facts["rules_stop"], facts["rules_target"]
        if mode == "wide":  # a 3.9-ATR stop with a 1.1R target, on the thesis's side
            entry, atr = facts["entry"], facts["ATR_14"]
            sign = 1.0 if target > entry else -1.0
            stop, target = entry - sign * 3.9 * atr, entry + sign * 1.1 * 3.9 * atr
        return {
            "ticker": ticker,
            "stop": stop,
            "target": target,
            "rationale": f"Two ATRs of room, two R of reward.{extra}",
        }
    if tool == "LLMJudgement":
        action = (
            "BUY"
            if "Proposal: long" in prompt
            else "SELL"
            if "Proposal: short" in prompt
            else "HOLD"
        )
        if mode == "wrong_action":
            action = {"BUY": "SELL", "SELL": "BUY"}.get(action, "BUY")
        return {"ticker": ticker, "action": action, "rationale": f"The team agrees.{extra}"}
    if tool == "LLMCritique":
        return {"critique": f"The thesis met its test.{extra}", "lessons": ["respect the stop"]}
    raise AssertionError(f"unexpected tool {tool}")
