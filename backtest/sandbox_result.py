"""A sandboxed job's outcome, and the child's result line checked and booked into one.

The result transport of ``backtest.sandbox``: a child's line is only a claim (its status and
fill log, with the nonce the parent sent it for that job); ``_parse`` checks it is the running
job's and hands the fill log to the books (``backtest.books``), which compute every figure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backtest.books import FillLog, IntegrityError, account
from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.trace import fill_rows, order_rows


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


def _parse(job: BacktestJob, line: bytes, trace: bool, nonce: str) -> tuple[SandboxOutcome, bool]:
    """One result line of ``job``, booked: (its outcome, whether the line was foreign).

    A foreign line (malformed, another job's, a wrong nonce) is an integrity error and stops
    the child. A well-formed line of this job is a claim: an error or timeout is taken as
    it is (it can only hurt the job), a fill log goes to the books.
    """
    try:
        payload = json.loads(line)
        if not isinstance(payload, dict):
            raise IntegrityError("a result line that is not a JSON object")
        if set(payload) == {"error"}:  # the child's confinement failed before any job ran
            return error_outcome(job, JobStatus.ERROR, str(payload["error"])), False
        if payload.get("job_id") != job.job_id or payload.get("nonce") != nonce:
            raise IntegrityError(
                "a result line that is not this job's (its job id or nonce differs from the "
                "one sent for this job)"
            )
        status = payload.get("status")
        if status in (JobStatus.ERROR, JobStatus.TIMEOUT):
            failed = error_outcome(job, JobStatus(status), str(payload.get("error")))
            bars = payload.get("bars")
            failed.bars = bars if isinstance(bars, int) and not isinstance(bars, bool) else None
            return failed, False
        if status != JobStatus.OK:
            raise IntegrityError(f"a result line with status {str(status)[:40]!r}")
        log = FillLog.from_json(payload.get("log"))
        claimed_trace = payload.get("trace") if trace else None
    except (ValueError, IntegrityError) as exc:
        why = exc if isinstance(exc, IntegrityError) else f"a malformed result line ({exc})"
        return error_outcome(job, JobStatus.INTEGRITY_ERROR, f"IntegrityError: {why}"), True
    duration = payload.get("duration_s")
    books = account(job, log, duration_s=duration if isinstance(duration, float) else 0.0)
    out = SandboxOutcome(books.result)
    if books.result.status == JobStatus.OK:
        out.bars = len(books.values)
    if trace and books.result.status == JobStatus.OK and isinstance(claimed_trace, dict):
        lines = claimed_trace.get("lines")
        if isinstance(lines, dict):
            # Orders and fills as the books hold them: the orders the recorder copied at
            # placement (every fill answered one), not the child's own list.
            symbols = len(job.feeds()) > 1
            out.trace = {"orders": order_rows(log, job, symbols=symbols), "lines": lines,
                         "fills": fill_rows(books.fills, symbols=symbols),
                         "n_bars": len(books.values)}  # fmt: skip
    return out, False
