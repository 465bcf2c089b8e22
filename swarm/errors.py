"""Errors of the orchestration layer, raised by the Python API (``swarm.develop``) and printed
by the CLI: ``UserInputError`` is exit 2, ``RunFailedError`` exit 1, ``RunInterrupted`` 130."""

from __future__ import annotations

from pathlib import Path


class SwarmError(Exception):
    """Root of the swarm package's errors."""


class UserInputError(SwarmError):
    """Bad input from the user. The message is one line: the argument, the problem, the fix."""


class OptionError(UserInputError, TypeError):
    """An API keyword the CLI has no flag for (a TypeError too, as Python's own would be)."""


class RunFailedError(SwarmError):
    """An internal failure after the run folder exists: the folder is kept, with error.json,
    and the message says how to continue once the cause is fixed."""

    def __init__(self, run_dir: Path, cause: BaseException) -> None:
        super().__init__(
            f"internal error: {cause!r}; run folder kept, traceback in "
            f"{run_dir / 'error.json'}; after a fix, continue with "
            f"`python -m swarm.develop --resume {run_dir}`"
        )
        self.run_dir = run_dir
        self.cause = cause


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a notebook's stop button) during a run. Still a KeyboardInterrupt, so
    ``except Exception`` never swallows it; ``run_dir`` is the folder to resume, None when
    the run had not started."""

    def __init__(self, message: str, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir
