"""Static validation of strategy source before it is ever executed.

An AST lint, deliberately strict: generated (or LLM-written) code may import only backtrader and
math, may not reach for introspection or I/O builtins, may not touch dunder attributes or frame
objects, and may not read a line at a positive index (``close[1]``, ``close(1)``), which in
Backtrader silently looks into the future. It is a gate, not a sandbox: the backtest still runs
the code isolated.
"""

from __future__ import annotations

import ast

from pydantic import BaseModel, Field

ALLOWED_IMPORTS = frozenset({"backtrader", "math"})
FORBIDDEN_NAMES = frozenset(
    {
        "open", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr",
        "globals", "locals", "vars", "input", "breakpoint", "memoryview", "__builtins__",
        "exit", "quit", "dir", "type", "super",
    }
)  # fmt: skip
# Attributes that lead from a generator, coroutine, traceback or function to frames and globals.
FRAME_ATTRS = frozenset(
    {
        "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
        "ag_code", "tb_frame", "tb_next", "f_globals", "f_locals", "f_builtins", "f_back",
        "f_code", "co_code", "func_globals", "func_code",
    }
)  # fmt: skip
# Attribute names that are Backtrader lines (a call on them with ago>0 looks ahead).
LINE_NAMES = frozenset(
    {"open", "high", "low", "close", "volume", "openinterest", "datetime", "lines", "line"}
)
# Strategy methods whose first positional argument is not an "ago".
STRATEGY_API = frozenset(
    {
        "buy", "sell", "close", "cancel", "order_target_size", "order_target_value",
        "order_target_percent", "buy_bracket", "sell_bracket", "getposition",
        "getpositionbyname", "getdatabyname", "setsizer", "getsizer", "getsizing", "log",
        "add_timer", "notify_order", "notify_trade", "notify_cashvalue", "notify_fund",
        "notify_store", "notify_data", "notify_timer", "start", "stop", "next", "prenext",
        "nextstart",
    }
)  # fmt: skip
STRATEGY_BASES = frozenset({"bt.Strategy", "backtrader.Strategy", "Strategy"})


class ValidationReport(BaseModel):
    ok: bool
    errors: list[str] = Field(default_factory=list)
    class_name: str | None = None


def _dotted(node: ast.AST) -> str:
    """``self.data.close`` for an attribute chain; '' when the chain has calls/subscripts."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return type(node).__name__


def _positive_int(node: ast.AST | None) -> int | None:
    """The value of ``1`` or ``+1`` (a positive int constant), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        node = node.operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
        and node.value > 0
    ):
        return node.value
    return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_line_call(func: ast.AST) -> bool:
    """A call that returns a delayed line: ``self.data.close(ago)``, ``self.sma(ago)``."""
    if isinstance(func, ast.Name):
        return func.id in LINE_NAMES - {"open"}  # close = self.data.close; close(1)
    if not isinstance(func, ast.Attribute):
        return False
    chain = _dotted(func).split(".")
    if func.attr in LINE_NAMES and not (chain[:1] == ["self"] and len(chain) == 2):
        return True  # self.data.close(1), self.data0.lines.close(1); not self.close(...)
    if any(p.startswith("data") or p == "lines" for p in chain[1:]):
        return True
    # self.<indicator>(1): any attribute of self that is not a Strategy method
    return (
        len(chain) == 2
        and chain[0] == "self"
        and chain[1] not in STRATEGY_API
        and not chain[1].startswith("_")
    )


class _Linter(ast.NodeVisitor):
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.strategy_classes: list[ast.ClassDef] = []

    def err(self, node: ast.AST, why: str) -> None:
        self.errors.append(f"line {getattr(node, 'lineno', '?')}: {why}")

    # imports -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                self.err(node, f"import {alias.name} is not allowed (only backtrader, math)")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] not in ALLOWED_IMPORTS:
            self.err(node, f"from {'.' * node.level}{module} import is not allowed")
        self.generic_visit(node)

    # names and attributes ------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES:
            self.err(node, f"{node.id} is forbidden (I/O, code execution or introspection)")
        elif _is_dunder(node.id):
            self.err(node, f"dunder name {node.id} is forbidden")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_dunder(node.attr) or node.attr.startswith("__"):
            self.err(node, f"{_src(node)} accesses a dunder attribute ({node.attr})")
        elif node.attr in FRAME_ATTRS:
            self.err(node, f"{_src(node)} reaches into frames/globals ({node.attr})")
        self.generic_visit(node)

    # look-ahead ----------------------------------------------------------------------------
    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if _positive_int(index) is not None:
            self.err(
                node,
                f"{_src(node)} indexes the future (positive index); use [0] or [-k]",
            )
        elif isinstance(index, ast.Slice) and any(
            _positive_int(b) is not None for b in (index.lower, index.upper)
        ):
            self.err(node, f"{_src(node)} slices with a positive bound (looks ahead)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        ago_kw = next((k for k in node.keywords if k.arg == "ago"), None)
        if ago_kw is not None and _positive_int(ago_kw.value) is not None:
            self.err(node, f"{_src(node)} reads the future (ago > 0); use ago=0 or negative")
        elif node.args and _positive_int(node.args[0]) is not None and _is_line_call(func):
            self.err(
                node,
                f"{_src(node)} delays a line into the future (positive ago); use (0) or (-k)",
            )
        if isinstance(func, ast.Attribute) and func.attr == "shift":
            arg = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg == "periods"), None)
            )
            negative = (isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub)) or (
                isinstance(arg, ast.Constant)
                and isinstance(arg.value, int | float)
                and arg.value < 0
            )
            if negative:
                self.err(node, f"{_src(node)} shifts data backwards in time (future leak)")
        self.generic_visit(node)

    # structure -----------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(_dotted(b) in STRATEGY_BASES for b in node.bases):
            self.strategy_classes.append(node)
        for kw in node.keywords:
            self.err(node, f"class {node.name} uses a class keyword ({kw.arg}); not allowed")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.err(node, "global statements are not allowed")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.err(node, "nonlocal statements are not allowed")


def _declares_params(cls: ast.ClassDef) -> bool:
    for stmt in cls.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == "params" for t in targets):
            return True
    return False


def _module_level(tree: ast.Module) -> list[str]:
    """Only imports, classes, functions, constant assignments and docstrings at top level."""
    errors: list[str] = []
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.ClassDef | ast.FunctionDef):
            continue
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            continue
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # module docstring
        errors.append(
            f"line {stmt.lineno}: top-level {type(stmt).__name__} runs code at import time"
        )
    return errors


def validate_code(code: str) -> ValidationReport:
    """Lint strategy source; ``ok`` only when there is no error at all."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return ValidationReport(ok=False, errors=[f"line {exc.lineno}: syntax error: {exc.msg}"])
    linter = _Linter()
    linter.visit(tree)
    errors = linter.errors + _module_level(tree)
    classes = linter.strategy_classes
    class_name: str | None = None
    if not classes:
        errors.append("line 1: no class deriving bt.Strategy")
    elif len(classes) > 1:
        where = ", ".join(f"{c.name} (line {c.lineno})" for c in classes)
        errors.append(f"line {classes[1].lineno}: exactly one bt.Strategy class allowed: {where}")
    else:
        cls = classes[0]
        class_name = cls.name
        if not _declares_params(cls):
            errors.append(f"line {cls.lineno}: class {cls.name} declares no params")
    return ValidationReport(ok=not errors, errors=errors, class_name=class_name)
