"""``--mask`` only speaks to an LLM: a ``--llm none`` develop run is the same run with
``--mask``, ``--no-mask`` or neither (issue 29)."""

from __future__ import annotations

import json

import pytest

from experiments.tracker import read_records, strip_volatile
from swarm.develop import main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
RUN_ID = {"run_id", "run_dir", "argv", "created", "started", "finished"}


def _without(obj, drop):
    if isinstance(obj, dict):
        return {k: _without(v, drop) for k, v in obj.items() if k not in drop}
    if isinstance(obj, list):
        return [_without(v, drop) for v in obj]
    return obj


def test_llm_none_develop_runs_are_the_same_with_and_without_mask(tmp_path, daily_dir):
    runs = []
    for flag in (["--mask"], [], ["--no-mask"]):
        out = tmp_path / (flag[0].strip("-") if flag else "default")
        code = main(
            [
                "--directive",
                "trend following in tech",
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
                "1",
                "--folds",
                "2",
                "--workers",
                "1",
                "--offline",
                "--quiet",
                "--no-figures",  # charts and tear sheet: none of what is compared
                "--memory-dir",
                "off",
                "--ledger-dir",  # three runs compared: none counts another's trials
                "off",
                "--out",
                str(out),
                *flag,
            ]
        )
        assert code == 0
        (run,) = list(out.iterdir())
        runs.append(run)
    records = [strip_volatile(read_records(r / "experiments.jsonl")) for r in runs]
    assert records[0] == records[1] == records[2]
    verdicts = [_without(json.loads((r / "verdict.json").read_text()), RUN_ID) for r in runs]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    variants = [(r / "variants.json").read_bytes() for r in runs]
    assert variants[0] == variants[1] == variants[2]
    assert not any((r / "llm_calls.jsonl").exists() for r in runs)
