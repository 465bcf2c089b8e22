"""What the alt-data families share on the trusted side: their folder, a required table (or
the error that names the fix), and a warning on the run's stream.

Private to ``swarm/families`` (a leading underscore: the registry does not import it as a
family). ``value_quality`` uses it; the four older alt-data families still carry their own
copies (folding them in changes calibrated families: it goes with a calibration).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from altdata.corpus import DATASETS, AltData, find_alt_root
from altdata.pit import AltTable
from swarm.errors import UserInputError


def alt_root(config: Any) -> Path | None:
    """The run's alternative-data folder: ``--alt-data``, else the nearest folder above
    ``--data-dir`` laid out like the corpus."""
    return config.alt_data or find_alt_root(config.data_dir)


def required_table(root: Path | None, name: str, kind: str, what: str) -> AltTable:
    """Table ``name`` of the folder, or the ``UserInputError`` a run naming family ``kind``
    exits 2 with: no ``what`` (its file), and the option that gives it."""
    alt = AltData(root)
    table = alt.table(name)
    if table is None or root is None:
        raise UserInputError(
            f"--families {kind}: no {what}: {alt.missing(name)}; pass --alt-data DIR with "
            f"{DATASETS[name].source}"
        )
    return table


def warn(progress: Any, message: str) -> None:
    """On the run's progress stream, else on stderr (before the run has one)."""
    if progress is not None:
        progress.warn(message)
    else:
        print(f"[warning] {message}", file=sys.stderr)
