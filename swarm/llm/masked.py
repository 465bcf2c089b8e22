"""The LLM client seen through a mask: the one boundary every masked role goes through.

Every role asks through ``client.structured(role, messages, schema)``. A :class:`MaskedClient`
has the same face: it masks the messages (:mod:`swarm.llm.mask`), asks the real client (so
the replay cache and the budget see only masked prompts), audits the answer against the
prompt it answered (:mod:`swarm.llm.leak_audit`) and maps an answer that passes back to real
tickers and prices. A leaking answer comes back as a failure with the reason, so the role's
retry and its rules fallback take over as for any bad answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from swarm.llm.client import LLMClient, Messages
from swarm.llm.leak_audit import LeakCounts, audit_texts
from swarm.llm.mask import MaskContext, answer_texts, mask_messages, unmask_answer


class MaskedClient:
    """``LLMClient``'s calling face, masked. Shares the real client's cache, budget and call
    log; counts its own scope's audits in ``leaks`` (and the client's run-wide ones)."""

    def __init__(self, base: LLMClient, ctx: MaskContext) -> None:
        self.base = base
        self.ctx = ctx
        self.leaks = LeakCounts()

    def __getattr__(self, name: str) -> Any:
        # Everything else (budget, call log, leak_stats, write_calls) is the real client's.
        return getattr(self.base, name)

    @property
    def settings(self):
        """The wrapped client's settings."""
        return self.base.settings

    @property
    def exhausted(self) -> bool:
        """Whether the wrapped client's token budget is spent."""
        return self.base.exhausted

    def stats(self) -> dict[str, Any]:
        """The wrapped client's call statistics."""
        return self.base.stats()

    def replay_stats(self) -> dict[str, int]:
        """The wrapped client's replay-cache statistics."""
        return self.base.replay_stats()

    def structured(
        self, role: str, messages: Messages, schema: type[BaseModel]
    ) -> tuple[BaseModel | None, str | None]:
        """Ask with masked messages; an answer that names what the prompt did not show is rejected
        as a leak."""
        ctx = self.ctx.scoped("\n".join(content for _, content in messages))
        masked = mask_messages(messages, ctx)
        parsed, error = self.base.structured(role, masked, schema)
        if parsed is None:
            return None, error
        report = audit_texts(
            answer_texts(parsed),
            prompt="\n".join(content for _, content in masked),
            known=ctx.known,
            real_tickers=list(ctx.aliases),
        )
        kinds = [leak.kind.value for leak in report.leaks]
        self.leaks.add(kinds)
        self.base.record_audit(kinds)
        if not report.clean:
            return None, report.reason()
        try:
            return unmask_answer(parsed, ctx), None
        except ValueError as exc:  # an unmasked value broke the schema: a bad answer
            return None, f"answer does not map back: {str(exc)[:160]}"
