"""A model that knows the answers: the calibration of the mask (issue 29, item 3).

An OpenAI-compatible server on 127.0.0.1, like ``local_server``, but with no model behind it:
it plays a model that has read the future. When a prompt names a ticker of the corpus and a
day it can place (an ISO date, or the day whose close is a price the prompt quotes), it reads
that ticker's real close ten trading days later and answers every role of the decision desk
towards that sign: analysts all-in on it, the manager for that side at conviction 0.95, the
judge BUY or SELL. That is lookahead by construction, so an unmasked backtest with it must
show an edge the gate believes.

A masked prompt (alias, day offsets, rebased prices) leaves it blind. Then ``blind`` says what
it does: ``guess`` names a ticker and a year in its answer, as a model recalling the period
would (the leak audit must catch every such answer, and the rules brain then decides);
``neutral`` answers without a view. Either way a masked run must fall to null behaviour.

    python -m swarm.llm.cheat_server --port 8081 --data-dir ../shared/data/ohlcv/daily

``serve(data_dir)`` runs it in a thread for tests and yields the base URL. Roles outside the
decision desk (research, strategy writing, summaries) get an empty answer: it fails their
schema, so their rules fallback runs and the cheat stays confined to the decisions.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd

MODEL = "cheat"
HORIZON = 10  # trading days: the desk's default --horizon-days
_TICKER = re.compile(r"Ticker: ([A-Za-z0-9.\-]+)\.")
_ISO = re.compile(r"(?<!\d)((?:19|20)\d{2}-\d{2}-\d{2})(?!\d)")
_PRICE = re.compile(r'"(?:entry|CLOSE)":\s*(-?\d+(?:\.\d+)?)')
_JSON_AFTER = r"{label}: (\{{.*?\}})"


@dataclass
class Oracle:
    """The future, read from the corpus: ``sign(ticker, day)`` is +1, -1 or 0 (unknown)."""

    data_dir: Path
    horizon: int = HORIZON
    _closes: dict[str, pd.Series | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @functools.cached_property
    def tickers(self) -> frozenset[str]:
        """The symbols the data folder holds."""
        return frozenset(p.stem.upper() for p in Path(self.data_dir).glob("*.csv"))

    def closes(self, ticker: str) -> pd.Series | None:
        """The symbol's closes by date (read once, cached), or None without its file."""
        with self._lock:
            if ticker not in self._closes:
                path = Path(self.data_dir) / f"{ticker}.csv"
                self._closes[ticker] = (
                    pd.read_csv(path, usecols=["date", "close"], parse_dates=["date"])
                    .set_index("date")["close"]
                    .astype("float64")
                    if path.exists()
                    else None
                )
            return self._closes[ticker]

    def recognise(self, prompt: str) -> tuple[str, pd.Timestamp] | None:
        """(ticker, day) the prompt gives away, or None. A day with no date in the prompt is
        the one whose close equals a quoted entry or CLOSE: every desk role after the analysts
        sees one, and a rebased price matches no real close."""
        found = _TICKER.search(prompt)
        ticker = found.group(1).upper() if found else None
        if ticker not in self.tickers:
            return None
        closes = self.closes(ticker)
        if closes is None or closes.empty:
            return None
        for iso in _ISO.findall(prompt):
            day = pd.Timestamp(iso)
            if day in closes.index:
                return ticker, day
        for price in {float(p) for p in _PRICE.findall(prompt)}:
            hits = closes.index[(closes - price).abs() <= 1e-6 * max(abs(price), 1.0)]
            if len(hits) == 1:  # an ambiguous price identifies no day
                return ticker, hits[0]
        return None

    def sign(self, ticker: str, day: pd.Timestamp) -> int:
        """Sign of the return ``horizon`` bars after ``day``: the future the cheat reads (0 past the
        data's end)."""
        closes = self.closes(ticker)
        i = closes.index.get_loc(day)
        if i + self.horizon >= len(closes):
            return 0  # past the corpus's end: even the cheat does not know
        ret = closes.iloc[i + self.horizon] / closes.iloc[i] - 1.0
        return 1 if ret > 0 else -1 if ret < 0 else 0


def _json_after(label: str, prompt: str) -> dict[str, Any]:
    m = re.search(_JSON_AFTER.format(label=label), prompt)
    try:
        return json.loads(m.group(1)) if m else {}
    except ValueError:
        return {}


def _guess(prompt: str, tickers: frozenset[str]) -> str:
    """A ticker a blind model would name: deterministic per prompt (replays stay identical),
    three letters or more (what the audit reads as a ticker outside the scope)."""
    pool = sorted(t for t in tickers if len(t) >= 3) or ["NVDA"]
    return pool[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(pool)]


