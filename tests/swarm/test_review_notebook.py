"""The review notebook runs top to bottom (nbclient) on a run the tests make, and shows the
trajectory chart, the lineage tree, a code diff and the holdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from lab_runs import reference_args, shared_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "review.ipynb"


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch) -> str:
    """A ``python3`` kernelspec that runs this interpreter (the venv's), found first on
    JUPYTER_PATH: nothing is installed in the user's home or elsewhere."""
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (lab venv)",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "python3"


def _outputs(nb, tag: str) -> list:
    return [o for c in nb.cells if tag in c.metadata.get("tags", []) for o in c.get("outputs", [])]


def _text(outputs) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


def test_review_notebook_runs_on_a_run_folder(
    tmp_path_factory, daily_dir, venv_kernel, tmp_path, monkeypatch
):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    run_dir, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    monkeypatch.setenv("RUN_DIR", str(run_dir))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name=venv_kernel, timeout=180, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on any failing cell

    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    trajectory = _outputs(nb, "trajectory")
    assert sum("image/png" in o.get("data", {}) for o in trajectory) >= 2  # run's PNG + re-plot
    variants = json.loads((run_dir / "variants.json").read_text())
    lineage = _text(_outputs(nb, "lineage"))
    assert all(vid in lineage for vid in variants) and "── " in lineage
    diff = _text(_outputs(nb, "diff"))
    if any(v.get("parent_id") in variants for v in variants.values()):
        assert "--- strategies/" in diff and "+++ strategies/" in diff
    holdout = _outputs(nb, "holdout")
    assert holdout
    verdict = json.loads((run_dir / "verdict.json").read_text())
    if verdict["verdict"] == "SUCCESS":
        assert any("text/html" in o.get("data", {}) for o in holdout)  # the holdout table
