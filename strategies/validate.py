"""Static validation of strategy source before it is ever executed.

An AST lint, deliberately strict: generated (or LLM-written) code may import only backtrader and
math, may not reach for introspection or I/O builtins, may not touch dunder attributes or frame
objects or module objects (``bt.feeds.vchart.os``), may run nothing at import time, and may not
read a line at a constant index that evaluates positive (``close[1]``, ``close[2-1]``,
``close(True)``), which in Backtrader silently looks into the future. A non-constant index
(``close[-self.p.lookback]``) stays legal: the lookahead check judges it at run time.

It is a convenience, not the boundary: it names the problem early and precisely, but the
backtest still runs the code confined (``backtest.sandbox``), and nothing relies on the lint
having caught everything.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import operator
import types
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from strategies.parsing import parse

ALLOWED_IMPORTS = frozenset({"backtrader", "math"})
FORBIDDEN_NAMES = frozenset(
    {
        "open",
        "exec",
        "eval",
        "compile",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "input",
        "breakpoint",
        "memoryview",
        "__builtins__",
        "exit",
        "quit",
        "dir",
        "type",
        "super",
    }
)
# Attributes that lead from a generator, coroutine, traceback or function to frames and globals.
FRAME_ATTRS = frozenset(
    {
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "ag_frame",
        "ag_code",
        "tb_frame",
        "tb_next",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "co_code",
        "func_globals",
        "func_code",
    }
)
# Attribute names that are Backtrader lines (a call on them with ago>0 looks ahead).
LINE_NAMES = frozenset(
    {"open", "high", "low", "close", "volume", "openinterest", "datetime", "lines", "line"}
)
# Strategy methods whose first positional argument is not an "ago".
STRATEGY_API = frozenset(
    {
        "buy",
        "sell",
        "close",
        "cancel",
        "order_target_size",
        "order_target_value",
        "order_target_percent",
        "buy_bracket",
        "sell_bracket",
        "getposition",
        "getpositionbyname",
        "getdatabyname",
        "setsizer",
        "getsizer",
        "getsizing",
        "log",
        "add_timer",
        "notify_order",
        "notify_trade",
        "notify_cashvalue",
        "notify_fund",
        "notify_store",
        "notify_data",
        "notify_timer",
        "start",
        "stop",
        "next",
        "prenext",
        "nextstart",
    }
)
STRATEGY_BASES = frozenset({"bt.Strategy", "backtrader.Strategy", "Strategy"})
# Modules code may reach through an allowed import: namespaces of classes and functions.
SAFE_MODULES = frozenset(
    {
        "math",
        "backtrader",
        "backtrader.indicators",
        "backtrader.analyzers",
        "backtrader.sizers",
        "backtrader.observers",
        "backtrader.filters",
        "backtrader.signals",
        "backtrader.commissions",
        "backtrader.feeds",
        "backtrader.strategies",
    }
)
# Attribute names that are modules wherever they appear (``x.os``, ``y.sys.modules``).
MODULE_ATTRS = frozenset(
    {
        "os",
        "sys",
        "ctypes",
        "builtins",
        "importlib",
        "subprocess",
        "socket",
        "_socket",
        "posix",
        "_posixsubprocess",
        "shutil",
        "pickle",
        "marshal",
        "gc",
        "inspect",
        "mmap",
        "fcntl",
        "resource",
        "pty",
        "multiprocessing",
        "threading",
        "_thread",
        "runpy",
        "tempfile",
        "pathlib",
        "io",
        "_io",
        "modules",
    }
)
_BINOPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_COMPARE: dict[type, Any] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


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


def const_value(node: ast.AST | None, names: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """The number a constant expression evaluates to (``2-1``, ``-(-1)``, ``True``, ``1 > 0``),
    or None when it is not constant. ``names``: module-level constants (assigned once)."""
    if node is None or depth > 50:
        return None
    fold = functools.partial(const_value, names=names, depth=depth + 1)
    if isinstance(node, ast.Constant):
        value = node.value
        return int(value) if isinstance(value, bool) else value if _is_number(value) else None
    if isinstance(node, ast.Name) and names is not None:
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp):
        return _unary_value(node, fold)
    if isinstance(node, ast.BinOp):
        return _binop_value(node, fold)
    if isinstance(node, ast.BoolOp):
        return _boolop_value(node, fold)
    if isinstance(node, ast.Compare):
        return _compare_value(node, fold)
    if isinstance(node, ast.IfExp):
        test = fold(node.test)
        return None if test is None else fold(node.body if test else node.orelse)
    return None


def _unary_value(node: ast.UnaryOp, fold: Callable[[ast.AST | None], Any]) -> Any:
    """``not``, ``~``, ``-`` or ``+`` of a constant operand; None when it is not constant."""
    v = fold(node.operand)
    if v is None:
        return None
    if isinstance(node.op, ast.Not):
        return int(not v)
    if isinstance(node.op, ast.Invert):
        return ~v if isinstance(v, int) else None
    return -v if isinstance(node.op, ast.USub) else +v


def _binop_value(node: ast.BinOp, fold: Callable[[ast.AST | None], Any]) -> Any:
    """A binary operation of constants, None when unsafe (huge operands or shifts/powers out
    of 0..64) or when it fails or yields no number."""
    a, b, op = fold(node.left), fold(node.right), _BINOPS.get(type(node.op))
    if a is None or b is None or op is None or abs(a) > 1e18 or abs(b) > 1e18:
        return None
    if isinstance(node.op, ast.Pow | ast.LShift | ast.RShift) and not 0 <= b <= 64:
        return None
    try:
        v = op(a, b)
    except (ArithmeticError, ValueError, TypeError):
        return None
    return v if _is_number(v) else None


def _boolop_value(node: ast.BoolOp, fold: Callable[[ast.AST | None], Any]) -> Any:
    """``and``/``or`` of constants, as Python picks the value; None unless all are constant."""
    values = [fold(v) for v in node.values]
    if any(v is None for v in values):
        return None
    pick = (lambda v: not v) if isinstance(node.op, ast.And) else bool
    return next((v for v in values[:-1] if pick(v)), values[-1])


def _compare_value(node: ast.Compare, fold: Callable[[ast.AST | None], Any]) -> Any:
    """A comparison chain of constants as 1 or 0; None unless all are constant."""
    values = [fold(node.left), *(fold(c) for c in node.comparators)]
    ops: list[Any] = [_COMPARE.get(type(o)) for o in node.ops]
    if any(v is None for v in values) or any(o is None for o in ops):
        return None
    return int(all(o(a, b) for o, a, b in zip(ops, values, values[1:], strict=False)))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


def _may_be_line(value: ast.AST) -> bool:
    """Whether a sliced value may be a data line or an indicator (``self.data.close``,
    ``self.sma``, ``close``, ``self.data.close.array``), not a plain Python list (``xs``,
    ``self.datas``, ``sorted(xs)``): a line sliced with a positive bound reads the future."""
    if isinstance(value, ast.Name):
        return value.id in LINE_NAMES
    if isinstance(value, ast.Subscript):  # self.lines[0][1:], self.datas[0].close[...]
        return _may_be_line(value.value)
    if not isinstance(value, ast.Attribute):
        return False  # a call's result, a literal, a comprehension
    chain = _dotted(value).split(".")
    if not chain[0]:
        return True  # an attribute of a call or subscript (``self.datas[0].close``): be strict
    tail = chain[1:]
    if any(p in LINE_NAMES or p in ("array", "lines") for p in tail):
        return True
    if any(p.startswith("data") and p != "datas" for p in tail):
        return True
    # self.<name>: an indicator unless it is a strategy method or the feeds' list
    return chain[0] == "self" and len(chain) == 2 and chain[1] not in STRATEGY_API | {"datas"}


# ---------------------------------------------------------------------------- module objects


@functools.lru_cache(maxsize=64)
def _module(name: str) -> types.ModuleType | None:
    """An allowed module, imported to resolve attribute chains (backtrader and math only)."""
    if name.split(".")[0] not in ALLOWED_IMPORTS:
        return None
    try:
        return importlib.import_module(name)
    except Exception:  # not importable: the run reports it
        return None


def unsafe_module(root: str, attrs: list[str]) -> str | None:
    """The first module outside ``SAFE_MODULES`` that ``root.a.b...`` reaches, else None.

    Resolved against the real modules without running anything: module dicts and
    ``inspect.getattr_static`` (no descriptors, no ``__getattr__``).
    """
    if root not in SAFE_MODULES:
        return root
    obj: Any = _module(root)
    for attr in attrs:
        if obj is None:
            return None
        if isinstance(obj, types.ModuleType):
            obj = vars(obj).get(attr)
        else:
            try:
                obj = inspect.getattr_static(obj, attr, None)
            except Exception:
                return None
        if isinstance(obj, types.ModuleType) and obj.__name__ not in SAFE_MODULES:
            return obj.__name__
    return None


def _module_aliases(tree: ast.Module) -> dict[str, tuple[str, list[str]]]:
    """Names bound by imports: ``bt`` -> ("backtrader", []), ``SMA`` -> (".indicators", ...)."""
    aliases: dict[str, tuple[str, list[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = (a.name, [])
                else:
                    root = a.name.split(".")[0]
                    aliases[root] = (root, [])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = (node.module, [a.name])
    return aliases


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Top-level names bound once, to a constant number: ``close[K]`` folds with them."""
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 1
        elif isinstance(node, ast.alias):
            name = node.asname or node.name.split(".")[0]
            stores[name] = stores.get(name, 0) + 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stores[node.name] = stores.get(node.name, 0) + 1
    found: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and stores.get(target.id) == 1:
            number = const_value(value)
            if number is not None:
                found[target.id] = number
    return found


