"""``python -m swarm.analyze``: bad input is one line and exit 2 with no folder; a good run
writes the folder and prints it last; a review is stored in memory and recalled (and cited)
by a later analysis of the same symbol, never by an earlier one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.analyze.__main__ import main
from swarm.analyze.contracts import OutcomeTag

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--ticker", "NOPE", "--date", "2019-06-03"], "--ticker"),
        (["--ticker", "NVDA", "--date", "2021-06-03"], "--date"),  # after the last bar
        (["--ticker", "NVDA", "--date", "1990-01-02"], "--date"),  # before the first bar
        (["--ticker", "NVDA", "--date", "03/06/2019"], "--date"),  # unparsable
        (["--ticker", "NVDA", "--date", "2019-13-40"], "--date"),
        (["--ticker", "NVDA", "--date", "1999-02-10"], "--date"),  # too little history
        (["--ticker", "NVDA"], "--date"),
        (["--date", "2019-06-03"], "--ticker"),
        (["--ticker", "NVDA", "--date", "2019-06-03", "--debate-rounds", "0"], "--debate-rounds"),
        (["--ticker", "NVDA", "--date", "2019-06-03", "--risk-pct", "-1"], "--risk-pct"),
        (
            ["--ticker", "NVDA", "--date", "2019-06-03", "--news-file", "/no/such.csv"],
            "--news-file",
        ),
        (["--ticker", "NVDA", "--date", "2019-06-03", "--llm", "gpt"], "--llm"),
        (["--ticker", "NVDA", "--date", "2019-06-03", "--bogus"], "unrecognized"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_folder(capsys, tmp_path, daily_dir, args, flag):
    out_dir = tmp_path / "runs"
    code, out, err = run(
        capsys, *args, "--data-dir", str(daily_dir), "--out", str(out_dir), "--memory-dir", "off"
    )
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], err
    assert "Traceback" not in err
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_a_subprocess_run_prints_the_folder_last(tmp_path, daily_dir):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.analyze",
            "--ticker",
            "nvda",
            "--date",
            "2019-06-03",
            "--data-dir",
            str(daily_dir),
            "--out",
            str(tmp_path),
            "--memory-dir",
            "off",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert sorted(p.name for p in folder.iterdir()) == [
        "approval.html",
        "book.json",
        "decision.json",
        "features.json",
        "manifest.json",
        "report.md",
    ]
    decision = json.loads((folder / "decision.json").read_text())
    assert decision["ticker"] == "NVDA" and decision["date"] == "2019-06-03"
    features = json.loads((folder / "features.json").read_text())
    assert features["as_of"] == "2019-06-03" and "ATR_14" in features["features"]
    report = (folder / "report.md").read_text()
    assert report.startswith("# NVDA · 2019-06-03 · ") and "## Risk engine" in report
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.analyze",
            "--ticker",
            "NVDA",
            "--date",
            "x",
            "--data-dir",
            str(daily_dir),
            "--out",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_review_goes_to_memory_and_a_later_analysis_recalls_it(capsys, tmp_path, daily_dir):
    mem, out = str(tmp_path / "memory"), str(tmp_path / "runs")
    common = ["--data-dir", str(daily_dir), "--out", out, "--memory-dir", mem, "--quiet"]
    code, stdout, err = run(capsys, "--ticker", "NVDA", "--date", "2019-06-03", *common)
    assert code == 0, err
    first = Path(stdout.strip().splitlines()[-1])
    assert json.loads((first / "decision.json").read_text())["recalled"] == []

    code, stdout, err = run(capsys, "--review", str(first), "--memory-dir", mem, "--quiet")
    assert code == 0, err
    review = json.loads((first / "review.json").read_text())
    assert review["tag"] in [t.value for t in OutcomeTag] and review["stored_in_memory"]
    assert review["horizon_end"] == "2019-06-17"  # 10 bars after 2019-06-03
    assert (first / "review.md").exists()

    # Inside the horizon the outcome was not known yet: nothing to recall.
    code, stdout, err = run(capsys, "--ticker", "NVDA", "--date", "2019-06-10", *common)
    assert (
        code == 0
        and json.loads((Path(stdout.strip().splitlines()[-1]) / "decision.json").read_text())[
            "recalled"
        ]
        == []
    )
    # Another symbol does not recall it either.
    code, stdout, err = run(capsys, "--ticker", "AAPL", "--date", "2019-07-01", *common)
    assert json.loads((Path(stdout.strip()) / "decision.json").read_text())["recalled"] == []

    code, stdout, err = run(capsys, "--ticker", "NVDA", "--date", "2019-07-01", *common)
    later = Path(stdout.strip().splitlines()[-1])
    recalled = json.loads((later / "decision.json").read_text())["recalled"]
    assert len(recalled) == 1 and recalled[0]["date"] == "2019-06-03"
    assert recalled[0]["tag"] == review["tag"]
    decision = json.loads((later / "decision.json").read_text())
    assert "Recalled from past reviews" in decision["debate"]["rationale"]
    assert "2019-06-03" in (later / "report.md").read_text().split("## Recalled from memory")[1]


def test_review_before_the_horizon_is_exit_2(capsys, tmp_path, daily_dir):
    code, stdout, _ = run(
        capsys,
        "--ticker",
        "NVDA",
        "--date",
        "2020-12-04",
        "--data-dir",
        str(daily_dir),
        "--out",
        str(tmp_path),
        "--memory-dir",
        "off",
    )
    assert code == 0
    code, _, err = run(capsys, "--review", stdout.strip(), "--memory-dir", "off")
    assert code == 2 and "horizon" in err and len(err.strip().splitlines()) == 1


IMPORTS_PROBE = """
import json, sys
from swarm.analyze.__main__ import main
code = main({argv!r})
heavy = sorted(m for m in ("chromadb", "scipy.stats") if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


def _analyze_in_fresh_process(argv: list[str]) -> tuple[dict, Path]:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_PROBE.format(argv=argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]), Path(lines[-2])


