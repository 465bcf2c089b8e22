"""The run folder: one directory holding everything needed to audit and reproduce a run."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from experiments.tracker import ExperimentTracker
from strategies.family_api import whole_universe

TRACKED_PACKAGES = (
    "backtrader",
    "TA-Lib",
    "scikit-fuzzy",
    "langgraph",
    "langchain-core",
    "langchain-openai",
    "pandas",
    "numpy",
    "scipy",
    "pydantic",
    "yfinance",
    "matplotlib",
    "quantstats",
)


def new_run_id(directive: str, now: datetime | None = None) -> str:
    """A sortable run id: the time (UTC, now by default), then a slug of the directive (at most 40
    characters)."""
    now = now or datetime.now(UTC)
    slug = re.sub(r"[^a-z0-9]+", "-", directive.lower()).strip("-")[:40] or "run"
    return f"{now:%Y%m%d-%H%M%S}-{slug}"


# The run folder's layout: where each kind of file lives, relative to the run's root.


def code_file(variant_id: str) -> str:
    """A variant's generated source, as the ledger recorded it."""
    return f"strategies/{variant_id}.py"


def holdout_code_file(variant_id: str) -> str:
    """The winner's source rebuilt with its holdout decisions (the decision family)."""
    return f"strategies/{variant_id}.holdout.py"


def result_file(variant_id: str, symbol: str, fold: int) -> str:
    """One backtest's result with its return series."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", symbol)
    return f"backtests/{variant_id}/{safe}-f{fold}.json"


def screen_file(iteration: int, scope: str = "symbol") -> str:
    """One TUNE sweep's in-sample return series (``backtest.screen.sweep.write_batch``); a portfolio
    sweep's (``scope="portfolio"``) beside the same iteration's single-symbol one."""
    return f"screens/i{iteration:02d}{'-portfolio' if whole_universe(scope) else ''}.npz"


class RunFolder:
    """Paths and atomic writers for one run. Never writes outside ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        for sub in ("research", "strategies", "charts"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.tracker = ExperimentTracker(self.root / "experiments.jsonl")

    @classmethod
    def create(cls, out_dir: Path, run_id: str) -> RunFolder:
        """A new folder under ``out_dir``, suffixed -2, -3… when the id is taken."""
        root = Path(out_dir) / run_id
        suffix = 1
        while root.exists():  # two runs in the same second must not share a folder
            suffix += 1
            root = Path(out_dir) / f"{run_id}-{suffix}"
        return cls(root)

    def path(self, rel: str) -> Path:
        """The path of ``rel`` inside the run folder."""
        return self.root / rel

    def read_code(self, variant_id: str, code_sha256: str) -> str:
        """A variant's source, verified against the sha256 it was built with."""
        code = self.path(code_file(variant_id)).read_text(encoding="utf-8")
        actual = hashlib.sha256(code.encode("utf-8")).hexdigest()
        if actual != code_sha256:
            raise RuntimeError(
                f"{code_file(variant_id)} changed since it was generated "
                f"(sha256 {actual[:12]}…, recorded {code_sha256[:12]}…)"
            )
        return code

    def write_text(self, rel: str, text: str) -> Path:
        """Write ``text`` atomically (a temp file, then a rename) and return the path."""
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)  # atomic: a reader never sees half a file
        return target

    def write_json(self, rel: str, obj: Any) -> Path:
        """Write ``obj`` as sorted, indented JSON (atomically) and return the path."""
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def package_versions() -> dict[str, str]:
    """Installed version of each tracked package ("not installed" when absent), for the manifest."""
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_state(repo_dir: Path) -> dict[str, Any]:
    """The code's git sha and whether the tree had uncommitted changes."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


# The folder that holds the lab's packages (a clone's root, or wherever they were unpacked).
LAB_ROOT = Path(__file__).resolve().parents[1]
# The lab's own packages: what ``source_digest`` hashes.
SOURCE_PACKAGES = ("altdata", "backtest", "experiments", "gate", "strategies", "swarm")


@functools.cache
def source_digest(repo_dir: Path) -> dict[str, Any]:
    """A sha256 over the lab's Python sources (each file's path and bytes, in path order) and
    their count: which code made a run, also where there is no git (an archive, a snapshot, a
    wheel). Computed once per process."""
    h = hashlib.sha256()
    files = sorted(
        p for pkg in SOURCE_PACKAGES for p in (repo_dir / pkg).rglob("*.py") if p.is_file()
    )
    for p in files:
        h.update(p.relative_to(repo_dir).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return {"sha256": h.hexdigest(), "files": len(files)}


def build_manifest(
    *, run_id: str, config: dict[str, Any], data: dict[str, Any], seed: int, argv: list[str]
) -> dict[str, Any]:
    """manifest.json's content: the config, data, seed, argv, git state, Python, platform and
    package versions."""
    repo_dir = LAB_ROOT
    return {
        "run_id": run_id,
        "created_at": datetime.now(UTC).isoformat(),
        "argv": argv,
        "seed": seed,
        "config": config,
        "data": data,
        "git": git_state(repo_dir),
        "source": source_digest(repo_dir),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
    }