# ---------------------------------------------------------------------------- the linter


class _Linter(ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.errors: list[str] = []
        self.strategy_classes: list[ast.ClassDef] = []
        self.aliases = _module_aliases(tree)
        self.constants = module_constants(tree)
        self._inner_chains: set[int] = set()  # attribute nodes already judged with their chain

    def err(self, node: ast.AST, why: str) -> None:
        self.errors.append(f"line {getattr(node, 'lineno', '?')}: {why}")

    def positive(self, node: ast.AST | None) -> bool:
        value = const_value(node, self.constants)
        return value is not None and value > 0

    # imports -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                self.err(node, f"import {alias.name} is not allowed (only backtrader, math)")
            elif alias.name not in SAFE_MODULES:
                self.err(node, f"import {alias.name} is not allowed (a backtrader internal)")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] not in ALLOWED_IMPORTS:
            self.err(node, f"from {'.' * node.level}{module} import is not allowed")
        elif module not in SAFE_MODULES:
            self.err(node, f"from {module} import is not allowed (a backtrader internal)")
        else:
            for alias in node.names:
                if alias.name == "*":
                    self.err(node, f"from {module} import * is not allowed; name what you use")
                elif (bad := unsafe_module(module, [alias.name])) is not None:
                    self.err(node, f"from {module} import {alias.name} imports module {bad}")
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
        elif node.attr in MODULE_ATTRS:
            self.err(node, f"{_src(node)} reaches a module object ({node.attr})")
        elif id(node) not in self._inner_chains:
            self._check_chain(node)
        self.generic_visit(node)

    def _check_chain(self, node: ast.Attribute) -> None:
        """``bt.feeds.vchart.os``-style chains from an imported module into other modules."""
        inner: ast.AST = node
        while isinstance(inner, ast.Attribute):
            self._inner_chains.add(id(inner))
            inner = inner.value
        dotted = _dotted(node)
        if not dotted or dotted.split(".")[0] not in self.aliases:
            return
        head, *attrs = dotted.split(".")
        root, prefix = self.aliases[head]
        bad = unsafe_module(root, prefix + attrs)
        if bad is not None:
            self.err(node, f"{dotted} reaches module {bad}; use backtrader's public classes")

    # look-ahead ----------------------------------------------------------------------------
    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if self.positive(index):
            self.err(
                node,
                f"{_src(node)} indexes the future (positive index); use [0] or [-k]",
            )
        elif (
            isinstance(index, ast.Slice)
            and any(self.positive(b) for b in (index.lower, index.upper))
            and _may_be_line(node.value)
        ):
            self.err(node, f"{_src(node)} slices with a positive bound (looks ahead)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        ago_kw = next((k for k in node.keywords if k.arg == "ago"), None)
        if ago_kw is not None and self.positive(ago_kw.value):
            self.err(node, f"{_src(node)} reads the future (ago > 0); use ago=0 or negative")
        elif node.args and self.positive(node.args[0]) and _is_line_call(func):
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
            shift = const_value(arg, self.constants)
            negative = (shift is not None and shift < 0) or (
                isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub)
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


def _is_literal(node: ast.AST | None) -> bool:
    try:
        ast.literal_eval(node)  # type: ignore[arg-type]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _is_static(node: ast.AST | None) -> bool:
    """An annotation or base that names something (``int``, ``bt.Strategy``, ``list[int]``)."""
    if node is None or isinstance(node, ast.Constant) or _dotted(node):
        return True
    if isinstance(node, ast.Subscript):
        return _is_static(node.value) and _is_static(node.slice)
    if isinstance(node, ast.Tuple):
        return all(_is_static(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_static(node.left) and _is_static(node.right)
    return False


def _runs_at_import(stmt: ast.stmt) -> str | None:
    """Why a top-level statement would run code when the module is executed, or None.

    Allowed: imports, class definitions and plain function definitions (no decorators;
    literal defaults, named annotations), assignments of literals to names, a docstring.
    """
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return None
    if isinstance(stmt, ast.ClassDef):
        if stmt.decorator_list:
            return f"class {stmt.name} has a decorator"
        if not all(_dotted(b) for b in stmt.bases):
            return f"class {stmt.name} computes its bases"
        return None
    if isinstance(stmt, ast.FunctionDef):
        args = stmt.args
        defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
        every_arg = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        notes = [a.annotation for a in every_arg if a is not None] + [stmt.returns]
        if stmt.decorator_list:
            return f"function {stmt.name} has a decorator"
        if not all(_is_literal(d) for d in defaults) or not all(_is_static(n) for n in notes):
            return f"function {stmt.name} computes a default or an annotation"
        return None
    if isinstance(stmt, ast.Assign):
        names = all(isinstance(t, ast.Name) for t in stmt.targets)
        return None if names and _is_literal(stmt.value) else "only literal constants"
    if isinstance(stmt, ast.AnnAssign):
        literal = stmt.value is None or _is_literal(stmt.value)
        ok = isinstance(stmt.target, ast.Name) and literal and _is_static(stmt.annotation)
        return None if ok else "only literal constants"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return None  # a docstring (or a stray string)
    return type(stmt).__name__


def _module_level(tree: ast.Module) -> list[str]:
    """Only imports, class and function definitions and literal constants at top level."""
    errors: list[str] = []
    for stmt in tree.body:
        why = _runs_at_import(stmt)
        if why is not None:
            errors.append(
                f"line {stmt.lineno}: top-level {type(stmt).__name__} runs code at import time"
                f" ({why}); allowed: imports, classes, functions, literal constants"
            )
    return errors


def validate_code(code: str, *, require_params: bool = True) -> ValidationReport:
    """Lint strategy source; ``ok`` only when there is no error at all.

    ``require_params=False`` accepts a class without ``params``: a user's own strategy
    judged as written (``gate.judge``) is never tuned, so it need not declare any; generated
    variants must, because the tuners set them."""
    try:
        tree = parse(code)
    except SyntaxError as exc:
        return ValidationReport(ok=False, errors=[f"line {exc.lineno}: syntax error: {exc.msg}"])
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return ValidationReport(ok=False, errors=[f"line 1: cannot parse: {exc}"])
    linter = _Linter(tree)
    try:
        linter.visit(tree)
    except RecursionError:
        linter.errors.append("line 1: the code nests too deeply to check")
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
        if require_params and not _declares_params(cls):
            errors.append(f"line {cls.lineno}: class {cls.name} declares no params")
    return ValidationReport(ok=not errors, errors=errors, class_name=class_name)
