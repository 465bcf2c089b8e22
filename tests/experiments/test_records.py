"""The run folder's models and its checker: one writer, and a reader that names what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from backtest.contracts import JobStatus
from experiments.check import check_run, main
from experiments.records import (
    RECORD,
    VARIANTS,
    BacktestRecord,
    GateRecord,
    HoldoutRecord,
    LlmEventRecord,
    Verdict,
    append_record,
)
from experiments.runfolder import RunFolder, build_manifest
from gate.contracts import GateDecision, Route, Veto

pytestmark = pytest.mark.unit

COMMON = {"run_id": "r", "iteration": 1, "route": Route.INITIAL, "recorded_at": "2026-01-01"}


def _backtest(**kw) -> BacktestRecord:
    return BacktestRecord(
        **COMMON,
        variant_id="v1",
        name="n",
        family="trend",
        trial_key="k",
        code_sha256="c",
        symbol="AAPL",
        symbols=["AAPL"],
        data_sha256="d",
        status="ok",
        gate_decision=Route.TUNE,
        gate_veto_kinds=[Veto.TOO_FEW_TRADES],
        **kw,
    )


def _gate() -> GateRecord:
    decision = GateDecision(
        iteration=1, decision=Route.TUNE, best_variant_id="v1", evaluations=[], reasoning="r"
    )
    return GateRecord(**COMMON, gate_decision=Route.TUNE, benchmark="cash", decision=decision)


def _verdict() -> dict:
    return Verdict(
        verdict="ABANDON",
        reason="r",
        iterations=1,
        score_threshold=0.6,
        dsr_threshold=0.95,
        benchmark={"name": "cash", "description": "cash"},
        deflated_alpha_threshold=0.95,
        spa_threshold=0.05,
    ).model_dump(mode="json")


def _run(tmp_path: Path) -> Path:
    run = RunFolder(tmp_path / "run")
    run.write_json(
        "manifest.json",
        build_manifest(run_id="run", config={}, data={}, seed=0, argv=[]),
    )
    assert append_record(run.tracker, _backtest())
    assert append_record(run.tracker, _gate())
    assert not append_record(run.tracker, _gate())  # a replayed step is skipped, by content id
    run.write_json("verdict.json", _verdict())
    run.write_json("variants.json", {})
    return run.root


def test_every_record_kind_round_trips_through_the_union() -> None:
    holdout = HoldoutRecord(
        **(COMMON | {"route": Route.SUCCESS}),
        variant_id="v1",
        symbol="A",
        status=JobStatus.OK,
        data_sha256="d",
        code_sha256="c",
    )
    llm = {**COMMON, "kind": "llm_fallback", "role": "leader", "reasons": ["x"], "extra": 1}
    for record in (_backtest(), _gate(), holdout, llm):
        line = RECORD.validate_python(record).model_dump_json()
        assert RECORD.validate_json(line).kind == json.loads(line)["kind"]
    assert isinstance(RECORD.validate_python(llm), LlmEventRecord)


def test_the_writer_refuses_a_record_the_check_would_refuse(tmp_path) -> None:
    run = RunFolder(tmp_path / "run")
    with pytest.raises(ValidationError):
        append_record(run.tracker, {**COMMON, "kind": "backtest", "variant_id": "v"})
    with pytest.raises(ValidationError):  # an unknown kind
        append_record(run.tracker, {**COMMON, "kind": "mystery"})
    assert not (tmp_path / "run" / "experiments.jsonl").exists()


def test_a_research_round_is_a_number_not_part_of_the_route() -> None:
    rec = RECORD.validate_python(
        {**COMMON, "route": "RESEARCH", "kind": "llm_rejected", "research_round": 2}
    )
    assert rec.route == Route.RESEARCH and rec.research_round == 2
    with pytest.raises(ValidationError):
        RECORD.validate_python({**COMMON, "route": "RESEARCH-2", "kind": "llm_rejected"})


def test_check_passes_a_valid_folder_with_a_one_line_summary(tmp_path, capsys) -> None:
    root = _run(tmp_path)
    problem, summary = check_run(root)
    assert problem is None and "2 records" in summary and "verdict.json" in summary
    assert main([str(root)]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


@pytest.mark.corrupts_run_folder
def test_check_names_file_line_and_field_of_the_first_bad_record(tmp_path, capsys) -> None:
    root = _run(tmp_path)
    path = root / "experiments.jsonl"
    lines = path.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["gate_decision"] = "MAYBE"
    path.write_text("\n".join([lines[0], json.dumps(bad)]) + "\n")
    problem, _ = check_run(root)
    assert problem is not None
    assert (problem.file, problem.line, problem.field) == (
        "experiments.jsonl",
        2,
        "gate.gate_decision",
    )
    assert main([str(root)]) == 1
    err = capsys.readouterr().err
    assert "experiments.jsonl:2" in err and "gate_decision" in err and "MAYBE" in err


@pytest.mark.corrupts_run_folder
def test_check_reads_verdict_variants_and_manifest(tmp_path) -> None:
    root = _run(tmp_path)
    verdict = json.loads((root / "verdict.json").read_text())
    (root / "verdict.json").write_text(json.dumps(verdict | {"iterations": "many"}))
    problem, _ = check_run(root)
    assert problem is not None and (problem.file, problem.field) == ("verdict.json", "iterations")

    root = _run(tmp_path / "b")
    (root / "variants.json").write_text(json.dumps({"v1": {"variant_id": "v1"}}))
    problem, _ = check_run(root)
    assert problem is not None and problem.file == "variants.json"
    assert problem.field.startswith("v1.")


def test_check_refuses_a_folder_that_is_not_a_run(tmp_path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert "manifest.json" in capsys.readouterr().err


def test_variants_file_keeps_origin_as_an_enum() -> None:
    entry = {
        "variant_id": "v",
        "iteration": 1,
        "route": "TUNE",
        "code_sha256": "c",
        "code_file": "strategies/v.py",
        "spec": {"family": "trend", "name": "n", "approach": "a", "entry": "sma_cross"},
    }
    assert VARIANTS.validate_python({"v": entry})["v"].route is Route.TUNE
