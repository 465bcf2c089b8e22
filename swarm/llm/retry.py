"""Ask a model once more with the reason its answer was rejected: the one retry policy of
every LLM role (research brains, strategy development, the decision pipeline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swarm.llm.client import LLMClient

Check = Callable[[Any], tuple[Any, str | None]]


def ask_with_retry(
    client: LLMClient, role: str, messages: list[tuple[str, str]], schema: Any, check: Check
) -> tuple[Any, list[str]]:
    """Ask, check, and on a rejected answer ask once more with the reason. Returns
    (accepted value or None, the reasons for every rejection)."""
    reasons: list[str] = []
    for attempt in range(2):
        parsed, error = client.structured(role, messages, schema)
        if parsed is None:
            reasons.append(error or "no answer")
            if error == "budget exhausted":
                break
        else:
            value, problem = check(parsed)
            if problem is None:
                return value, reasons
            reasons.append(problem)
        if attempt == 0:
            messages = [
                *messages,
                ("human", f"Your answer was rejected: {reasons[-1]}. Answer again, correctly."),
            ]
    return None, reasons