def test_nothing_to_recall_opens_no_store_and_records_are_still_recalled(tmp_path, daily_dir):
    """The offline path imports neither chromadb (no record about the ticker: the store is not
    opened; reviews of it: read from the sidecar beside the store) nor scipy.stats. A memory
    without a sidecar (older) is read through chromadb once, which writes the sidecar."""
    import shutil

    from swarm.analyze.review import REVIEW_RUN_PREFIX
    from swarm.memory.sidecar import sidecar_path

    mem, out = tmp_path / "memory", tmp_path / "analyses"
    common = ["--data-dir", str(daily_dir), "--out", str(out), "--memory-dir", str(mem), "--quiet"]
    got, first = _analyze_in_fresh_process(["--ticker", "NVDA", "--date", "2019-06-03", *common])
    assert got == {"code": 0, "heavy": []}
    assert not mem.exists()  # a read of an empty memory creates nothing
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["memory"]["opened"] is False
    assert main(["--review", str(first), "--memory-dir", str(mem), "--quiet"]) == 0

    # Another ticker: the index beside the store rules it out, nothing is opened.
    got, _ = _analyze_in_fresh_process(["--ticker", "AAPL", "--date", "2019-07-01", *common])
    assert got == {"code": 0, "heavy": []}
    # The same ticker after the review's horizon: recalled from the sidecar, store not opened.
    got, later = _analyze_in_fresh_process(["--ticker", "NVDA", "--date", "2019-07-01", *common])
    assert got == {"code": 0, "heavy": []}
    decision = (later / "decision.json").read_text()
    recalled = json.loads(decision)["recalled"]
    assert [r["date"] for r in recalled] == ["2019-06-03"]
    assert json.loads((later / "manifest.json").read_text())["memory"]["opened"] is False
    # An older memory (no sidecar): chromadb once, the same decision, and the sidecar is back.
    sidecar_path(mem, REVIEW_RUN_PREFIX).unlink()
    got, older = _analyze_in_fresh_process(["--ticker", "NVDA", "--date", "2019-07-01", *common])
    assert got == {"code": 0, "heavy": ["chromadb"]}
    assert (older / "decision.json").read_text() == decision
    assert json.loads((older / "manifest.json").read_text())["memory"]["records"] == 1
    got, again = _analyze_in_fresh_process(["--ticker", "NVDA", "--date", "2019-07-01", *common])
    assert got == {"code": 0, "heavy": []}
    assert (again / "decision.json").read_text() == decision
    # Analysis folders are not develop runs: experiments.check (the suite's autouse run-folder
    # check) does not know them.
    shutil.rmtree(out)
