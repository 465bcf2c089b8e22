"""Run rendered strategy source in plain backtrader (test helper, not a sandbox)."""

from __future__ import annotations

import ast
import collections
import collections.abc
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


def import_backtrader() -> Any:
    # backtrader 1.9.78.123 still references collections.Iterable (removed in Python 3.10).
    if not hasattr(collections, "Iterable"):
        collections.Iterable = collections.abc.Iterable  # type: ignore[attr-defined]
    import backtrader as bt

    return bt


def load_class(code: str) -> type:
    bt = import_backtrader()
    namespace: dict[str, Any] = {}
    exec(compile(code, "<generated>", "exec"), namespace)  # the code passed validate_code
    classes = [
        v
        for v in namespace.values()
        if isinstance(v, type) and issubclass(v, bt.Strategy) and v is not bt.Strategy
    ]
    assert len(classes) == 1
    return classes[0]


def rendered_params(code: str) -> dict[str, Any]:
    """The ``params`` tuple of the only class, read statically."""
    tree = ast.parse(code)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", "") == "params":
            return dict(ast.literal_eval(stmt.value))
    raise AssertionError("no params")


@dataclass
class RunResult:
    closed_trades: int = 0
    short_trades: int = 0
    fills: list[tuple[pd.Timestamp, float]] = field(default_factory=list)
    final_value: float = 0.0


def run_code(code: str, bars: pd.DataFrame, cash: float = 100_000.0) -> RunResult:
    bt = import_backtrader()
    result = RunResult()

    class Recorder(bt.Analyzer):
        def notify_trade(self, trade: Any) -> None:
            if trade.isclosed:
                result.closed_trades += 1
                if not trade.long:
                    result.short_trades += 1

        def notify_order(self, order: Any) -> None:
            if order.status == order.Completed:
                when = bt.num2date(order.executed.dt)
                result.fills.append((pd.Timestamp(when), order.executed.size))

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=bars))
    cerebro.addstrategy(load_class(code))
    cerebro.addanalyzer(Recorder)
    cerebro.broker.setcash(cash)
    cerebro.broker.setcommission(commission=0.001)
    cerebro.run()
    result.final_value = cerebro.broker.getvalue()
    return result


def run_exported(script: str, args: list[str], *, cwd=None, timeout: int = 120) -> float:
    """Run an exported ``strategy.py`` in plain backtrader; its printed ``final_value``."""
    import re
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, script, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(re.search(r"final_value=([0-9.]+)", proc.stdout).group(1))
