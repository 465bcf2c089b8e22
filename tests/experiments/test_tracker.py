import json

import pytest

from experiments.tracker import (
    VOLATILE_FIELDS,
    ExperimentTracker,
    read_records,
    record_id,
    strip_volatile,
)

pytestmark = pytest.mark.unit


def _without_ids(records):
    return [{k: v for k, v in r.items() if k != "record_id"} for r in records]


def test_append_writes_one_parseable_line_per_record(tmp_path):
    t = ExperimentTracker(tmp_path / "e.jsonl")
    assert t.append({"a": 1}) and t.append({"b": [1.5, None]})
    lines = (tmp_path / "e.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert _without_ids(records) == [{"a": 1}, {"b": [1.5, None]}]
    assert all(len(r["record_id"]) == 64 for r in records)


def test_torn_tail_is_cut_on_open_and_appends_start_fresh(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n{"c": 3, "d": [1, 2')  # crash mid-write
    t = ExperimentTracker(path)
    assert t.repaired_bytes == len('{"c": 3, "d": [1, 2')
    t.append({"e": 5})
    assert _without_ids(read_records(path)) == [{"a": 1}, {"b": 2}, {"e": 5}]


def test_invalid_last_line_with_newline_is_cut(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"a": 1}\n{"b": \n')
    ExperimentTracker(path)
    assert list(read_records(path)) == [{"a": 1}]


def test_non_finite_numbers_are_written_as_null_so_every_line_is_strict_json(tmp_path):
    t = ExperimentTracker(tmp_path / "e.jsonl")
    t.append({"x": float("nan"), "y": [float("inf"), 1.0], "z": {"w": float("-inf")}})
    line = (tmp_path / "e.jsonl").read_text()
    assert _without_ids([json.loads(line)]) == [{"x": None, "y": [None, 1.0], "z": {"w": None}}]
    assert "NaN" not in line and "Infinity" not in line


def _rec(kind="backtest", iteration=1, variant="i01-v01", symbol="AAPL", **extra):
    return {"kind": kind, "iteration": iteration, "variant_id": variant, "symbol": symbol} | extra


def test_record_id_is_deterministic_content_not_timestamps():
    a = _rec(recorded_at="2025-01-01T00:00:00", run_id="run-a", metrics={"sharpe": 1.0})
    b = _rec(recorded_at="2026-06-30T12:00:00", run_id="run-b", metrics={"sharpe": 1.0})
    assert record_id(a) == record_id(b)
    assert record_id(a) != record_id(_rec(symbol="MSFT"))
    assert record_id(a) != record_id(_rec(iteration=2))
    assert record_id(a) != record_id(_rec(kind="holdout"))
    assert record_id(a) != record_id(_rec(variant="i01-v02"))
    # Records without naming fields are identified by their content (timestamps aside).
    assert record_id({"x": 1, "recorded_at": "t1"}) == record_id({"x": 1, "recorded_at": "t2"})
    assert record_id({"x": 1}) != record_id({"x": 2})


def test_an_append_whose_record_is_already_in_the_file_is_skipped(tmp_path):
    path = tmp_path / "e.jsonl"
    t = ExperimentTracker(path)
    assert t.append(_rec(recorded_at="t1"))
    assert not t.append(_rec(recorded_at="t2"))  # a replayed step: same record, later time
    assert t.append(_rec(symbol="MSFT"))
    assert t.skipped == 1
    records = list(read_records(path))
    assert [r["symbol"] for r in records] == ["AAPL", "MSFT"]
    assert records[0]["recorded_at"] == "t1"  # the first write wins


def test_ids_are_loaded_on_open_so_a_resumed_run_does_not_duplicate(tmp_path):
    path = tmp_path / "e.jsonl"
    first = ExperimentTracker(path)
    for i in (1, 2, 3):
        first.append(_rec(iteration=i))
    again = ExperimentTracker(path)  # a new process after a crash
    assert record_id(_rec(iteration=2)) in again
    written = [again.append(_rec(iteration=i)) for i in (1, 2, 3, 4)]
    assert written == [False, False, False, True]
    assert [r["iteration"] for r in read_records(path)] == [1, 2, 3, 4]


def test_a_torn_record_is_cut_and_written_again_whole_on_replay(tmp_path):
    path = tmp_path / "e.jsonl"
    t = ExperimentTracker(path)
    t.append(_rec(iteration=1))
    whole = json.dumps(_rec(iteration=2) | {"record_id": record_id(_rec(iteration=2))})
    with open(path, "a") as fh:
        fh.write(whole[: len(whole) // 2])  # killed mid-write of record 2
    again = ExperimentTracker(path)
    assert again.repaired_bytes == len(whole) // 2
    assert record_id(_rec(iteration=2)) not in again  # a torn record does not count as written
    assert again.append(_rec(iteration=2)) and not again.append(_rec(iteration=1))
    records = list(read_records(path))
    assert [r["iteration"] for r in records] == [1, 2]
    assert len({r["record_id"] for r in records}) == len(records)


def test_strip_volatile_drops_timestamps_and_run_ids_at_any_depth():
    rec = _rec(recorded_at="t", run_id="r", decision={"run_id": "r", "x": [{"recorded_at": 1}]})
    (clean,) = strip_volatile([rec])
    assert clean == _rec(decision={"x": [{}]})
    assert set(VOLATILE_FIELDS) == {"recorded_at", "run_id", "llm_replay"}
