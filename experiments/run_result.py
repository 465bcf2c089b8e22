"""A finished run folder as one typed object, for notebooks: ``load_run(run_dir) -> RunResult``.

``swarm.develop(...)`` and ``swarm.judge(...)`` return exactly what ``load_run`` reads back
from the folder they wrote, so a result reviewed months later is the same object a fresh run
returned. Everything is read through the models the run was written with
(``experiments.records``), never re-computed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from backtest.contracts import Metrics
from experiments.records import RECORD, VARIANTS, BacktestRecord, Manifest, VariantEntry, Verdict
from experiments.runfolder import code_file
from gate.alpha import AlphaStats
from gate.judge_result import JudgeResult
from strategies.route import Decided

__all__ = ["BestVariant", "RunFolderError", "RunResult", "load_run"]

DEVELOP = "swarm.develop"  # develop manifests carry no entry_point; the judge's say gate.judge


class RunFolderError(Exception):
    """A folder that is not a finished run; the message says what to pass instead."""


class BestVariant(BaseModel):
    """The run's closest variant (the winner on SUCCESS), with its in-sample figures."""

    variant_id: str
    name: str | None = None
    family: str | None = None  # None for a judged file: a user's class has no lab family
    scope: str | None = None  # symbol (one run per ticker) or portfolio
    parameters: dict[str, float | int | bool | str] = {}
    metrics: Metrics | None = None
    alpha: AlphaStats | None = None
    score: float | None = None
    dsr: float | None = None
    code_file: str | None = None  # relative to the run folder


class RunResult(BaseModel):
    """What a develop or judge run concluded, read from its folder.

    ``verdict`` is the whole ``verdict.json``; the fields beside it are the ones a notebook
    reaches for first. ``records()`` and ``variants()`` read the rest on demand, so loading a
    large run stays cheap.
    """

    model_config = ConfigDict(frozen=True)

    run_dir: Path
    run_id: str
    entry_point: str  # swarm.develop or gate.judge
    verdict: Verdict
    best: BestVariant | None = None
    n_trials: int
    n_backtests: int
    iterations: int
    route_history: list[Decided]
    holdout_alpha: AlphaStats | None = None  # the sealed holdout, opened once for the winner
    manifest: Manifest
    judge: JudgeResult | None = None  # judge runs only: every file's verdict

    @property
    def passed(self) -> bool:
        """Whether the run's verdict is SUCCESS."""
        return self.verdict.verdict == "SUCCESS"

    def records(self, kind: str | None = None) -> list[Any]:
        """``experiments.jsonl`` as typed records (``experiments.records.ExperimentRecord``),
        optionally one kind: backtest, gate, holdout, screen, variant_rejected, llm_*."""
        path = self.run_dir / "experiments.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        out = [RECORD.validate_json(line) for line in lines if line.strip()]
        return [r for r in out if kind is None or r.kind == kind]

    def variants(self) -> dict[str, VariantEntry]:
        """``variants.json``: every variant with spec, code and lineage (develop runs)."""
        path = self.run_dir / "variants.json"
        return VARIANTS.validate_json(path.read_text(encoding="utf-8")) if path.exists() else {}

    def report(self) -> str:
        """``report.md`` as text (``IPython.display.Markdown(result.report())`` renders it)."""
        return (self.run_dir / "report.md").read_text(encoding="utf-8")


def load_run(run_dir: str | Path) -> RunResult:
    """The ``RunResult`` of a finished run folder (develop or judge)."""
    root = Path(run_dir).expanduser().resolve()
    if not (root / "manifest.json").is_file():
        raise RunFolderError(
            f"run_dir: {root} has no manifest.json; pass a folder printed by "
            "`python -m swarm.develop` or named in a judge result's run_dir"
        )
    if not (root / "verdict.json").is_file():
        raise RunFolderError(
            f"run_dir: {root} has no verdict.json: the run did not finish; continue it with "
            f"`python -m swarm.develop --resume {root}`, or read its records with "
            "experiments.tracker.read_records"
        )
    try:
        raw = json.loads((root / "manifest.json").read_bytes())
        manifest = Manifest.model_validate(raw)
        verdict = Verdict.model_validate_json((root / "verdict.json").read_bytes())
        judged = root / "judge.json"
        judge = JudgeResult.model_validate_json(judged.read_bytes()) if judged.is_file() else None
    except ValueError as exc:  # a JSON or model error (pydantic's is a ValueError too)
        if not isinstance(exc, ValidationError):
            raise RunFolderError(
                f"run_dir: {root}: a file is not JSON ({exc}); "
                f"`python -m experiments.check {root}` names it"
            ) from exc
        raise RunFolderError(
            f"run_dir: {root} does not match the run-folder models ({exc.errors()[0]['loc']}: "
            f"{exc.errors()[0]['msg']}); `python -m experiments.check {root}` names the file"
        ) from exc
    result = RunResult(
        run_dir=root,
        run_id=manifest.run_id,
        entry_point=str(raw.get("entry_point") or DEVELOP),
        verdict=verdict,
        n_trials=verdict.n_trials,
        n_backtests=verdict.n_backtests,
        iterations=verdict.iterations,
        route_history=verdict.route_history,
        holdout_alpha=verdict.holdout_alpha,
        manifest=manifest,
        judge=judge,
    )
    best = _best(result) if verdict.best_variant else None
    return result.model_copy(update={"best": best})


def _best(result: RunResult) -> BestVariant:
    """The best variant from variants.json (develop), else from its records and the verdict's
    in-sample figures (the judge writes no variants.json)."""
    vid = result.verdict.best_variant
    assert vid is not None
    entry = result.variants().get(vid)
    if entry is not None:
        own = entry.in_sample
        return BestVariant(
            variant_id=vid,
            name=entry.spec.name,
            family=entry.spec.family.value,
            scope=entry.spec.scope,
            parameters=dict(entry.spec.parameters),
            metrics=own.metrics if own else None,
            alpha=own.alpha if own else None,
            score=own.score if own else result.verdict.best_score,
            dsr=own.dsr if own else result.verdict.best_dsr,
            code_file=entry.code_file,
        )
    mine = [r for r in result.records("backtest") if r.variant_id == vid]
    backtest: BacktestRecord | None = mine[0] if mine else None
    files = result.judge.files if result.judge else []
    judged = next((f for f in files if f.variant_id == vid), None)
    figures = result.verdict.figures
    # The judge names the window "in_sample", the develop loop "in-sample".
    own = figures.get("in_sample") or figures.get("in-sample")
    source = code_file(vid)
    return BestVariant(
        variant_id=vid,
        name=judged.class_name if judged else (backtest.name if backtest else None),
        # The judge's records keep the scope in ``family``: a user's class has no family.
        family=None if judged or not backtest else backtest.family,
        scope=judged.scope if judged else None,
        parameters=dict(backtest.parameters) if backtest else {},
        metrics=own.metrics if own else None,
        alpha=own.alpha if own else None,
        score=result.verdict.best_score,
        dsr=result.verdict.best_dsr,
        code_file=source if (result.run_dir / source).is_file() else None,
    )
