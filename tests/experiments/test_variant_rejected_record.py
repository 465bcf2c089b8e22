"""The strategy node's ``variant_rejected`` line, now written through ``append_record``, is the
line the node used to write by hand (same fields, same content id)."""

from __future__ import annotations

import json

import pytest

from experiments.records import VariantRejectedRecord, append_record
from experiments.tracker import ExperimentTracker

pytestmark = pytest.mark.unit


def test_typed_variant_rejected_line_equals_the_old_literal(tmp_path) -> None:
    common = {
        "run_id": "r1",
        "iteration": 2,
        "route": "TUNE",
        "variant_id": "i02-v01-momentum-abc",
        "parent_id": "i01-v03-momentum-def",
        "code_sha256": "0" * 64,
        "errors": ["uses close[1]: lookahead"],
        "symbols": ["AAPL", "MSFT"],
        "recorded_at": "2026-01-01T00:00:00+00:00",
    }
    old = ExperimentTracker(tmp_path / "old.jsonl")
    old.append(
        {
            "kind": "variant_rejected",
            **common,
            "metrics": None,
            "gate_score": None,
            "status": "rejected",
        }
    )
    new = ExperimentTracker(tmp_path / "new.jsonl")
    assert append_record(new, VariantRejectedRecord(**common))
    a = json.loads((tmp_path / "old.jsonl").read_text())
    b = json.loads((tmp_path / "new.jsonl").read_text())
    assert a["record_id"] == b["record_id"]
    assert {k: v for k, v in a.items()} == {k: v for k, v in b.items() if k in a}
    assert set(b) - set(a) <= {"record_id"}
