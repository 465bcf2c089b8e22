"""Validate a run folder against the models that wrote it.

    python -m experiments.check RUN_DIR

Exit 0 with a one-line summary when every file parses; exit 1 naming the first bad record
(file, line, field, what is wrong); exit 2 when RUN_DIR is not a run folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, TypeAdapter, ValidationError

from experiments.records import RECORD, VARIANTS, Manifest, Verdict

JSONL = "experiments.jsonl"
# File -> model; verdict.json and variants.json exist once a run has finished.
DOCUMENTS: dict[str, type[BaseModel] | TypeAdapter] = {
    "manifest.json": Manifest,
    "verdict.json": Verdict,
    "variants.json": VARIANTS,
}


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None  # 1-based JSONL line; None for a whole document
    field: str
    what: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.field}: {self.what}"


def _problem(file: str, line: int | None, exc: ValidationError) -> Problem:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(record)"
    return Problem(file, line, field, f"{err['msg']} (got {err.get('input')!r:.80})")


def check_run(run_dir: Path) -> tuple[Problem | None, str]:
    """(first problem or None, one-line summary)."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise FileNotFoundError(
            f"RUN_DIR: {run_dir} has no manifest.json; pass a folder printed by "
            "`python -m swarm.develop`"
        )
    kinds: Counter[str] = Counter()
    path = run_dir / JSONL
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = RECORD.validate_json(text)
        except ValidationError as exc:
            return _problem(JSONL, n, exc), ""
        kinds[record.kind] += 1
    checked = [JSONL] if path.exists() else []
    for name, model in DOCUMENTS.items():
        doc = run_dir / name
        if not doc.exists():
            continue
        try:
            data = json.loads(doc.read_text(encoding="utf-8"))
            if isinstance(model, TypeAdapter):
                model.validate_python(data)
            else:
                model.model_validate(data)
        except json.JSONDecodeError as exc:
            return Problem(name, exc.lineno, "(document)", f"not JSON: {exc.msg}"), ""
        except ValidationError as exc:
            return _problem(name, None, exc), ""
        checked.append(name)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "no records"
    return (
        None,
        f"{run_dir.name}: ok ({sum(kinds.values())} records: {counts}; {', '.join(checked)})",
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 when the run folder is valid (its summary printed), 1 when not, 2 when missing."""
    parser = argparse.ArgumentParser(prog="python -m experiments.check", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        problem, summary = check_run(args.run_dir)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problem is not None:
        print(f"invalid: {problem}", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    from experiments.cli_output import run_cli

    sys.exit(run_cli(main))
