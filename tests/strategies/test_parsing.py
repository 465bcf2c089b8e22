"""Strategy code is parsed under one lock: concurrent parses from the backtest node's
threads must all succeed and agree."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

import pytest

from strategies.codegen import render
from strategies.families import default_spec
from strategies.parsing import compile_source, parse
from strategies.regime import index_symbols
from strategies.spec import Family
from strategies.validate import validate_code

pytestmark = pytest.mark.unit


def test_concurrent_parses_all_succeed_and_agree() -> None:
    sources = [render(default_spec(f)) for f in Family] * 40
    with ThreadPoolExecutor(max_workers=8) as pool:
        dumps = list(pool.map(lambda c: ast.dump(parse(c)), sources))
        reports = list(pool.map(validate_code, sources))
        symbols = list(pool.map(index_symbols, sources))
        compiled = list(pool.map(lambda c: compile_source(c, "<variant>"), sources))
    assert dumps == [ast.dump(ast.parse(c)) for c in sources]
    assert all(r.ok for r in reports), [r.errors for r in reports if not r.ok][:1]
    assert symbols == [index_symbols(c) for c in sources]
    assert [c.co_filename for c in compiled] == ["<variant>"] * len(sources)


def test_parse_raises_what_ast_parse_raises() -> None:
    with pytest.raises(SyntaxError):
        parse("def (")
