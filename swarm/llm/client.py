"""The one place the lab talks to a chat model: structured calls, replay cache, token budget.

Every call is keyed by a hash of (role, model, endpoint, method-independent messages,
output schema, limits). Outcomes — parsed objects *and* failures — are cached, so a
rerun with the same inputs replays the same decisions and makes zero calls. A token
budget bounds the run: once spent, ``exhausted`` turns true and callers fall back to
their rules brains while the router ends the run with ABANDON (reason: budget).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from swarm.llm.leak_audit import LeakCounts
from swarm.llm.settings import LLMSettings

Messages = Sequence[tuple[str, str]]  # (role, content): "system" | "human"


@dataclass
class CallRecord:
    role: str
    model: str
    key: str
    cached: bool
    method: str | None
    tokens: int
    ok: bool
    error: str | None
    elapsed_s: float
    live: bool = False  # the model was actually called (not replayed, not refused by the budget)
    leaks: list[str] | None = None  # masked calls: the leak kinds the audit found ([] = clean)
    thread: int = field(default_factory=threading.get_ident)  # whose answer an audit annotates


class ReplayCache:
    """One JSON file per call key; written atomically so parallel subagents never clash."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached answer for ``key``, or None (a missing or damaged entry is a miss)."""
        path = self._path(key)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None  # a damaged entry is a miss, never a crash

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` atomically (a per-thread temp file, then a rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(value, sort_keys=True, default=str))
        os.replace(tmp, path)


def call_key(
    role: str, model: str, settings: LLMSettings, messages: Messages, schema: type[BaseModel]
) -> str:
    """The replay key of a call: sha256 of everything that shapes its answer."""
    payload = {
        "role": role,
        "model": model,
        "provider": settings.provider,
        "base_url": settings.base_url,
        "max_output_tokens": settings.max_output_tokens,
        "messages": [list(m) for m in messages],
        "schema": schema.model_json_schema(),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def default_model_factory(settings: LLMSettings, model: str):
    """A langchain-openai chat model for the configured endpoint (imported lazily)."""
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {
        "model": model,
        "temperature": 0,
        "max_retries": 1,
        "timeout": settings.timeout_s,
    }
    if settings.provider == "openai-compatible":
        # Local servers (llama.cpp, Ollama, vLLM) ignore or reject newer parameter names;
        # max_tokens in the body is what they all read.
        kwargs["base_url"] = settings.base_url
        kwargs["api_key"] = os.environ.get("OPENAI_API_KEY", "not-needed")
        kwargs["extra_body"] = {"max_tokens": settings.max_output_tokens}
    else:
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
        kwargs["max_tokens"] = settings.max_output_tokens
    return ChatOpenAI(**kwargs)


class LLMClient:
    def __init__(
        self,
        settings: LLMSettings,
        *,
        cache_dir: Path,
        model_factory: Callable[[LLMSettings, str], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.cache = ReplayCache(cache_dir)
        self._factory = model_factory or default_model_factory
        self._models: dict[str, Any] = {}
        self._method: dict[str, str] = {}
        self._lock = threading.Lock()
        # Live calls in flight at once: parallel callers queue here, not at the server, so a
        # request's timeout counts only its own answer.
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self.tokens_used = 0
        self.calls: list[CallRecord] = []
        self.leaks = LeakCounts()

    # -- budget -------------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        """Whether the token budget is spent."""
        limit = self.settings.max_tokens
        return limit is not None and self.tokens_used >= limit

    @property
    def n_live_calls(self) -> int:
        """Calls that reached the model (not replayed from the cache)."""
        return sum(c.live for c in self.calls)

    def stats(self) -> dict[str, Any]:
        """What the run asked of the model; identical for a run and its replay."""
        return {
            "calls": len(self.calls),
            "failed_calls": sum(not c.ok for c in self.calls),
            "tokens_used": self.tokens_used,
            "max_tokens": self.settings.max_tokens,
            "exhausted": self.exhausted,
        }

    def leak_stats(self) -> dict[str, Any]:
        """The leak audit over the run's masked answers (see ``swarm.llm.leak_audit``)."""
        return self.leaks.summary()

    def record_audit(self, kinds: list[str]) -> None:
        """The audit of the answer to this thread's latest call: counted, and kept on its record
        (``llm_calls.jsonl``)."""
        with self._lock:
            self.leaks.add(kinds)
            for rec in reversed(self.calls):
                if rec.thread == threading.get_ident():
                    rec.leaks = list(kinds)
                    break

    def write_calls(self, path: Path) -> None:
        """``llm_calls.jsonl``: one line per call, with its audit when it was masked."""
        from dataclasses import asdict

        with self._lock:
            lines = [
                json.dumps({k: v for k, v in asdict(c).items() if k != "thread"}, sort_keys=True)
                for c in self.calls
            ]
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, path)

    def replay_stats(self) -> dict[str, int]:
        """How the calls were served: live (the model ran) or replayed from the cache."""
        return {"live_calls": self.n_live_calls, "cached_calls": sum(c.cached for c in self.calls)}

    # -- calls --------------------------------------------------------------------------
    def structured(
        self, role: str, messages: Messages, schema: type[BaseModel]
    ) -> tuple[BaseModel | None, str | None]:
        """Ask for ``schema``; returns (parsed, None) or (None, why it failed). Never raises."""
        model = self.settings.model_for(role)
        key = call_key(role, model, self.settings, messages, schema)
        t0 = time.monotonic()
        refusal_key = f"{key}-refused-{self.settings.max_tokens}"
        hit = self.cache.get(key) or self.cache.get(refusal_key)
        if hit is not None:
            # A replay spends the tokens the original call spent, so the budget runs out at the
            # same point and the run takes the same path; refusals replay as refusals.
            tokens = int(hit.get("tokens") or 0)
            with self._lock:
                self.tokens_used += tokens
            parsed = self._validate(schema, hit.get("parsed"))
            error = None if parsed is not None else (hit.get("error") or "cached failure")
            self._record(
                CallRecord(
                    role,
                    model,
                    key,
                    True,
                    hit.get("method"),
                    tokens,
                    parsed is not None,
                    error,
                    0.0,
                )
            )
            return parsed, error
        # One slot per live call; the budget is read once the slot is ours, so callers that
        # queued while the budget was being spent are refused, not sent.
        with self._slots:
            if self.exhausted:
                # Recorded under the budget it depends on: a rerun with a larger budget asks
                # again.
                self.cache.put(
                    refusal_key, {"parsed": None, "error": "budget exhausted", "tokens": 0}
                )
                self._record(
                    CallRecord(role, model, key, False, None, 0, False, "budget exhausted", 0.0)
                )
                return None, "budget exhausted"
            parsed, error, method, tokens = self._invoke(model, messages, schema)
            with self._lock:
                self.tokens_used += tokens
        self.cache.put(
            key,
            {
                "parsed": parsed.model_dump(mode="json") if parsed is not None else None,
                "error": error,
                "method": method,
                "tokens": tokens,
            },
        )
        self._record(
            CallRecord(
                role,
                model,
                key,
                False,
                method,
                tokens,
                parsed is not None,
                error,
                round(time.monotonic() - t0, 3),
                live=True,
            )
        )
        return parsed, error

    def _record(self, rec: CallRecord) -> None:
        with self._lock:
            self.calls.append(rec)

    @staticmethod
    def _validate(schema: type[BaseModel], data: Any) -> BaseModel | None:
        if data is None:
            return None
        try:
            return schema.model_validate(data)
        except Exception:
            return None

    def _chat(self, model: str):
        with self._lock:
            if model not in self._models:
                self._models[model] = self._factory(self.settings, model)
            return self._models[model]

    def _methods(self, model: str) -> list[str]:
        if self.settings.structured != "auto":
            return [self.settings.structured]
        if model in self._method:
            return [self._method[model]]
        # OpenAI supports strict json_schema; local servers often only tool calling.
        if self.settings.provider == "openai":
            return ["json_schema", "function_calling"]
        return ["function_calling", "json_schema"]

    def _prepare(self, messages: Messages) -> list[tuple[str, str]]:
        """Local chat formats such as llama.cpp's ``gemma`` drop system messages: fold them
        into the first human turn so the instructions survive."""
        if self.settings.provider != "openai-compatible":
            return list(messages)
        system = [c for r, c in messages if r == "system"]
        rest = [(r, c) for r, c in messages if r != "system"]
        if system and rest:
            rest[0] = (rest[0][0], "Instructions: " + " ".join(system) + "\n\n" + rest[0][1])
        return rest

    def _invoke(
        self, model: str, messages: Messages, schema: type[BaseModel]
    ) -> tuple[BaseModel | None, str | None, str | None, int]:
        chat = self._chat(model)
        messages = self._prepare(messages)
        last_error = "no structured-output method worked"
        tokens = 0
        for method in self._methods(model):
            try:
                runnable = chat.with_structured_output(schema, method=method, include_raw=True)
                out = runnable.invoke(list(messages))
            except Exception as exc:  # endpoint rejected the method (HTTP 4xx/5xx) or is down
                last_error = f"{method}: {type(exc).__name__}: {str(exc)[:200]}"
                continue
            tokens += _tokens_of(out.get("raw"), messages)
            parsed, perr = out.get("parsed"), out.get("parsing_error")
            self._method.setdefault(model, method)  # the endpoint accepted it: keep using it
            if parsed is not None and not isinstance(parsed, BaseModel):
                parsed = self._validate(schema, parsed)
            if parsed is None:
                return None, f"malformed output ({method}): {str(perr)[:200]}", method, tokens
            return parsed, None, method, tokens
        return None, last_error, None, tokens


def _tokens_of(raw: Any, messages: Messages) -> int:
    usage = getattr(raw, "usage_metadata", None) or {}
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    if total:
        return int(total)
    # No usage reported (some local servers, fakes): estimate ~4 characters a token so the
    # budget still bounds the run.
    chars = sum(len(c) for _, c in messages) + len(str(getattr(raw, "content", "")))
    chars += len(json.dumps(getattr(raw, "tool_calls", []) or [], default=str))
    return max(1, chars // 4)
