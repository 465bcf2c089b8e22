"""Crash safety: SIGKILL ``develop`` at random moments, resume each time, and the run folder
ends up with exactly the records of an uninterrupted run with the same seed."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from lab_runs import (
    comparable,
    describe_diff,
    develop_cmd,
    develop_env,
    n_checkpoints,
    n_saved_tasks,
    only_run_dir,
    reference_args,
    shared_run,
)

from experiments.tracker import ID_FIELDS, read_records

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N_KILLS = 12
KILL_SEED = 20_240_607


@pytest.fixture(scope="module")
def reference(tmp_path_factory, daily_dir) -> Path:
    run_dir, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    return run_dir


def _kill_when(
    proc, out: Path, target: float, done: int, rng: random.Random, deadline: float
) -> bool:
    """SIGKILL ``proc`` once the run has written ``target`` checkpoints (plus a random delay,
    so kills land inside super-steps too). A target the run has already passed (``done``
    checkpoints when this process started) kills at a random moment of start-up instead:
    imports, data loading, the manifest, opening the checkpoint. Returns False when the
    process ended first."""
    if target < 1 or target <= done:
        try:
            proc.wait(timeout=rng.uniform(0.1, 3.0))
            return False
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if n_checkpoints(only_run_dir(out)) >= target:
            time.sleep(rng.uniform(0.0, 0.4))
            if proc.poll() is not None:
                return False
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.03)
    raise AssertionError(f"target {target:.1f} checkpoints not reached in time")


def test_sigkill_at_random_moments_and_resume_gives_the_uninterrupted_records(
    reference, daily_dir, tmp_path
):
    expected = comparable(reference)
    total = n_checkpoints(reference)
    assert total > 10 and expected
    rng = random.Random(KILL_SEED)
    # Kill moments spread over the whole run: a random point of progress (in super-steps
    # checkpointed), then a random delay; a few land in start-up, before any checkpoint.
    targets = sorted(rng.uniform(0.0, 0.85 * total) for _ in range(N_KILLS))
    out = tmp_path / "runs"
    out.mkdir()
    env = develop_env(tmp_path / "cache")  # one run: every attempt shares its memory
    log = []
    t0 = time.monotonic()
    for attempt in [*targets, None]:
        run_dir = only_run_dir(out)
        if run_dir is not None and not (run_dir / "manifest.json").exists():
            shutil.rmtree(run_dir)  # killed before the run existed: nothing to resume
            run_dir = None
        cmd = (
            develop_cmd(*reference_args(daily_dir), "--out", str(out))
            if run_dir is None
            else develop_cmd("--resume", str(run_dir))
        )
        before = n_checkpoints(run_dir)
        started = time.monotonic()
        with open(tmp_path / "stderr.log", "a") as err:
            err.write(f"\n===== attempt {len(log) + 1} (target {attempt}), {before} checkpoints\n")
            err.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
            if attempt is None:  # the last resume runs to the end
                stdout, _ = proc.communicate(timeout=600)
                assert proc.returncode == 0, (tmp_path / "stderr.log").read_text()[-3000:]
                break
            killed = _kill_when(proc, out, attempt, before, rng, deadline=time.monotonic() + 300)
            proc.stdout.close()
        assert killed, f"the run ended before kill #{len(log) + 1} (target {attempt:.1f})"
        log.append(
            (
                round(attempt, 1),
                before,
                n_checkpoints(only_run_dir(out)),
                round(time.monotonic() - started, 2),
                "fresh" if run_dir is None else "resume",
            )
        )
    wall = time.monotonic() - t0
    print(f"\n{len(log)} kills in {wall:.1f}s (target, checkpoints before/after, secs, mode):")
    for row in log:
        print("  ", row)

    assert len(log) >= 10
    run_dir = only_run_dir(out)
    assert Path(stdout.strip().splitlines()[-1]) == run_dir
    records = list(read_records(run_dir / "experiments.jsonl"))
    # No duplicated record: by content id and by what the id is made of.
    assert len({r["record_id"] for r in records}) == len(records)
    assert len({tuple(r.get(f) for f in ID_FIELDS) for r in records}) == len(records)
    # No missing record, nothing extra, and the same content (timestamps and run id aside).
    got = comparable(run_dir)
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    # On a difference, say where it is, with the attempts' progress lines (the run folder
    # stays in the test's tmp_path for a closer look).
    why = describe_diff(got, expected) + "\n" + (tmp_path / "stderr.log").read_text()[-4000:]
    assert sorted(map(key, got)) == sorted(map(key, expected)), why
    assert got == expected  # even in the same order
    # The rest of the folder agrees too.
    ref_verdict = json.loads((reference / "verdict.json").read_text())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    for field in (
        "verdict",
        "best_variant",
        "iterations",
        "n_trials",
        "n_backtests",
        "route_history",
    ):
        assert verdict[field] == ref_verdict[field], field
    assert json.loads((run_dir / "variants.json").read_text()) == json.loads(
        (reference / "variants.json").read_text()
    )
    if (reference / "winner" / "strategy.py").exists():
        assert (run_dir / "winner" / "strategy.py").read_text() == (
            reference / "winner" / "strategy.py"
        ).read_text()
    for rel in ("report.md", "charts/trajectory.png", "charts/trial_sharpes.png"):
        assert (run_dir / rel).exists(), rel
    assert not (run_dir / "error.json").exists()


def test_backtests_finished_before_a_kill_are_not_run_again(reference, daily_dir, tmp_path):
    """The fan-out's finished tasks are saved as they finish: a resume runs only the rest."""
    out, err_path = tmp_path / "runs", tmp_path / "stderr.log"
    env = develop_env(tmp_path / "cache")
    with open(err_path, "w") as err:
        # One worker: the 6 jobs run as 3 same-code children one after another, so the kill
        # below lands between the second and the third (results do not depend on workers).
        proc = subprocess.Popen(
            develop_cmd(*reference_args(daily_dir), "--workers", "1", "--out", str(out)),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        deadline = time.monotonic() + 300
        # Kill once LangGraph has saved at least three finished backtest tasks.
        while n_saved_tasks(only_run_dir(out), "branch:to:gate") < 3:
            assert proc.poll() is None, err_path.read_text()[-2000:]
            assert time.monotonic() < deadline, err_path.read_text()[-2000:]
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_dir = only_run_dir(out)
    done = subprocess.run(
        develop_cmd("--resume", str(run_dir)), capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    match = re.search(r"(\d+) of 6 tasks already done", done.stderr)
    assert match and int(match.group(1)) >= 3, done.stderr[:3000]
    assert comparable(run_dir) == comparable(reference)
