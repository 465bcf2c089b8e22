"""Command-line output that a closed pipe cannot turn into a traceback.

``python -m swarm.develop --dry-run | head`` closes stdout early; Python then raises
BrokenPipeError at the next print or at interpreter exit. The reader has what it wanted, so
the command ends quietly with the shell's code for SIGPIPE (128 + 13), as ``cat`` would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

BROKEN_PIPE_EXIT = 141


def run_cli(main: Callable[[], int | None]) -> int:
    """``main()``'s exit code; ``BROKEN_PIPE_EXIT`` when stdout's reader went away."""
    try:
        code = main()
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return 0 if code is None else int(code)
    except BrokenPipeError:
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
