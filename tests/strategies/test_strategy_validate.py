"""Static validation: what generated code may and may not do."""

from __future__ import annotations

import pytest

from strategies.codegen import render
from strategies.families import TEMPLATES, spec_from_template
from strategies.spec import Family
from strategies.validate import validate_code

pytestmark = pytest.mark.unit

HEADER = "import backtrader as bt\n\n\n"


def strategy(body: str) -> str:
    """A valid strategy whose next() runs ``body`` (line 9 is the body's first line)."""
    lines = "\n".join("        " + ln for ln in body.splitlines())
    return (
        HEADER
        + "class S(bt.Strategy):\n"
        + '    params = (("n", 10),)\n'
        + "\n"
        + "    def __init__(self):\n"
        + "        self.sma = bt.indicators.SMA(self.data.close, period=self.p.n)\n"
        + "\n"
        + "    def next(self):\n"
        + lines
        + "\n"
    )


def test_minimal_strategy_is_accepted() -> None:
    report = validate_code(strategy("if self.data.close[0] > self.sma[-1]:\n    self.buy()"))
    assert report.ok, report.errors
    assert report.class_name == "S"


@pytest.mark.parametrize(
    ("code", "line", "fragment"),
    [
        ("import os\n" + strategy("pass"), 1, "import os"),
        ("from os import path\n" + strategy("pass"), 1, "from os import"),
        (strategy("open('x')"), 11, "open is forbidden"),
        (strategy("__import__('os')"), 11, "__import__"),
        (strategy("().__class__.__base__.__subclasses__()"), 11, "dunder attribute"),
        (strategy("getattr(self, '__cla' + 'ss__')"), 11, "getattr is forbidden"),
        (strategy("eval('1')"), 11, "eval is forbidden"),
        (strategy("x = self.data.close[1]"), 11, "indexes the future (positive index)"),
        (strategy("x = self.data.close[+2]"), 11, "indexes the future"),
        (strategy("x = self.sma[1]"), 11, "indexes the future"),
        (strategy("x = self.data.close(ago=1)"), 11, "ago > 0"),
        (strategy("x = bt.indicators.SMA(self.data.close(1), period=5)"), 11, "future"),
        (strategy("x = self.sma(3)"), 11, "future"),
        (strategy("x = df.shift(-1)"), 11, "shifts data backwards"),
        (strategy("x = gen.gi_frame.f_globals"), 11, "frames/globals"),
        (strategy("x = err.__traceback__.tb_frame"), 11, "dunder"),
    ],
)
def test_rejections_name_the_line(code: str, line: int, fragment: str) -> None:
    report = validate_code(code)
    assert not report.ok
    matching = [e for e in report.errors if fragment in e]
    assert matching, report.errors
    assert matching[0].startswith(f"line {line}:"), matching


def test_positive_index_message_is_explicit() -> None:
    report = validate_code(strategy("x = self.data.close[1]"))
    assert report.errors == [
        "line 11: self.data.close[1] indexes the future (positive index); use [0] or [-k]"
    ]


def test_two_strategy_classes_rejected() -> None:
    code = strategy("pass") + "\n\nclass T(bt.Strategy):\n    params = ()\n"
    report = validate_code(code)
    assert not report.ok
    assert any(e.startswith("line 14:") and "exactly one" in e for e in report.errors)


def test_no_strategy_class_rejected() -> None:
    report = validate_code(HEADER + "class S(object):\n    params = ()\n")
    assert not report.ok
    assert any(e.startswith("line 1:") and "no class deriving" in e for e in report.errors)


def test_missing_params_rejected() -> None:
    code = HEADER + "class S(bt.Strategy):\n    def next(self):\n        pass\n"
    report = validate_code(code)
    assert any(e.startswith("line 4:") and "declares no params" in e for e in report.errors)


def test_syntax_error_reports_line() -> None:
    report = validate_code("import backtrader as bt\nclass S(bt.Strategy:\n")
    assert not report.ok and report.errors[0].startswith("line 2: syntax error")


def test_negative_and_zero_indexes_accepted() -> None:
    body = "a = self.data.close[0] + self.data.close[-1] + self.sma[-5]\nb = self.data.close(-1)"
    report = validate_code(strategy(body))
    assert report.ok, report.errors


def test_top_level_code_rejected() -> None:
    report = validate_code(strategy("pass") + "print('hi')\n")
    assert any("runs code at import time" in e for e in report.errors)


