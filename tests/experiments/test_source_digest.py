"""``manifest.json`` names the code that made a run even without git (an archive, a snapshot,
a wheel): a sha256 over the lab's Python sources; ``swarm.calibrate --resume`` warns when the
runs it keeps were made by other code."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.runfolder import SOURCE_PACKAGES, build_manifest, source_digest
from swarm.calibration.resume import other_source

pytestmark = pytest.mark.unit


def _tree(root: Path, text: str) -> Path:
    for pkg in SOURCE_PACKAGES:
        (root / pkg / "sub").mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
        (root / pkg / "sub" / "mod.py").write_text(text)
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("assert True")  # not the lab's code
    return root


def test_the_digest_follows_the_sources_and_nothing_else(tmp_path):
    a = source_digest(_tree(tmp_path / "a", "X = 1\n"))
    b = source_digest(_tree(tmp_path / "b", "X = 1\n"))
    c = source_digest(_tree(tmp_path / "c", "X = 2\n"))
    assert a == b and a["files"] == 2 * len(SOURCE_PACKAGES)
    assert c["sha256"] != a["sha256"]
    (tmp_path / "b" / "tests" / "test_x.py").write_text("assert False")
    (tmp_path / "b" / "notes.txt").write_text("x")
    source_digest.cache_clear()
    assert source_digest(tmp_path / "b") == a  # tests and other files are not the lab's code


def test_a_manifest_names_its_source_and_a_resume_warns_of_other_code():
    manifest = build_manifest(run_id="r", config={}, data={}, seed=0, argv=[])
    here = manifest["source"]["sha256"]
    assert len(here) == 64 and manifest["source"]["files"] > 100
    assert other_source([{"source": here}, {"source": here}]) is None
    warning = other_source([{"source": here}, {"source": "f" * 64}, {"source": None}])
    assert warning is not None
    assert "1 by ffffffffffff" in warning and "1 by unrecorded code" in warning
    assert "start a new --out" in warning


def test_the_manifest_model_reads_the_source_and_older_manifests_without_it():
    from experiments.records import Manifest

    manifest = build_manifest(run_id="r", config={}, data={}, seed=0, argv=[])
    assert Manifest.model_validate(manifest).source.sha256 == manifest["source"]["sha256"]
    older = {k: v for k, v in manifest.items() if k != "source"}
    assert Manifest.model_validate(older).source is None
