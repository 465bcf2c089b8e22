"""`python -m swarm.develop --resume RUN_DIR`: what it refuses and what it says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lab_runs import reference_args, run_develop, shared_run

from swarm.develop import main

pytestmark = [pytest.mark.integration]


@pytest.fixture
def finished_copy(tmp_path_factory, daily_dir, tmp_path) -> Path:
    run_dir, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    return copy


@pytest.mark.slow
def test_resuming_a_finished_run_reports_it_and_changes_nothing(finished_copy):
    before = (finished_copy / "experiments.jsonl").read_bytes()
    done = run_develop(["--resume", str(finished_copy)], cache_home=finished_copy.parent / "c")
    assert done.returncode == 0, done.stderr
    assert "already finished" in done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]) == finished_copy
    assert (finished_copy / "experiments.jsonl").read_bytes() == before


@pytest.mark.slow
def test_resume_refuses_data_that_changed_since_the_run_started(finished_copy):
    manifest_path = finished_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["data"]["symbols"]["AAPL"]["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    done = run_develop(["--resume", str(finished_copy)], cache_home=finished_copy.parent / "c")
    assert done.returncode == 2
    assert "data changed" in done.stderr and "AAPL" in done.stderr
    assert "Traceback" not in done.stderr


def test_resume_needs_a_run_folder_with_a_manifest(tmp_path, capsys):
    assert main(["--resume", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_resume_refuses_options_that_would_not_apply(tmp_path, capsys):
    assert main(["--resume", str(tmp_path), "--seed", "3", "--variants", "2"]) == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "--variants" in err and "manifest.json" in err


def test_memory_dir_must_be_a_folder_or_off(tmp_path, capsys):
    afile = tmp_path / "memory.txt"
    afile.write_text("x")
    assert main(["--directive", "momentum", "--memory-dir", str(afile)]) == 2
    assert "--memory-dir" in capsys.readouterr().err


def test_a_checkpoint_of_another_state_schema_is_refused_unless_the_run_finished(tmp_path):
    from swarm.errors import UserInputError
    from swarm.run_resume import check_state_schema
    from swarm.state import STATE_SCHEMA

    check_state_schema(tmp_path, {"state_schema": STATE_SCHEMA})
    with pytest.raises(UserInputError, match="older version of the lab.*without --resume"):
        check_state_schema(tmp_path, {})  # manifests before the schema: 1
    (tmp_path / "verdict.json").write_text("{}")
    check_state_schema(tmp_path, {})  # finished: only reported


@pytest.mark.slow
@pytest.mark.corrupts_run_folder
def test_resuming_an_unfinished_run_of_an_older_schema_exits_2_and_keeps_its_records(finished_copy):
    manifest_path = finished_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["state_schema"] >= 2
    manifest.pop("state_schema")
    manifest_path.write_text(json.dumps(manifest))
    (finished_copy / "verdict.json").unlink()
    before = (finished_copy / "experiments.jsonl").read_bytes()
    done = run_develop(["--resume", str(finished_copy)], cache_home=finished_copy.parent / "c")
    assert done.returncode == 2
    assert "older version of the lab" in done.stderr and "Traceback" not in done.stderr
    assert (finished_copy / "experiments.jsonl").read_bytes() == before
