"""The user's parameter space (``--param-space``, ``strategies.param_space``): each problem in
a file is one error naming the file, family and parameter; tuning and the screen's
neighbourhood stay inside the space; and without one they draw exactly what they drew before.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from strategies.families import spec_from_template
from strategies.family_api import FamilyRegistry
from strategies.mutate import neighbourhood, search_box, toward_more_trades, tune
from strategies.param_space import (
    DEFAULT_SPACE,
    ParamSpace,
    ParamSpaceError,
    load_param_space,
    parse_param_space,
)
from strategies.spec import Family
from swarm.families import registry

pytestmark = pytest.mark.unit

GRID = registry().grid_parameters()  # each family plugin names its tunable parameters
SPACE = {
    "momentum": {
        "roc_period": {"low": 30, "high": 60, "step": 10},
        "stop_loss_pct": {"low": 0.05, "high": 0.1, "kind": "float"},
    }
}


def _space() -> ParamSpace:
    return parse_param_space(SPACE, source="s.toml", grid=GRID)


def test_a_good_space_reads_and_round_trips_through_the_manifest():
    space = _space()
    r = space.range_for("momentum", "roc_period")
    assert r is not None and (r.low, r.high, r.step, r.kind) == (30, 60, 10, "int")
    assert space.range_for("momentum", "stop_loss_pct").step == 0.005  # the code's step
    assert space.range_for("trend", "roc_period").low == 5  # another family: the code's
    dumped = json.loads(json.dumps(space.model_dump(mode="json")))
    assert ParamSpace.model_validate(dumped) == space


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"momentom": {"roc_period": {"low": 10, "high": 20}}}, "unknown family 'momentom'"),
        ({"momentum": {"rsi_period": {"low": 5, "high": 9}}}, "[momentum.rsi_period]: not a"),
        ({"momentum": {"position_fraction": {"low": 0.2, "high": 0.5}}}, "not a tunable"),
        ({"momentum": {"roc_period": {"low": 60, "high": 30}}}, "low 60 > high 30"),
        ({"momentum": {"roc_period": {"low": 5, "high": 500}}}, "outside what the code takes"),
        ({"momentum": {"roc_period": {"low": 10, "high": 60, "step": 7}}}, "multiple of"),
        ({"momentum": {"roc_period": {"low": 10, "high": 60, "step": 0}}}, "positive multiple"),
        ({"momentum": {"roc_period": {"low": 12, "high": 60}}}, "off the code's grid"),
        ({"momentum": {"roc_period": {"low": 10.5, "high": 60}}}, "whole number"),
        ({"momentum": {"roc_period": {"low": 10, "high": 60, "kind": "float"}}}, "kind 'float'"),
        ({"momentum": {"roc_period": {"high": 60}}}, "low is missing"),
        ({"momentum": {"roc_period": {"low": "ten", "high": 60}}}, "is not a number"),
        ({"momentum": {"roc_period": {"low": 10, "high": 60, "stpe": 5}}}, "unknown key(s) stpe"),
        ({"momentum": {"roc_period": 10}}, "expected a table"),
        ({"momentum": 3}, "one table per parameter"),
        ({}, "one table per family"),
        (
            {
                "trend": {
                    "fast_period": {"low": 40, "high": 60},
                    "slow_period": {"low": 20, "high": 40},
                }
            },
            "fast_period must stay below slow_period",
        ),
    ],
)
def test_each_problem_is_one_error_naming_file_family_and_parameter(data, needle):
    with pytest.raises(ParamSpaceError) as info:
        parse_param_space(data, source="bad.toml", grid=GRID)
    msg = str(info.value)
    assert msg.startswith("bad.toml: ") and needle in msg and "\n" not in msg


def test_files_are_toml_or_json_by_suffix(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("[momentum.roc_period]\nlow = 30\nhigh = 60\nstep = 10\n")
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"momentum": {"roc_period": {"low": 30, "high": 60, "step": 10}}}))
    assert load_param_space(toml, GRID).ranges == load_param_space(js, GRID).ranges
    for name, text, needle in [
        ("s.yaml", "x", "use a .toml or .json file"),
        ("b.toml", "[momentum.roc_period\n", "not valid TOML"),
        ("b.json", "{", "not valid JSON"),
    ]:
        (tmp_path / name).write_text(text)
        with pytest.raises(ParamSpaceError, match=needle):
            load_param_space(tmp_path / name, GRID)
    with pytest.raises(ParamSpaceError, match="cannot be read"):
        load_param_space(tmp_path / "missing.toml", GRID)


def _inside(space: ParamSpace, spec) -> bool:
    own = space.ranges[spec.family.value]
    return all(own[n].low <= spec.parameters[n] <= own[n].high for n in own) and space.contains(
        spec
    )


def test_tuning_and_the_neighbourhood_stay_inside_the_space():
    space = _space()
    parent = spec_from_template(Family.MOMENTUM, 0)  # roc_period 20: outside 30..60
    assert not space.contains(parent)
    sets = neighbourhood(parent, 40, seed=(1, 1, 1), seen=set(), space=space)
    tuned = tune(parent, 10, rng=random.Random(1), seen=set(), space=space)
    nearer = toward_more_trades(parent, 4, rng=random.Random(1), seen=set(), space=space)
    assert len(sets) == 40 and len(tuned) == 10 and nearer
    for s in [*sets, *tuned, *nearer]:
        assert _inside(space, s), s.parameters
        assert s.parameters["roc_period"] in (30, 40, 50, 60)
    base, box = search_box(parent, space=space)
    assert base.parameters["roc_period"] == 30  # snapped into the space
    assert (box["roc_period"].low, box["roc_period"].high) == (30, 60)


def _digest() -> str:
    out = []
    for fam in Family:
        for t in (0, 1):
            parent = spec_from_template(fam, t)
            for s in [
                *neighbourhood(parent, 50, seed=(3, 1, 1), seen=set()),
                *tune(parent, 8, rng=random.Random(5), seen=set()),
                *toward_more_trades(parent, 4, rng=random.Random(5), seen=set()),
            ]:
                out.append((s.name, s.trial_key()))
    return hashlib.sha256(json.dumps(out).encode()).hexdigest()


def test_without_a_space_the_moves_are_exactly_those_before_it():
    # The digest of the sets the code drew before --param-space (commit ed1f8e6), per family.
    assert DEFAULT_SPACE.ranges == {}
    assert _digest() == "47de8e3f8a256e3da9ddf9293299fc1389d0ba0a73b00e9a2809703fec4a4c12"


class _GridToy:
    """A family that names its own tunable grid parameters (the plugin's optional method)."""

    name, kinds, scope, self_proposing, repairable = "toy", ("toy_family",), "symbol", True, False

    def grid_parameters(self, kind: str) -> frozenset[str]:
        return frozenset({"roc_period"})


class _NoGrid:
    name, kinds, scope, self_proposing, repairable = "nogrid", ("no_grid",), "symbol", True, False


@pytest.mark.unit
def test_each_family_plugin_names_what_a_space_may_narrow():
    reg = FamilyRegistry()
    reg.register(_GridToy())
    reg.register(_NoGrid())
    grid = reg.grid_parameters()
    assert grid == {"toy_family": frozenset({"roc_period"})}  # a plugin without one: none
    space = parse_param_space(
        {"toy_family": {"roc_period": {"low": 10, "high": 40}}}, source="t.toml", grid=grid
    )
    assert space.range_for("toy_family", "roc_period").high == 40
    with pytest.raises(ParamSpaceError, match="unknown family 'momentum'; use one of toy_family"):
        parse_param_space(
            {"momentum": {"roc_period": {"low": 10, "high": 40}}}, source="t", grid=grid
        )
    # the lab's own plugins: every block, portfolio and decision family that has a grid
    assert {"momentum", "cross_sectional_momentum", "decision_pipeline"} <= set(GRID)
