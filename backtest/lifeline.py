"""Processes that exist only to serve a run die with it.

The pool's forkserver and its workers are not children of a terminal: if the
orchestrator is SIGKILLed (crash, OOM, a user's ``kill -9`` before ``--resume``), they
would linger idle, ~200 MB each. Linux's parent-death signal ends them with their parent.
Importing this module inside a forkserver (it is preloaded there) arms it for the server;
``die_with_parent()`` arms it for a worker. The signal follows the parent *thread*: the
forkserver must be started from a long-lived thread (``ProcessPoolBackend`` starts it in
its constructor).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent exits; False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() == 1:  # the parent died before the signal was armed
        os._exit(0)
    return True


def _in_forkserver() -> bool:
    return bool(sys.argv) and sys.argv[0] == "-c" and "multiprocessing.forkserver" in sys.modules


if _in_forkserver():
    die_with_parent()
