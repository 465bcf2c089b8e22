"""The research swarm and the lab's Python API: ``from swarm import develop, judge, load_run``.

The API is imported on first use (module ``__getattr__``), so ``import swarm`` stays light:
a notebook, or a module of this package, pays for LangGraph and Backtrader only when it
runs something.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunResult", "develop", "judge", "load_run"]


def __getattr__(name: str) -> Any:
    if name == "develop":
        # The submodule, which is callable: once imported it shadows any lazy function here.
        import swarm.develop as module

        return module
    if name in ("judge", "load_run", "RunResult"):
        from swarm import api

        return getattr(api, name)
    raise AttributeError(f"module 'swarm' has no attribute {name!r}")
