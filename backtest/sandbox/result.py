"""A sandboxed job's outcome, and the child's result line checked and booked into one.

The result transport of ``backtest.sandbox``: a child's line is only a claim (its status and
fill log, with the nonce the parent sent it for that job); ``check_line`` checks it is the running
job's, and ``book`` hands its fill log to the books (``backtest.books``), which compute every
figure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backtest.books import FillLog, IntegrityError, account, window_bars
from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.trace import fill_rows, order_rows

__all__ = [
    "CHILD_ERROR_CHARS",
    "ITEMS_FIXED",
    "ITEMS_PER_BAR",
    "Claim",
    "OnOutcome",
    "SandboxOutcome",
    "book",
    "check_line",
    "claimed_error",
    "error_outcome",
    "items_bound",
]

# What a line may hold, checked on its bytes before ``json.loads`` builds anything: JSON
# arrays, objects and commas per fed bar and feed (a fill is ~10, an order ~6: a strategy
# filling and ordering three times a bar on every feed fits), plus a fixed part.
ITEMS_PER_BAR = 64
ITEMS_FIXED = 4096
# A child's error is its exception's type and message, one line, at most this long: enough
# for "NameError: name 'x' is not defined [line 12 in next: ...]", too short to be a channel.
CHILD_ERROR_CHARS = 300
_ERROR_SHAPE = re.compile(r"[A-Za-z_][\w.]*(:| |$)")  # "Type: message", "Type [line 3 ...]"


@dataclass
class SandboxOutcome:
    """What a sandboxed call returns: the result and, when asked for, the run's trace."""

    result: BacktestResult
    trace: dict[str, Any] | None = None
    # Bars the run completed (the books' count; a failed run's own word, None when unknown):
    # the lookahead check compares where a cut run failed with where the full run did.
    bars: int | None = None


OnOutcome = Callable[[int, SandboxOutcome], None]  # (index of the job in its batch, outcome)


def error_outcome(job: BacktestJob, status: JobStatus, message: str) -> SandboxOutcome:
    """A failed outcome of ``job``: ``status``, and ``message`` on one line, at most 500 chars."""
    return SandboxOutcome(
        BacktestResult(
            job_id=job.job_id,
            variant_id=job.variant_id,
            symbol=job.symbol,
            fold=job.fold.index,
            status=status,
            error=" ".join(str(message).split())[:500],
        )
    )


def claimed_error(raw: Any) -> str:
    """A child's error as the parent keeps it: one line, an exception's shape, capped."""
    text = " ".join(str(raw)[: CHILD_ERROR_CHARS * 4].split())
    if not _ERROR_SHAPE.match(text):
        text = "Error: (the job's message was not an exception's type and message)"
    return text[:CHILD_ERROR_CHARS]


def items_bound(job: BacktestJob) -> int:
    """The most JSON items (arrays, objects, commas) a result line of ``job`` may hold."""
    bars = sum(window_bars(frame, job.fold) for _, frame in job.feeds())
    return ITEMS_PER_BAR * bars + ITEMS_FIXED


def _check_size(job: BacktestJob, line: bytes) -> None:
    """Refuse a line with more structure than the job's bars can explain, before parsing
    it: two million empty arrays are 6 MB of text but gigabytes of Python objects."""
    items = line.count(b",") + line.count(b"[") + line.count(b"{")
    bound = items_bound(job)
    if items > bound:
        raise IntegrityError(
            f"a result line of {items} JSON items, over the {bound} this job's bars allow"
        )


@dataclass
class Claim:
    """A well-formed OK line of the running job, not yet booked: its fill log and what came
    with it. ``book`` replays it; the parent sends the next job first (the replay is the
    costly part, and the next job's run need not wait for it)."""

    log: FillLog
    duration_s: float
    trace: Any


def check_line(
    job: BacktestJob, line: bytes, trace: bool, nonce: str
) -> tuple[SandboxOutcome | Claim, bool]:
    """One result line of ``job``, checked: (its outcome or its claim to book, whether the
    line was foreign).

    A foreign line (malformed, another job's, a wrong nonce) is an integrity error and stops
    the child. A well-formed line of this job is a claim: an error or timeout is taken as
    it is (it can only hurt the job), a fill log is returned for the books (``book``).
    """
    try:
        _check_size(job, line)
        payload = json.loads(line)
        if not isinstance(payload, dict):
            raise IntegrityError("a result line that is not a JSON object")
        if set(payload) == {"error"}:  # the child's confinement failed before any job ran
            return error_outcome(job, JobStatus.ERROR, claimed_error(payload["error"])), False
        if payload.get("job_id") != job.job_id or payload.get("nonce") != nonce:
            raise IntegrityError(
                "a result line that is not this job's (its job id or nonce differs from the "
                "one sent for this job)"
            )
        status = payload.get("status")
        if status in (JobStatus.ERROR, JobStatus.TIMEOUT):
            failed = error_outcome(job, JobStatus(status), claimed_error(payload.get("error")))
            bars = payload.get("bars")
            failed.bars = bars if isinstance(bars, int) and not isinstance(bars, bool) else None
            return failed, False
        if status != JobStatus.OK:
            raise IntegrityError(f"a result line with status {str(status)[:40]!r}")
        log = FillLog.from_json(payload.get("log"))
        claimed_trace = payload.get("trace") if trace else None
    except (ValueError, RecursionError, IntegrityError) as exc:
        why = exc if isinstance(exc, IntegrityError) else f"a malformed result line ({exc})"
        return error_outcome(job, JobStatus.INTEGRITY_ERROR, f"IntegrityError: {why}"), True
    duration = payload.get("duration_s")
    return Claim(log, duration if isinstance(duration, float) else 0.0, claimed_trace), False


def book(job: BacktestJob, claim: Claim, trace: bool) -> SandboxOutcome:
    """A claim booked: the books replay its fill log and compute every figure."""
    books = account(job, claim.log, duration_s=claim.duration_s)
    out = SandboxOutcome(books.result)
    if books.result.status == JobStatus.OK:
        out.bars = len(books.values)
    if trace and books.result.status == JobStatus.OK and isinstance(claim.trace, dict):
        lines = claim.trace.get("lines")
        if isinstance(lines, dict):
            # Orders and fills as the books hold them: the orders the recorder copied at
            # placement (every fill answered one), not the child's own list.
            symbols = len(job.feeds()) > 1
            out.trace = {
                "orders": order_rows(claim.log, job, symbols=symbols),
                "lines": lines,
                "fills": fill_rows(books.fills, symbols=symbols),
                "n_bars": len(books.values),
            }
    return out
