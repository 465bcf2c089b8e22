"""Python-level guards of a sandboxed child: defence in depth, NOT a security boundary.

They turn the obvious misuse (``socket``, ``os.system``, ``open`` outside the temp dir) into
a clear ``PermissionError`` naming what was refused. Code that reaches ``ctypes`` gets past
them; the kernel guards (``backtest.kernel_guards``) and the uid drop are what hold then.
"""

from __future__ import annotations

import builtins
import functools
import io
import os
import socket
import sys
from pathlib import Path
from typing import Any


def _denied(what: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"{what} is disabled in the backtest sandbox")

    return refuse


@functools.lru_cache(maxsize=1)
def read_roots() -> tuple[str, ...]:
    """Folders the job may read: the interpreter, its libraries and the import path.

    Cached: the warm worker computes it once (a child without privileges may not be able
    to resolve them all).
    """
    here = Path(__file__).resolve().parent.parent  # the project (backtest/, strategies/)
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(here)}
    roots.update(p for p in sys.path if p)
    roots.update(("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo"))
    out = []
    for root in roots:
        try:
            real = os.path.realpath(root)
        except (OSError, ValueError):
            continue
        if real != "/" and os.path.isdir(real):
            out.append(real)
    return tuple(sorted(set(out)))


def python_guards(tmpdir: str) -> None:
    """Refuse network, process creation and file access outside ``tmpdir`` at Python level."""
    import _socket

    net = _denied("network access")
    for mod in (socket, _socket):
        for name in ("socket", "socketpair", "fromfd", "create_connection", "create_server"):
            if hasattr(mod, name):
                setattr(mod, name, net)
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        setattr(socket, name, net)
        if hasattr(_socket, name):
            setattr(_socket, name, net)

    proc = _denied("process creation")
    for name in dir(os):
        if name in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp") or (
            name.startswith(("exec", "spawn")) and callable(getattr(os, name))
        ):
            setattr(os, name, proc)
    if "subprocess" in sys.modules:
        sub = sys.modules["subprocess"]
        for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput"):
            setattr(sub, name, proc)
    if "_posixsubprocess" in sys.modules:
        sys.modules["_posixsubprocess"].fork_exec = proc

    real_open, real_os_open = builtins.open, os.open
    sandbox = os.path.realpath(tmpdir) + os.sep
    readable = tuple(r.rstrip(os.sep) + os.sep for r in read_roots())

    def allowed(file: Any, writing: bool) -> bool:
        if isinstance(file, int):
            return True  # an already-open descriptor
        path = os.path.realpath(os.fspath(file))
        if (path + os.sep).startswith(sandbox):
            return True
        return not writing and (path + os.sep).startswith(readable)

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if not allowed(file, any(c in mode for c in "wax+")):
            raise PermissionError(f"open({file!r}) outside the sandbox's temporary directory")
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
        if not allowed(path, writing):
            raise PermissionError(f"os.open({path!r}) outside the sandbox's temporary directory")
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = guarded_open
    io.open = guarded_open
    os.open = guarded_os_open
