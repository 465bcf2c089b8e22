"""One lock around CPython's parser (``ast.parse`` and ``compile`` of source).

CPython 3.11's parser is not thread-safe: concurrent parses can fail with
``SystemError: AST constructor recursion depth mismatch``. The backtest node builds jobs
(and reads their code) from several threads, and the in-process engine compiles strategy
code on whichever thread runs it, so every parse of strategy code goes here.
"""

from __future__ import annotations

import ast
import threading
import types

_LOCK = threading.Lock()


def parse(code: str) -> ast.Module:
    """``ast.parse(code)``, one at a time; raises what ``ast.parse`` raises."""
    with _LOCK:
        return ast.parse(code)


def compile_source(code: str, filename: str) -> types.CodeType:
    """``compile(code, filename, "exec")``, one at a time."""
    with _LOCK:
        return compile(code, filename, "exec")