@pytest.mark.parametrize(
    "spec",
    [
        spec_from_template(f, t, long_short=ls)
        for f in Family
        for t in range(len(TEMPLATES[f]))
        for ls in (False, True)
    ],
    ids=lambda s: s.name,
)
def test_accepts_every_rendered_family(spec) -> None:
    report = validate_code(render(spec))
    assert report.ok, report.errors


# Issue 13: the easy holes a red-team pass found (the lint is a convenience, not the boundary).
@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (strategy("x = bt.feeds.vchart.os.system"), "module"),
        (strategy("x = bt.utils.py3.sys.modules"), "module"),
        (strategy("x = bt.os.getcwd()"), "reaches a module object (os)"),
        (strategy("x = bt.inspect.stack()"), "module"),
        (strategy("x = bt.indicators.sys"), "reaches a module object (sys)"),
        (strategy("x = bt.indicators.sma.SMA"), "reaches module backtrader.indicators.sma"),
        (strategy("x = self.env.runstrats.ctypes"), "reaches a module object (ctypes)"),
        (strategy("x = self.data.close[True]"), "indexes the future"),
        (strategy("x = self.data.close[2-1]"), "indexes the future"),
        (strategy("x = self.data.close[-(-1)]"), "indexes the future"),
        (strategy("x = self.data.close[1 > 0]"), "indexes the future"),
        (strategy("x = self.data.close[0:2*1]"), "positive bound"),
        (strategy("x = self.data.close(ago=3-2)"), "ago > 0"),
        (strategy("x = self.sma(True)"), "future"),
        ("import backtrader as bt\nK = 1\n" + strategy("x = self.data.close[K]")[24:], "future"),
        ("from backtrader import os\n" + strategy("pass"), "imports module os"),
        ("from backtrader import *\n" + strategy("pass"), "import *"),
        ("import backtrader.utils.py3\n" + strategy("pass"), "backtrader internal"),
        ("from backtrader.feeds import vchart\n" + strategy("pass"), "module"),
        (strategy("pass") + "x = bt.indicators.SMA\n", "runs code at import time"),
        (strategy("pass") + "@bt.x\nclass T:\n    pass\n", "decorator"),
        (strategy("pass") + "def f(a=print()):\n    pass\n", "computes a default"),
        (strategy("pass") + "if True:\n    pass\n", "runs code at import time"),
    ],
)
def test_closed_holes(code: str, fragment: str) -> None:
    report = validate_code(code)
    assert not report.ok and any(fragment in e for e in report.errors), report.errors


@pytest.mark.parametrize(
    "body",
    [
        "x = self.data.close[-self.p.n]",  # not constant: the runtime lookahead check judges
        "x = self.data.close[-(1)] + self.data.close[2-2] + self.data.close[-1 * 3]",
        "x = bt.indicators.SMA(self.data.close, period=3)",
        "x = (bt.Order.Market, bt.TimeFrame.Days, bt.ind.CrossOver, math.floor(1.5))",
        "self.signal = self.data.close[0] > self.sma[-1]",
    ],
)
def test_legal_code_still_passes(body: str) -> None:
    code = (
        "import math\n\n"
        + strategy(body)
        + "\n\nLIMIT = 3\n\n\ndef helper(a, b=2):\n    return a\n"
    )
    report = validate_code(code)
    assert report.ok, report.errors


# Regression: the lint rejected slicing any plain list (``xs[1:]``) as if it were a data line.
@pytest.mark.parametrize(
    ("body", "ok"),
    [
        ("xs = [1, 2, 3]\nys = xs[1:]", True),
        ("ys = sorted([3, 1, 2])[1:3]", True),
        ("ys = self.datas[1:]", True),  # the feeds' list, not a line
        ("ys = [d.close[0] for d in self.datas][2:]", True),
        ("ys = self.data.close[1:]", False),
        ("ys = self.data.close.array[1:]", False),
        ("ys = self.datas[0].close[1:]", False),
        ("ys = self.sma[1:]", False),  # an indicator held on self
        ("close = self.data.close\nys = close[1:]", False),
        ("ys = self.lines[0][1:]", False),
    ],
)
def test_only_lines_are_refused_a_positive_slice(body: str, ok: bool) -> None:
    report = validate_code(strategy(body))
    assert report.ok is ok, report.errors
    if not ok:
        assert any("slices with a positive bound" in e for e in report.errors)
