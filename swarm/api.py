"""The lab from Python, for notebooks: ``from swarm import develop, judge, load_run``.

Each returns a ``RunResult`` (``experiments.run_result``): the verdict, the best variant with
its family, parameters, metrics and alpha, the trial count and the route history, read from
the run folder the call wrote, so ``load_run(result.run_dir)`` later gives the same object.
Nothing here exits: bad input raises the error whose message the CLI would print.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.run_result import BestVariant, RunFolderError, RunResult, load_run
from gate.judge import JudgeInputError, JudgeRunError
from gate.judge import judge as _judge
from swarm.develop import develop
from swarm.errors import RunFailedError, RunInterrupted, UserInputError

__all__ = [
    "BestVariant",
    "JudgeInputError",
    "JudgeRunError",
    "RunFailedError",
    "RunFolderError",
    "RunInterrupted",
    "RunResult",
    "UserInputError",
    "develop",
    "judge",
    "load_run",
]


def judge(strategy_or_path: Any, **options: Any) -> RunResult:
    """Judge Backtrader strategy file(s), or a ``bt.Strategy`` class defined in a file, as
    ``python -m gate.judge`` does, and return the run's ``RunResult`` (``.judge`` holds every
    file's verdict). Options are the CLI's flags in snake_case: ``data_dir``, ``tickers``,
    ``start``, ``end`` (required), ``benchmark``, ``trials``, ``out``...

    Raises ``JudgeInputError`` on bad input (the CLI's exit 2) and ``JudgeRunError`` on an
    internal failure (exit 3). A lookahead or integrity failure is a verdict, not an error:
    ``result.judge.status`` says ``failed`` (the CLI's exit 1).
    """
    paths = [_path_of(s) for s in _many(strategy_or_path)]
    return load_run(_judge(paths, **options).run_dir)


# help(judge) lists the judge's own keywords (one definition of them: gate.judge.judge).
_params = list(inspect.signature(_judge).parameters.values())
_params[0] = _params[0].replace(name="strategy_or_path", annotation="str | Path | type | list")
judge.__signature__ = inspect.Signature(_params, return_annotation=RunResult)  # type: ignore[attr-defined]


def _many(value: Any) -> list[Any]:
    if isinstance(value, str | Path | type):
        return [value]
    if isinstance(value, Sequence):
        return list(value)
    return [value]


def _path_of(strategy: Any) -> Path | str:
    """A path as given; a class as the file that defines it (the sandbox runs files)."""
    if not isinstance(strategy, type):
        return strategy
    module = sys.modules.get(strategy.__module__)
    file = getattr(module, "__file__", None)
    if module is None or file is None or module.__name__ == "__main__":
        raise JudgeInputError(
            f"strategy: {strategy.__name__} was defined interactively; save it in a .py file "
            "(one bt.Strategy class, import backtrader as bt) and pass the path"
        )
    return Path(file)
