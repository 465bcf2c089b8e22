"""The trace of a finished run: orders and every indicator line (``backtest.lookahead``).

Collected inside the sandboxed child (it walks the strategy's objects) and sent back as JSON;
line values travel as base64 little-endian float64 (``decode_line``). The fills are not the
child's to tell: the parent adds the fills its books accepted (``with_fills``).
"""

from __future__ import annotations

import base64
from typing import Any


def decode_line(text: str) -> Any:
    """A trace line back to a float64 numpy array."""
    import numpy as np

    return np.frombuffer(base64.b64decode(text), dtype="<f8")


def _walk_indicators(owner: Any, seen: set[int]) -> list[Any]:
    from backtest.engine import bt

    found = []
    iterators = getattr(owner, "_lineiterators", None) or {}
    for ind in iterators.get(bt.LineIterator.IndType, []):
        if id(ind) in seen:
            continue
        seen.add(id(ind))
        found.append(ind)
        found.extend(_walk_indicators(ind, seen))
    return found


def fill_rows(fills: list[Any], *, symbols: bool = False) -> list[list[Any]]:
    """The books' fills as trace rows: created and executed dates, side, size, price, fee
    (and, for a portfolio job, the symbol)."""
    return [
        [f.created.isoformat(), f.executed.isoformat(), f.side, f.size, f.price, f.commission]
        + ([f.symbol] if symbols else [])
        for f in fills
    ]


def order_rows(log: Any, job: Any, *, symbols: bool = False) -> list[list[Any]]:
    """The orders of a booked fill log as trace rows: the date placed, side, size, limit or
    stop price, type and stop-limit price as the recorder copied them at placement (and,
    for a portfolio job, the symbol). The lookahead check compares these up to each cut."""
    from backtest.books import feed_frames

    named = feed_frames(job.feeds(), job.fold)
    dates = [ts.date().isoformat() for ts in named[0][1].index]
    rows = []
    for o in log.orders or []:
        day = dates[o.created] if 0 <= o.created < len(dates) else f"bar {o.created}"
        row = [day, o.side, o.size, o.price, o.exectype, o.limit]
        if symbols:
            row.append(named[o.data][0] if 0 <= o.data < len(named) else f"feed {o.data}")
        rows.append(row)
    return rows


def collect_trace(run: Any) -> dict[str, Any]:
    """Orders and every indicator line of a finished run (JSON-able).

    Line values travel as base64 little-endian float64 (``decode_line``).
    Indicators are found through the strategy's ``_lineiterators`` (what
    ``getindicators()`` returns) and, recursively, their own sub-indicators;
    each line is keyed ``"<n>:<Class>.<alias>"`` by construction order, which
    is the same in any two runs of the same code. Values are by bar position
    from the first fed bar (NaN where undefined).
    """
    strat = run.strategy
    import numpy as np

    lines: dict[str, str] = {}
    for n, ind in enumerate(_walk_indicators(strat, set())):
        aliases = ind.getlinealiases() if hasattr(ind, "getlinealiases") else ()
        line_objs = list(getattr(ind, "lines", []) or []) if aliases else [ind]
        if not aliases:
            aliases = ("line",)
        for alias, line in zip(aliases, line_objs, strict=False):
            arr = getattr(line, "array", None)
            if arr is not None:
                raw = np.asarray(arr, dtype="<f8").tobytes()
                lines[f"{n}:{type(ind).__name__}.{alias}"] = base64.b64encode(raw).decode()
    # (created date, side, size, price), plus the feed's name when the job has several feeds
    orders = [list(o) for o in strat.__dict__.get("_lab_orders", [])]
    return {"orders": orders, "lines": lines, "n_bars": len(run.dates)}
