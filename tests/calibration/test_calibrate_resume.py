"""``python -m swarm.calibrate --resume``: a stopped calibration keeps every finished run
(``records.jsonl``, or the run folders of an older one) and runs only what is missing; a
folder with records is never silently mixed with a new calibration."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from swarm.calibrate import build_parser, main
from swarm.calibration.jobs import plan_runs
from swarm.calibration.resume import RECORDS, append_record, finished, plan_key, read_records

SMALL = [
    *("--seed", "11", "--symbols", "1", "--years", "3", "--variants", "2"),
    *("--max-iterations", "1", "--no-screen", "--quiet", "--kinds", "null-zero"),
]


def _specs(tmp_path, *extra: str):
    return plan_runs(build_parser().parse_args([*SMALL, *extra]), tmp_path)


@pytest.mark.unit
def test_a_record_is_only_its_planned_runs_and_a_cut_line_is_skipped(tmp_path):
    a, b = _specs(tmp_path, "--runs", "2")
    assert plan_key(a) != plan_key(b)
    assert plan_key(a) == plan_key(dataclasses.replace(a, out=tmp_path / "x", workers=7))
    other = _specs(tmp_path, "--runs", "2", "--variants", "3")[0]
    assert plan_key(other) != plan_key(a)  # another develop option: another run
    append_record(tmp_path, a, {"kind": a.kind, "index": 1, "verdict": "ABANDON"})
    with (tmp_path / RECORDS).open("a") as f:
        f.write('{"kind": "null-zero", "index": 2, "verd')  # killed mid-line
    assert list(read_records(tmp_path)) == [plan_key(a)]
    assert list(finished([a, b], tmp_path)) == [plan_key(a)]
    assert finished([other], tmp_path) == {}
    append_record(tmp_path, b, {"kind": b.kind, "index": 2, "verdict": "ERROR"})
    assert list(finished([a, b], tmp_path)) == [plan_key(a)]  # an ERROR runs again


def _run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main([*SMALL, *argv])
    cap = capsys.readouterr()
    return code, cap.out.splitlines(), cap.err


@pytest.mark.e2e
@pytest.mark.slow
def test_a_stopped_calibration_finishes_where_it_stopped(tmp_path, capsys):
    out = tmp_path / "cal"
    code, lines, _ = _run(capsys, "--runs", "2", "--out", str(out))
    assert code == 0
    first = json.loads((out / "calibration.json").read_text())["runs"]
    assert len(read_records(out)) == 2

    code, _, err = _run(capsys, "--runs", "2", "--out", str(out))  # not mixed with a new one
    assert code == 2 and f"--out: {out} holds a calibration's records" in err
    assert "--resume" in err and "Traceback" not in err
    code, _, err = _run(capsys, "--runs", "2", "--resume")
    assert code == 2 and err.startswith("error: --resume: no --out given")

    # An older calibration (no records.jsonl): its finished run folders are recovered, and
    # only the third run is new.
    (out / RECORDS).unlink()
    runs_before = {p.name for p in (out / "runs").iterdir()}
    code, lines, _ = _run(capsys, "--runs", "3", "--out", str(out), "--resume")
    assert code == 0
    summary = json.loads((out / "calibration.json").read_text())
    assert [r["index"] for r in summary["runs"]] == [1, 2, 3]
    for old, new in zip(first, summary["runs"][:2], strict=True):
        assert {k: new[k] for k in ("verdict", "n_trials", "best_variant", "best_dsr")} == {
            k: old[k] for k in ("verdict", "n_trials", "best_variant", "best_dsr")
        }
        assert new["seconds"] is None  # recovered from its folder: not timed
    assert {p.name for p in (out / "runs").iterdir()} - runs_before == {"null-zero-003"}
    assert sum(ln.startswith("null-zero ") for ln in lines) == 3  # the table is whole
    assert len(read_records(out)) == 1  # the run made now

    # A run folder whose universe is not the planned one is not recovered.
    shutil.rmtree(out / "runs" / "null-zero-003")
    meta = out / "data" / "null-zero-003" / "universe.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "spec": {"seed": -1}}))
    (out / RECORDS).unlink()
    specs = plan_runs(build_parser().parse_args([*SMALL, "--runs", "3"]), out)
    assert [plan_key(s) in finished(specs, out) for s in specs] == [True, True, False]
