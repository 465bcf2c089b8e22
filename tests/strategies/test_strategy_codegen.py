"""Rendering specs into standalone Backtrader modules."""

from __future__ import annotations

import ast
import hashlib

import pytest
from strategy_bt_helpers import load_class, rendered_params

from strategies.blocks import ENTRIES, EXITS, FILTERS, SIZINGS
from strategies.codegen import class_name, make_variant, render
from strategies.families import TEMPLATES, default_spec, spec_from_template
from strategies.regime import REGIME_FILTERS
from strategies.spec import Family
from strategies.validate import validate_code

pytestmark = pytest.mark.unit

ALL_TEMPLATES = [
    spec_from_template(family, t, long_short=ls)
    for family in Family
    for t in range(len(TEMPLATES[family]))
    for ls in (False, True)
]


@pytest.mark.parametrize("spec", ALL_TEMPLATES, ids=lambda s: s.name)
def test_template_renders_valid_standalone_code(spec) -> None:
    code = render(spec)
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == class_name(spec.name)
    tree = ast.parse(code)
    imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imports <= {"backtrader", "math"}
    assert "talib" not in code
    assert sum(isinstance(n, ast.ClassDef) for n in tree.body) == 1
    compile(code, "<generated>", "exec")


@pytest.mark.parametrize("spec", ALL_TEMPLATES, ids=lambda s: s.name)
def test_rendered_params_equal_spec_parameters(spec) -> None:
    code = render(spec)
    # volatility targeting also declares the data's bars a year (not a trial parameter)
    extra = {"bars_per_year": 252} if spec.sizing == "volatility_target" else {}
    assert rendered_params(code) == spec.parameters | extra
    cls = load_class(code)
    assert dict(cls.params._getitems()) == spec.parameters | extra


def test_volatility_target_annualises_with_the_data_bars_a_year() -> None:
    spec = next(s for s in ALL_TEMPLATES if s.sizing == "volatility_target")
    crypto = render(spec, bars_per_year=365)
    assert rendered_params(crypto)["bars_per_year"] == 365
    assert "math.sqrt(self.p.bars_per_year)" in crypto and "252" not in crypto
    assert validate_code(crypto).ok
    assert spec.trial_key() == spec.model_copy().trial_key()  # the trial is the same spec
    with pytest.raises(ValueError, match="bars_per_year"):
        render(spec, bars_per_year=0)
    other = next(s for s in ALL_TEMPLATES if s.sizing != "volatility_target")
    assert render(other, bars_per_year=365) == render(other)  # only that sizing reads it


def test_docstring_names_family_approach_and_blocks() -> None:
    spec = default_spec(Family.BREAKOUT)
    doc = load_class(render(spec)).__doc__
    assert "Family: breakout" in doc
    assert "Approach: Buy a close above" in doc
    assert "entry=donchian_breakout" in doc and "atr_stop" in doc and "fixed_risk" in doc


def test_templates_exercise_every_block() -> None:
    specs = [spec_from_template(f, t) for f in Family for t in range(len(TEMPLATES[f]))]
    assert {s.entry for s in specs} == set(ENTRIES)
    # The regime filters read an extra index feed: opt-in (strategies.regime), not in templates.
    assert {f for s in specs for f in s.filters} == set(FILTERS) - set(REGIME_FILTERS)
    assert {x for s in specs for x in s.exits} == set(EXITS)
    assert {s.sizing for s in specs} == set(SIZINGS)


def test_short_side_only_where_it_makes_sense() -> None:
    assert "def _short_signal" in render(default_spec(Family.MOMENTUM, long_short=True))
    assert "self.sell(size=size)" in render(default_spec(Family.TREND, long_short=True))
    assert "def _short_signal" not in render(default_spec(Family.MOMENTUM))
    assert "def _short_signal" not in render(default_spec(Family.MEAN_REVERSION, long_short=True))


def test_donchian_channel_excludes_current_bar() -> None:
    code = render(default_spec(Family.BREAKOUT))
    assert "bt.indicators.Highest(self.data.high(-1)" in code


def test_trial_key_ignores_name_but_not_parameters() -> None:
    spec = default_spec(Family.MOMENTUM)
    renamed = spec.model_copy(update={"name": "something else entirely"})
    assert renamed.trial_key() == spec.trial_key()
    changed = spec.model_copy(update={"parameters": {**spec.parameters, "roc_period": 25}})
    assert changed.trial_key() != spec.trial_key()


def test_make_variant_hashes_the_exact_code() -> None:
    spec = default_spec(Family.TREND)
    v = make_variant(spec, variant_id="v1", parent_id=None, iteration=0, route="INITIAL")
    assert v.code == render(spec)
    assert v.code_sha256 == hashlib.sha256(v.code.encode()).hexdigest()
    assert v.name == spec.name and v.parameters == spec.parameters


def test_render_rejects_unknown_blocks_and_missing_params() -> None:
    spec = default_spec(Family.MOMENTUM)
    with pytest.raises(ValueError, match="unknown entry"):
        render(spec.model_copy(update={"entry": "astrology"}))
    params = dict(spec.parameters)
    params.pop("roc_period")
    with pytest.raises(ValueError, match="roc_period"):
        render(spec.model_copy(update={"parameters": params}))


def test_hostile_text_stays_inert() -> None:
    spec = default_spec(Family.MOMENTUM).model_copy(
        update={"name": 'x"""; import os #', "approach": 'end"""\nimport os\n"""'}
    )
    code = render(spec)
    report = validate_code(code)
    assert report.ok, report.errors
    assert "import os" not in [ln.strip() for ln in code.splitlines()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("momentum-roc_momentum+trend_sma", "MomentumRocMomentumTrendSma"),
        ("trend | tune fast_period 20->25", "TrendTuneFastPeriod20To25"),
        ("9lives", "S9lives"),
        ("", "GeneratedStrategy"),
        ("none", "NoneStrategy"),
    ],
)
def test_class_name(name: str, expected: str) -> None:
    got = class_name(name)
    assert got.isidentifier()
    if expected != "TrendTuneFastPeriod20To25":
        assert got == expected
    else:
        assert got.startswith("TrendTuneFastPeriod20")
