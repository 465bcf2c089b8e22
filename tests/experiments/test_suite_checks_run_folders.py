"""The suite's own guard: every run folder a test makes must pass ``experiments.check``
(tests/conftest.py), whether the folder sits in a test's ``tmp_path`` or in a module-scoped
``tmp_path_factory`` folder checked when the session ends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

BAD_RUN = """
import json


def bad_run(root):
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"run_id": 1}))  # run_id must be a string
    return root
"""


@pytest.fixture
def lab(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    corrupts_run_folder: exempt\n")
    pytester.makepyfile(helpers=BAD_RUN)
    return pytester


def _run(lab: pytest.Pytester) -> pytest.RunResult:
    result = lab.runpytest_subprocess("-p", "no:cacheprovider")
    for manifest in list(lab.path.rglob("manifest.json")):  # the inner session's, not ours
        shutil.rmtree(manifest.parent, ignore_errors=True)
    return result


def test_a_bad_folder_in_tmp_path_fails_its_test(lab: pytest.Pytester) -> None:
    lab.makepyfile(
        test_bad="""
from helpers import bad_run

def test_makes_a_bad_run(tmp_path):
    bad_run(tmp_path / "runs" / "r1")
"""
    )
    result = _run(lab)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*a run folder fails experiments.check*", "*r1: manifest.json: run_id*"]
    )


def test_a_bad_folder_from_a_module_fixture_fails_the_session(lab: pytest.Pytester) -> None:
    lab.makepyfile(
        test_bad="""
import pytest
from helpers import bad_run

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return bad_run(tmp_path_factory.mktemp("runs") / "r1")

def test_uses_it(shared):
    assert shared.exists()
"""
    )
    result = _run(lab)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*a run folder fails experiments.check*"])


def test_a_test_marked_as_corrupting_is_exempt(lab: pytest.Pytester) -> None:
    lab.makepyfile(
        test_bad="""
import pytest
from helpers import bad_run

@pytest.mark.corrupts_run_folder
def test_breaks_one_on_purpose(tmp_path):
    bad_run(tmp_path / "r1")
"""
    )
    assert _run(lab).ret == pytest.ExitCode.OK
