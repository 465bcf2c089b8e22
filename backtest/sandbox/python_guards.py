"""Python-level guards of a sandboxed child: defence in depth, NOT a security boundary.

They turn the obvious misuse (``socket``, ``os.system``, ``open`` outside the temp dir) into
a clear ``PermissionError`` naming what was refused. Code that reaches ``ctypes`` gets past
them; the kernel guards (``backtest.sandbox.kernel_guards``) and the uid drop are what hold then.
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


PROJECT_ROOT = Path(__file__).resolve().parents[2]  # backtest/sandbox/python_guards.py
SYSTEM_LIBRARIES = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo")


def _fenced_off() -> list[str]:
    """What a job must not read: the project (its source, ``.git``, ``runs/``), the working
    directory (``python -m`` puts it on ``sys.path``; it may hold data or secrets) and the
    user's cache (``~/.cache/swarm-lab``: other runs' bars, decisions, memory)."""
    out = [str(PROJECT_ROOT), os.getcwd()]
    try:
        from backtest.data import default_cache_dir

        out.append(str(default_cache_dir()))
    except Exception:  # no platformdirs: the usual place
        out.append(os.path.expanduser("~/.cache/swarm-lab"))
    return [os.path.realpath(p) for p in out]


def _inside(path: str, folder: str) -> bool:
    return (path.rstrip(os.sep) + os.sep).startswith(folder.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=1)
def read_roots() -> tuple[str, ...]:
    """Folders a job may read: the Python installation (standard library, site-packages,
    the shared libraries), nothing of the project, the working directory or the cache.

    The child imports everything it runs before the fence: the warm worker imports the
    engine, and a strategy may only import what is already loaded (``backtrader``, ``math``)
    or the installation's own packages. A root that contains a fenced-off folder is
    dropped; one inside it is kept only when it is the interpreter's own installation (a
    ``.venv`` inside the project). Cached: the warm worker computes it once.
    """
    import site
    import sysconfig

    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    roots: set[str] = set(SYSTEM_LIBRARIES)
    for scheme in (sysconfig.get_paths(), sysconfig.get_paths(vars=base)):
        roots.update(scheme[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    roots.update(site.getsitepackages())
    installs = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    fenced = _fenced_off()
    out = []
    for root in roots:
        try:
            real = os.path.realpath(root)
        except (OSError, ValueError):
            continue
        if real == "/" or not os.path.isdir(real):
            continue
        if any(_inside(f, real) for f in fenced):
            continue  # it would open the project, the cwd or the cache
        if any(_inside(real, f) for f in fenced) and not any(_inside(real, i) for i in installs):
            continue
        out.append(real)
    return tuple(sorted(set(out)))


def python_guards(tmpdir: str) -> None:
    """Refuse network, process creation and file access outside ``tmpdir`` at Python level."""
    _deny_network()
    _deny_processes()
    _deny_heap_walks()
    _guard_files(tmpdir)


def _deny_network() -> None:
    """Replace every socket constructor and name lookup with a refusal."""
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


def _deny_processes() -> None:
    """Replace every way to start a process (``os``, ``subprocess``, its C helper) with a
    refusal."""
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
        sys.modules["_posixsubprocess"].fork_exec = proc  # type: ignore[attr-defined]


def _deny_heap_walks() -> None:
    """Refuse ``gc``'s ways to reach other objects of the process from Python."""
    import gc

    # The process holds what its worker held (unreachable from the stack, see
    # ``sandbox_child``): no walking the heap to it from Python.
    for name in ("get_objects", "get_referrers", "get_referents"):
        setattr(gc, name, _denied(f"gc.{name}"))


def _guard_files(tmpdir: str) -> None:
    """Let ``open`` and ``os.open`` write only inside ``tmpdir`` and read only there or
    under ``read_roots``."""
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
