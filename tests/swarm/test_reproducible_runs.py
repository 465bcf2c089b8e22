"""Reproducibility: the same inputs and --seed give the same experiments.jsonl, timestamps aside."""

from __future__ import annotations

import json

import pytest
from lab_runs import comparable, printed_run_dir, reference_args, run_develop, shared_run

from experiments.tracker import read_records

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_two_runs_with_the_same_seed_write_the_same_jsonl(tmp_path_factory, daily_dir, tmp_path):
    first, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    # A fresh cache home: the same (empty) research memory the reference run started from.
    second = printed_run_dir(
        run_develop(
            [*reference_args(daily_dir), "--out", str(tmp_path / "out")],
            cache_home=tmp_path / "cache",
        )
    )
    assert first.name != second.name or first.parent != second.parent
    a, b = (
        list(read_records(first / "experiments.jsonl")),
        list(read_records(second / "experiments.jsonl")),
    )
    assert len(a) == len(b) > 0
    # Content ids never depend on time or the run: they are equal record for record.
    assert [r["record_id"] for r in a] == [r["record_id"] for r in b]
    assert comparable(first) == comparable(second)
    # Only the documented volatile fields differ.
    differing = {k for ra, rb in zip(a, b, strict=True) for k in ra if ra[k] != rb.get(k)}
    assert differing <= {"recorded_at", "run_id"}
    for name in ("variants.json",):
        assert json.loads((first / name).read_text()) == json.loads((second / name).read_text())
    va, vb = (json.loads((d / "verdict.json").read_text()) for d in (first, second))
    assert va == vb


def test_no_figures_draws_nothing_and_changes_no_figure_of_the_verdict(
    tmp_path_factory, daily_dir, tmp_path
):
    """``--no-figures`` (the calibration's runs): no charts, no tear sheet, report.md says so,
    and the verdict is the reference run's, field for field."""
    first, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    second = printed_run_dir(
        run_develop(
            [*reference_args(daily_dir), "--no-figures", "--out", str(tmp_path / "out")],
            cache_home=tmp_path / "cache",
        )
    )
    assert (first / "tearsheet.html").exists() and list((first / "charts").glob("*.png"))
    assert not (second / "tearsheet.html").exists() and not list((second / "charts").iterdir())
    assert "Not drawn, nor the tear sheet (`--no-figures`)." in (second / "report.md").read_text()
    va, vb = (json.loads((d / "verdict.json").read_text()) for d in (first, second))
    assert va == vb
    assert comparable(first) == comparable(second)
