"""Bad alternative data is refused up front with one line naming the file, the line and the
fix (``altdata.corpus.check_alt_data``; exit 2 from the CLIs), never a crash part-way or a
silently skipped file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DAILY_DIR, SHARED_DATA

from altdata.corpus import DATASETS, AltDataFileError, check_alt_data
from swarm.cli_args import resolve_alt_data
from swarm.errors import UserInputError

pytestmark = pytest.mark.unit

SURPRISES = DATASETS["surprises"].source
HEADER = "report_date,ticker,fiscal_qtr,eps_consensus_est,eps_reported,surprise,release_time\n"


def _folder(tmp_path: Path, surprises: str) -> Path:
    root = tmp_path / "alt"
    (root / "analyst").mkdir(parents=True)
    (root / "options").mkdir()
    (root / SURPRISES).write_text(surprises)
    return root


def test_a_date_that_does_not_parse_names_the_file_and_the_line(tmp_path):
    rows = "2012-10-25,AAPL,12-Sep,1.26,1.24,-0.02,post\n2013-13-45,AAPL,12-Dec,1.9,2.0,0.1,post\n"
    root = _folder(tmp_path, HEADER + rows)
    with pytest.raises(
        AltDataFileError,
        match=r"earnings_surprises_2012_2019.csv: line 3: "
        r"report_date '2013-13-45' is not a date; fix or delete that row",
    ):
        check_alt_data(root)


def test_a_missing_column_and_an_unreadable_file_are_named(tmp_path):
    root = _folder(tmp_path, "ticker,eps\nAAPL,1.0\n")
    with pytest.raises(
        AltDataFileError, match=r"earnings_surprises_2012_2019.csv: no 'report_date'"
    ):
        check_alt_data(root)
    (root / SURPRISES).write_bytes(b'report_date,ticker\n"unterminated,AAPL\n')
    with pytest.raises(AltDataFileError, match=r"earnings_surprises_2012_2019.csv: not a readable"):
        check_alt_data(root)


def test_an_empty_date_is_named_too(tmp_path):
    rows = "2012-10-25,AAPL,12-Sep,1.26,1.24,-0.02,post\n,AAPL,12-Dec,1.9,2.0,0.1,post\n"
    with pytest.raises(AltDataFileError, match=r"line 3: report_date is empty; fix or delete"):
        check_alt_data(_folder(tmp_path, HEADER + rows))


@pytest.mark.parametrize(
    ("ticker", "said"),
    [
        (" AAPL", "' AAPL' is not a symbol"),
        ("$AAPL", "'$AAPL' is not"),
        ("aapl", "'aapl' is not"),
        ("", "is empty"),
    ],
)
def test_a_ticker_no_price_file_could_have_is_named_not_skipped(tmp_path, ticker, said):
    # Its rows would match no symbol: the file would be read and that ticker silently unused.
    rows = (
        f"2012-10-25,AAPL,12-Sep,1.26,1.24,-0.02,post\n2013-01-23,{ticker},12-Dec,1.9,2,0.1,post\n"
    )
    with pytest.raises(AltDataFileError, match=rf"line 3: ticker {re.escape(said)}.*fix or delete"):
        check_alt_data(_folder(tmp_path, HEADER + rows))


def test_the_corpus_itself_reads_clean():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    assert len(check_alt_data(SHARED_DATA)) == len(DATASETS)


def test_the_cli_check_says_whether_the_folder_was_given_or_found(tmp_path):
    root = _folder(tmp_path, HEADER + "soon,AAPL,12-Sep,1.26,1.24,-0.02,post\n")
    with pytest.raises(
        UserInputError, match=r"^--alt-data \(given\): .*line 2: report_date 'soon'"
    ):
        resolve_alt_data(root, None)
    daily = root / "ohlcv" / "daily"
    daily.mkdir(parents=True)
    with pytest.raises(UserInputError, match=r"found above --data-dir; --alt-data off reads none"):
        resolve_alt_data(None, daily)
    assert resolve_alt_data("off", daily) == (None, False)


@pytest.mark.integration
@pytest.mark.parametrize("command", ["swarm.research", "swarm.analyze", "swarm.develop"])
def test_each_cli_exits_2_with_one_line_and_no_run_folder(tmp_path, command):
    if not DAILY_DIR.is_dir():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    root = _folder(tmp_path, HEADER + "2013-13-45,AAPL,12-Dec,1.9,2.0,0.1,post\n")
    common = ["--data-dir", str(DAILY_DIR), "--alt-data", str(root), "--out", str(tmp_path / "o")]
    args = {
        "swarm.research": ["--tickers", "AAPL", "--offline", "--no-memory"],
        "swarm.analyze": ["--ticker", "AAPL", "--date", "2015-06-01", "--memory-dir", "off"],
        "swarm.develop": ["--directive", "momentum", "--tickers", "AAPL", "--offline"],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", command, *args, *common], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 2: report_date '2013-13-45' is not a date" in lines[0]
    assert not (tmp_path / "o").exists()
