"""A calibration that survives being stopped: every finished run's record is appended to
``records.jsonl`` in ``--out`` as it finishes, and ``--resume`` runs only what is missing.

A 20-run calibration of every kind takes hours on a small machine. Stopped (a session's end,
Ctrl-C, a reboot), it used to lose every record, since ``calibration.json`` is written at the
end. Here a record counts for a planned run only when it was made for exactly that run: its
``plan`` key hashes the scenario, index, seed, universe and develop options (not ``--out`` or
``--workers``, which change no verdict). A run folder finished before ``records.jsonl`` existed
(an older calibration, or one killed between its verdict and its record) is recovered from its
``verdict.json`` when its ``universe.json`` and manifest match the planned run; its wall time
is then unknown. A run that ended in ERROR is run again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from swarm.calibration.jobs import RunSpec
from swarm.calibration.runner import LoopResult, record_of, run_config, run_name

RECORDS = "records.jsonl"
# The manifest's config fields a recovered run folder must share with the planned run.
PLANNED_FIELDS = (
    "seed",
    "tickers",
    "start",
    "end",
    "variants",
    "limits",
    "criteria_text",
    "criteria_replace",
    "screen_size",
    "deflate_by",
    "sampler",
    "param_space",
    "families",
)


def plan_key(spec: RunSpec) -> str:
    """What makes a record this planned run's: everything but the folder and the cores."""
    options = dataclasses.asdict(spec.options)
    if spec.options.param_space is not None:
        options["param_space"] = spec.options.param_space.model_dump(mode="json")
    planned = {
        "kind": spec.kind,
        "index": spec.index,
        "seed": spec.seed,
        "universe": dataclasses.asdict(spec.universe),
        "options": options,
        "families": list(spec.families),
    }
    text = json.dumps(planned, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def append_record(out: Path, spec: RunSpec, record: dict[str, Any]) -> None:
    """Add ``record`` to ``records.jsonl`` at once (flushed to disk: a kill loses no line)."""
    with (out / RECORDS).open("a", encoding="utf-8") as f:
        f.write(json.dumps({**record, "plan": plan_key(spec)}, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(out: Path) -> dict[str, dict[str, Any]]:
    """The records in ``records.jsonl`` by plan key (the last one per key; a line cut by a kill
    is skipped)."""
    path = out / RECORDS
    found: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("plan"), str):
            found[rec["plan"]] = rec
    return found


def finished(specs: list[RunSpec], out: Path) -> dict[str, dict[str, Any]]:
    """The planned runs already done in ``out``, by plan key: from ``records.jsonl``, else
    from a matching finished run folder. ERROR records are left out: those run again."""
    recorded = read_records(out)
    done: dict[str, dict[str, Any]] = {}
    for spec in specs:
        key = plan_key(spec)
        rec = recorded.get(key) or recovered(spec)
        if rec is not None and rec.get("verdict") != "ERROR":
            done[key] = {k: v for k, v in rec.items() if k != "plan"}
    return done


def recovered(spec: RunSpec) -> dict[str, Any] | None:
    """The record of ``spec``'s run folder when it finished (a ``verdict.json``) on exactly
    this planned universe and options; None otherwise."""
    from experiments.records import Verdict

    data_dir = spec.out / "data" / run_name(spec)
    try:
        meta = json.loads((data_dir / "universe.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    planned_universe = json.loads(json.dumps(dataclasses.asdict(spec.universe), default=str))
    if meta.get("spec") != planned_universe:
        return None
    expected = run_config(spec, meta, data_dir)[0].model_dump(mode="json")
    for run_dir in sorted((spec.out / "runs" / run_name(spec)).glob("*/"), reverse=True):
        try:
            verdict = Verdict.model_validate_json((run_dir / "verdict.json").read_text("utf-8"))
            config = json.loads((run_dir / "manifest.json").read_text("utf-8"))["config"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if all(config.get(f) == expected.get(f) for f in PLANNED_FIELDS):
            return record_of(spec, meta, LoopResult(0, run_dir, verdict=verdict), None)
    return None


def other_source(records: Iterable[dict[str, Any]]) -> str | None:
    """A warning when kept runs were made by another source than this code's (``source``:
    the sha256 of the lab's sources in each run's manifest), else None. Not an error: a
    refactor changes the source and no verdict; a gate change needs a new calibration."""
    from experiments.runfolder import LAB_ROOT, source_digest

    here = source_digest(LAB_ROOT)["sha256"]
    others = Counter(r.get("source") for r in records if r.get("source") not in (here,))
    if not others:
        return None
    shas = ", ".join(
        f"{n} by {'unrecorded code' if sha is None else sha[:12]}" for sha, n in others.items()
    )
    return (
        f"of the runs kept, {shas} (this code: {here[:12]}); their verdicts count only if that "
        "code gives the same verdicts as this one (a refactor); after a gate, search, sandbox "
        "or routing change, start a new --out"
    )
