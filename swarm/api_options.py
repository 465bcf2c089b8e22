"""Keyword options of the Python API read as the CLI's arguments.

``swarm.develop(directive=..., max_iterations=1, data_dir=...)`` takes the CLI's flags in
snake_case (``--max-iterations`` is ``max_iterations``, ``--no-screen`` is ``no_screen=True``),
so one parser holds every default and one ``config_from_args`` checks every value: the API
cannot drift from the CLI. The equivalent command line is recorded in the manifest's argv.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from swarm.errors import OptionError

# Flags that are a different command, not an option of a run.
CLI_ONLY = frozenset({"resume", "dry_run", "print_graph", "calibrate"})


def api_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's options the API takes, by keyword (the flag's dest)."""
    return {
        a.dest: a
        for a in parser._actions  # argparse keeps no public list of its actions
        if a.option_strings and a.dest not in CLI_ONLY and a.dest != "help"
    }


def namespace_of(
    parser: argparse.ArgumentParser, options: Mapping[str, Any], *, api: str
) -> tuple[argparse.Namespace, list[str]]:
    """The namespace ``parser`` would give for the equivalent command line, and that argv."""
    actions = api_options(parser)
    args = parser.parse_args([])
    argv: list[str] = []
    for key, value in options.items():
        action = actions.get(key)
        if action is None:
            near = difflib.get_close_matches(key, list(actions), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise OptionError(
                f"{api}(): unknown option {key!r}; {hint}options are the CLI's flags in "
                f"snake_case (python -m {parser.prog.split()[-1]} --help)"
            )
        if isinstance(action, argparse._StoreTrueAction) and not isinstance(value, bool):
            raise OptionError(f"{api}(): {key}={value!r}; pass True or False")
        value = _cli_value(value, action)
        setattr(args, key, value)
        argv += _flag(action, value)
    return args, argv


def _cli_value(value: Any, action: argparse.Action) -> Any:
    """A Python value as argparse would have produced it from the flag's text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return ",".join(str(v) for v in value)  # tickers=["AAPL", "MSFT"], families=[...]
    if action.type is Path and isinstance(value, str | Path):
        return Path(value)
    if action.type in (int, float) and not isinstance(value, bool):
        try:
            return action.type(value)
        except (TypeError, ValueError):
            pass  # left as given: config_from_args names the option and the fix
    return value


def _flag(action: argparse.Action, value: Any) -> list[str]:
    """The command-line words of one option (how the manifest's argv reproduces the call)."""
    flag = action.option_strings[0]
    if isinstance(action, argparse.BooleanOptionalAction):
        return [] if value is None else [flag if value else f"--no-{flag[2:]}"]
    if isinstance(action, argparse._StoreTrueAction):
        return [flag] if value else []
    return [] if value is None else [flag, str(value)]
