"""develop against a real local model: Gemma 3 270M served by llama-cpp-python's
OpenAI-compatible server on 127.0.0.1 (installed by scripts/setup_local_llm.sh, which .ci/run
runs). A tiny base model: assert on the pipeline, never on its opinions."""

import json
import subprocess
import sys

import pytest

from experiments.tracker import read_records, strip_volatile
from swarm.llm import local_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

missing = local_server.available()


@pytest.fixture(scope="module")
def base_url():
    if missing:
        pytest.skip(f"local model not installed: {missing}")
    with local_server.serve() as url:
        yield url


def _develop(base_url, daily_dir, out, cache):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "momentum in tech",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2014-01-01",
            "--end",
            "2018-12-31",
            "--variants",
            "2",
            "--max-iterations",
            "2",
            "--folds",
            "2",
            "--workers",
            "2",
            "--offline",
            "--memory-dir",
            "off",
            "--out",
            str(out),
            "--llm",
            f"openai-compatible:{local_server.MODEL_ALIAS}",
            "--llm-base-url",
            base_url,
            "--llm-cache",
            str(cache),
            "--max-llm-tokens",
            "1500",
            "--llm-max-output-tokens",
            "160",
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.iterdir())


def test_develop_with_a_real_local_model_then_replays_with_zero_calls(
    base_url, daily_dir, tmp_path
):
    run_dir = _develop(base_url, daily_dir, tmp_path / "runs", tmp_path / "cache")
    records = list(read_records(run_dir / "experiments.jsonl"))
    usage = [r for r in records if r["kind"] == "llm_usage"]
    assert usage, "no LLM usage recorded"
    last = usage[-1]
    assert last["llm"]["calls"] > 0 and last["llm_replay"]["live_calls"] > 0
    # Every model answer was validated: accepted ones cite the data, the rest fell back, logged.
    findings = json.loads((run_dir / "research" / "findings.json").read_text())
    assert all(f["abstained"] or f["evidence"] for f in findings)
    outcomes = [r for r in records if r["kind"] in ("llm_fallback", "llm_rejected")]
    assert outcomes or last["llm"]["failed_calls"] == 0
    # The budget (1,500 tokens) bounds the run; when spent the run stops cleanly.
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    if last["llm"]["exhausted"] and verdict["verdict"] == "ABANDON":
        assert verdict["reason"].startswith(("budget", "iteration limit"))

    rerun = _develop(base_url, daily_dir, tmp_path / "runs2", tmp_path / "cache")
    again = list(read_records(rerun / "experiments.jsonl"))
    assert [r for r in again if r["kind"] == "llm_usage"][-1]["llm_replay"]["live_calls"] == 0
    assert strip_volatile(again) == strip_volatile(records)
