"""What ``gate.judge`` reads from a user's file: the strategy code, its class and its scope.

A file is either a strategy module (one ``bt.Strategy`` subclass, ``params`` optional) or a
file ``experiments.export`` wrote: the lab's exported winner carries a runner (CSV reading,
an order gate subclassing the strategy) that the static lint refuses and that is not the
strategy, so the strategy it embeds is what is judged. Every check here is in the parent and
static; the code itself only ever runs in the sandbox.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from experiments.export import embedded_strategy
from gate.errors import GateError
from strategies.family_api import whole_universe
from strategies.portfolio import LABEL as PORTFOLIO
from strategies.validate import validate_code

Scope = Literal["symbol", "portfolio"]
SCOPES = ("auto", "symbol", "portfolio")
_NUMBERED_FEED = re.compile(r"data[1-9][0-9]*$")  # self.data1, self.data2 ...


class JudgeInputError(GateError):
    """Bad input to the judge (a file, an option, the data); one line naming the fix."""


class StrategyFile(BaseModel):
    """One file to judge: its own path, the code that runs and how it is fed."""

    path: Path
    code: str
    class_name: str
    scope: Scope
    exported: bool = False  # the code was cut out of an ``experiments.export`` file


def read_strategy(path: Path, *, scope: str = "auto") -> StrategyFile:
    """The file's strategy, linted as a user's class is (``params`` optional); a file that
    is missing, unreadable or refused raises ``JudgeInputError`` naming the fix."""
    if scope not in SCOPES:
        raise JudgeInputError(f"--scope: {scope!r} is not one of {', '.join(SCOPES)}")
    if not path.is_file():
        raise JudgeInputError(f"FILE: {path} is not a file; pass a .py with one bt.Strategy class")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JudgeInputError(f"FILE: cannot read {path}: {exc}") from None
    embedded = embedded_strategy(source)
    code = embedded if embedded is not None else source
    report = validate_code(code, require_params=False)
    if not report.ok or report.class_name is None:
        errors = "; ".join(report.errors[:3])
        hint = (
            "define exactly one class deriving bt.Strategy (import backtrader as bt)"
            if report.class_name is None
            else "fix the lines named (only backtrader and math may be imported)"
        )
        raise JudgeInputError(f"FILE: {path} is refused: {errors}; {hint}")
    return StrategyFile(
        path=path,
        code=code,
        class_name=report.class_name,
        scope=detect_scope(code) if scope == "auto" else scope,
        exported=embedded is not None,
    )


def detect_scope(code: str) -> Scope:
    """``portfolio`` when the class reads feeds beyond the first (``self.datas`` other than
    ``self.datas[0]``, ``self.data1``, ``self.dnames``): it then gets every ticker at once;
    else ``symbol``: one run per ticker. Index feeds (``getdatabyname("index:SPY")``) are
    added either way and do not make a portfolio."""
    tree = ast.parse(code)
    first_only: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "datas"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == 0
        ):
            first_only.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr == "datas" and id(node) not in first_only:
            return "portfolio"
        if node.attr == "dnames" or _NUMBERED_FEED.match(node.attr):
            return "portfolio"
    return "symbol"


def job_symbols(f: StrategyFile, tickers: list[str]) -> list[str]:
    """What a file runs on: each ticker alone, or (portfolio) all at once, under the label."""
    return [PORTFOLIO] if whole_universe(f.scope) else list(tickers)


def variant_ids(files: list[StrategyFile]) -> list[str]:
    """One id per file, its stem, made unique (two ``strategy.py`` from two exports)."""
    out: list[str] = []
    for f in files:
        base, n = f.path.stem, 1
        vid = base
        while vid in out:
            n += 1
            vid = f"{base}-{n}"
        out.append(vid)
    return out
