"""``python -m strategies.render SPEC.json --out FILE.py`` writes the spec's Backtrader code."""

from __future__ import annotations

import json

import pytest

from strategies.codegen import render
from strategies.families import spec_from_template
from strategies.render import main
from strategies.spec import Family, PipelineFamily


@pytest.mark.unit
def test_writes_codegens_code_from_a_spec_or_a_variants_entry(tmp_path) -> None:
    spec = spec_from_template(Family.VOLATILITY, 0, long_short=True)
    for payload in (spec.model_dump(mode="json"), {"spec": spec.model_dump(mode="json")}):
        src, out = tmp_path / "spec.json", tmp_path / "strategy.py"
        src.write_text(json.dumps(payload))
        assert main([str(src), "--out", str(out), "--bars-per-year", "365"]) == 0
        assert out.read_text() == render(spec, bars_per_year=365)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("payload", "argument"),
    [
        ("{oops", "SPEC"),
        (json.dumps({"name": "no family"}), "SPEC"),
        (
            spec_from_template(Family.TREND, 0)
            .model_copy(update={"family": PipelineFamily.DECISION_PIPELINE})
            .model_dump_json(),
            "SPEC",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, payload: str, argument: str) -> None:
    src = tmp_path / "spec.json"
    src.write_text(payload)
    with pytest.raises(SystemExit) as exc:
        main([str(src), "--out", str(tmp_path / "x.py")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"strategies.render: {argument}:") and err.count("\n") == 1
