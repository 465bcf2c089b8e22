"""Where numba keeps its compiled kernels: the user cache dir, never the source tree.

Imported by the screen's kernel modules before they define anything; numba's default is a
``__pycache__`` next to the source, and nothing is written into the project at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> str:
    """Where numba caches its compiled kernels."""
    return str(Path(platformdirs.user_cache_dir("swarm-lab")) / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", cache_dir())

import numba  # noqa: E402  (after the variable: numba reads it when first imported)

numba.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]  # type: ignore[attr-defined]  # and if it was imported earlier
