"""Reproducibility: the same inputs and --seed give the same experiments.jsonl, timestamps aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_runs import comparable, printed_run_dir, reference_args, run_develop, shared_run

from experiments.tracker import read_records

# Both tests compare the session's reference run with one more run of the same inputs and
# seed, made once for the module (one xdist worker: the group keeps the module together).
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("reproducible_runs")]


@pytest.fixture(scope="module")
def second(tmp_path_factory, daily_dir) -> Path:
    """The reference run again, from a fresh cache home (the same, empty, research memory the
    reference started from), with ``--no-figures``: figures are drawn from the records after
    they are written and are no input of them, so the records, variants and verdict must
    still be the reference's, field for field (the second test checks that this run drew
    nothing)."""
    root = tmp_path_factory.mktemp("second")
    return printed_run_dir(
        run_develop(
            [*reference_args(daily_dir), "--no-figures", "--out", str(root / "out")],
            cache_home=root / "cache",
        )
    )


def test_two_runs_with_the_same_seed_write_the_same_jsonl(tmp_path_factory, daily_dir, second):
    first, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
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
    tmp_path_factory, daily_dir, second
):
    """``--no-figures`` (the calibration's runs): no charts, no tear sheet, report.md says so,
    and the verdict is the reference run's, field for field."""
    first, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    assert (first / "tearsheet.html").exists() and list((first / "charts").glob("*.png"))
    assert not (second / "tearsheet.html").exists() and not list((second / "charts").iterdir())
    assert "Not drawn, nor the tear sheet (`--no-figures`)." in (second / "report.md").read_text()
    va, vb = (json.loads((d / "verdict.json").read_text()) for d in (first, second))
    assert va == vb
    assert comparable(first) == comparable(second)