def answer(tool: str, prompt: str, oracle: Oracle, blind: str = "guess") -> dict[str, Any]:
    """The arguments of the ``tool`` call this cheat makes for ``prompt``. Texts carry no
    digit: the desk rejects any number not in the evidence, and the cheat wants to pass."""
    seen = oracle.recognise(prompt)
    asked = _TICKER.search(prompt)
    ticker = asked.group(1) if asked else ""
    s = oracle.sign(*seen) if seen else 0
    why = {1: "The next two weeks go up.", -1: "The next two weeks go down.", 0: "No view."}[s]
    if ticker.upper() not in oracle.tickers and blind == "guess":
        # A model recalling the period names it: the ticker field and a year in the text.
        ticker = _guess(prompt, oracle.tickers)
        why = f"This is {ticker} in {2010 + len(prompt) % 10}; I remember what came next."
    side = {1: "bull", -1: "bear", 0: "none"}[s]
    if tool == "LLMNote":
        evidence = _json_after("Evidence", prompt)
        cited = [{"key": k, "value": v} for k, v in sorted(evidence.items())[:1]]
        return {
            "ticker": ticker,
            "stance": float(s),
            "confidence": 0.9 if s else 0.1,
            "summary": why,
            "key_points": [why],
            "cited": cited,
        }
    if tool == "LLMTurn":
        favours = None
        if "risk analyst" in prompt:
            favours = _action(prompt, s)
        return {"ticker": ticker, "argument": why, "favours": favours}
    if tool == "LLMVerdict":
        return {
            "ticker": ticker,
            "winner": side,
            "rationale": why,
            "key_disagreements": [],
            "falsifiers": [why],
            "conviction": 0.95 if s else 0.0,
        }
    if tool == "LLMThesis":
        facts = _json_after("Facts", prompt)
        return {
            "ticker": ticker,
            "stop": facts.get("rules_stop", 0.0),
            "target": facts.get("rules_target", 0.0),
            "rationale": why,
        }
    if tool == "LLMJudgement":
        return {"ticker": ticker, "action": _action(prompt, s), "rationale": why}
    if tool == "LLMCritique":
        return {"critique": why, "lessons": [why]}
    return {}  # not a desk role: fails its schema, its rules brain answers


def _action(prompt: str, s: int) -> str:
    """BUY or SELL where the future goes, when the proposal goes that way; HOLD otherwise
    (the judge may not act against the proposal)."""
    if s > 0 and "Proposal: long" in prompt:
        return "BUY"
    if s < 0 and "Proposal: short" in prompt:
        return "SELL"
    return "HOLD"


def completion(body: dict[str, Any], oracle: Oracle, blind: str) -> dict[str, Any]:
    """An OpenAI chat completion for ``body``: a tool call under function calling, JSON
    content under ``response_format`` json_schema."""
    prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    tools = body.get("tools") or []
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    name = tools[0]["function"]["name"] if tools else schema.get("name", "")
    args = json.dumps(answer(name, prompt, oracle, blind))
    if tools:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_cheat",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": args}, "stop"
    prompt_tokens = max(1, len(prompt) // 4)
    completion_tokens = max(1, len(args) // 4)
    return {
        "id": "chatcmpl-cheat",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", MODEL),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def make_server(data_dir: Path, port: int = 0, blind: str = "guess") -> ThreadingHTTPServer:
    """An OpenAI-compatible server on ``port`` (0: any free one) that answers from future prices."""
    oracle = Oracle(Path(data_dir))

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                self._send(200, completion(body, oracle, blind))
            except Exception as exc:  # a bad request is the client's answer, never a crash
                self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # thousands of calls a run: silent

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


@contextlib.contextmanager
def serve(data_dir: Path, *, blind: str = "guess", port: int = 0) -> Iterator[str]:
    """The cheat in a background thread; yields its base URL (``.../v1``)."""
    server = make_server(data_dir, port, blind)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    """CLI: serve the cheating model until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m swarm.llm.cheat_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--data-dir", type=Path, required=True, help="the daily OHLCV CSVs")
    parser.add_argument(
        "--blind",
        choices=("guess", "neutral"),
        default="guess",
        help="on a masked prompt: name a ticker (default) or answer with no view",
    )
    args = parser.parse_args(argv)
    server = make_server(args.data_dir, args.port, args.blind)
    print(
        f"cheating on http://127.0.0.1:{server.server_address[1]}/v1 (model {MODEL!r})",
        file=sys.stderr,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
