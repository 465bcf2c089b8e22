import json

import pytest

from experiments.tracker import ExperimentTracker, read_records

pytestmark = pytest.mark.unit


def test_append_writes_one_parseable_line_per_record(tmp_path):
    t = ExperimentTracker(tmp_path / "e.jsonl")
    t.append({"a": 1})
    t.append({"b": [1.5, None]})
    lines = (tmp_path / "e.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"a": 1}, {"b": [1.5, None]}]


def test_torn_tail_is_cut_on_open_and_appends_start_fresh(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n{"c": 3, "d": [1, 2')  # crash mid-write
    t = ExperimentTracker(path)
    assert t.repaired_bytes == len('{"c": 3, "d": [1, 2')
    t.append({"e": 5})
    assert list(read_records(path)) == [{"a": 1}, {"b": 2}, {"e": 5}]


def test_invalid_last_line_with_newline_is_cut(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"a": 1}\n{"b": \n')
    ExperimentTracker(path)
    assert list(read_records(path)) == [{"a": 1}]


def test_non_finite_numbers_are_written_as_null_so_every_line_is_strict_json(tmp_path):
    t = ExperimentTracker(tmp_path / "e.jsonl")
    t.append({"x": float("nan"), "y": [float("inf"), 1.0], "z": {"w": float("-inf")}})
    line = (tmp_path / "e.jsonl").read_text()
    assert json.loads(line) == {"x": None, "y": [None, 1.0], "z": {"w": None}}
    assert "NaN" not in line and "Infinity" not in line
