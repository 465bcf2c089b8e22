"""The family registry (``strategies.family_api``) and the built-in plugins (``swarm.families``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from strategies.families import known_families
from strategies.family_api import PORTFOLIO_LABEL, FamilyPlugin, FamilyRegistry
from strategies.repair import block_moves, portfolio_moves
from strategies.spec import Family, PluginFamily, PortfolioFamily, StrategySpec
from swarm.families import registered, registry

pytestmark = pytest.mark.unit

BUILT_IN_PLUGINS = ("decision_pipeline", "portfolio", "blocks")


class Stub:
    scope = "symbol"
    repairable = False

    def __init__(self, name, kinds, *, own=True, priority=None):
        self.name, self.kinds, self.self_proposing = name, tuple(kinds), own
        if priority is not None:
            self.priority = priority

    def slots(self, families, n, n_symbols):
        return 0

    def propose(self, ctx, n):
        return []

    def reconcile(self, spec):
        return spec

    def code(self, run, spec):
        return None

    def holdout_variant(self, run, variant):
        return variant

    def screens(self, spec):
        return False


def _spec(family: str, **kw) -> StrategySpec:
    return StrategySpec(family=family, name="x", approach="a", entry="e", **kw)


def test_the_built_ins_in_proposal_order_and_every_family_has_one_plugin():
    reg = registry()
    # The built-ins in their order, the catch-all last; a family module discovered in
    # swarm/families/ (earnings_drift) sits between them by its priority.
    names = [p.name for p in reg]
    assert [n for n in names if n in BUILT_IN_PLUGINS] == list(BUILT_IN_PLUGINS)
    assert names[-1] == "blocks"
    assert set(known_families()) <= set(reg.known())
    assert len(reg.known()) == len(set(reg.known()))
    assert all(isinstance(p, FamilyPlugin) for p in reg)
    assert reg.for_spec(_spec("momentum")).name == "blocks"
    assert reg.for_spec(_spec("rotation", scope="portfolio")).name == "portfolio"
    assert reg.for_kind("decision_pipeline").name == "decision_pipeline"
    assert reg.catch_all().name == "blocks"


def test_job_symbols_and_rules_mutability_come_from_the_plugin():
    reg = registry()
    xs = _spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM.value, scope="portfolio")
    assert reg.job_symbols(xs, ["A", "B"]) == [PORTFOLIO_LABEL]
    assert reg.job_symbols(_spec("trend"), ["A", "B"]) == ["A", "B"]
    assert reg.rules_mutable(_spec("trend"))
    assert not reg.rules_mutable(_spec("trend", source_sha="ab" * 8))  # an LLM's own code
    assert not reg.rules_mutable(xs) and reg.repairable(xs)
    assert not reg.repairable(_spec("decision_pipeline"))
    # The repairs' moves are the plugin's: this module never asks a spec's kind.
    assert reg.repair_moves(xs) is portfolio_moves
    assert reg.repair_moves(_spec("trend")) is block_moves
    assert reg.repair_moves(_spec("decision_pipeline")) is None
    assert reg.repair_moves(_spec("trend", source_sha="ab" * 8)) is None


def test_a_repairable_plugin_without_moves_is_a_clear_error():
    reg = FamilyRegistry()
    reg.register(Stub("rest", ["toy_rest"], own=False))
    stub = reg.for_kind("toy_rest")
    stub.repairable = True
    with pytest.raises(TypeError, match="repair_moves"):
        reg.repair_moves(_spec("toy_rest"))


def test_registration_rules():
    reg = FamilyRegistry()
    a = reg.register(Stub("a", ["toy_a"], priority=50))
    reg.register(Stub("rest", ["toy_rest"], own=False))
    reg.register(Stub("b", ["toy_b"], priority=5))
    assert [p.name for p in reg] == ["b", "a", "rest"]  # priority, then the catch-all last
    assert reg.register(a) is a and len(list(reg)) == 3  # a second import is a no-op
    with pytest.raises(ValueError, match="toy_a already registered by 'a'"):
        reg.register(Stub("c", ["toy_a"]))
    with pytest.raises(ValueError, match="only one plugin may take the remaining slots"):
        reg.register(Stub("d", ["toy_d"], own=False))
    with pytest.raises(KeyError, match="no family plugin owns 'nope'"):
        reg.for_kind("nope")
    reg.unregister("a")
    assert [p.name for p in reg] == ["b", "rest"]


def test_a_plugin_family_is_a_valid_spec_family_that_round_trips():
    with pytest.raises(ValidationError):
        _spec("Toy Kind!")  # not a family name
    # A well-formed name validates without its plugin (a run folder reads back anywhere); the
    # registry is what refuses it, when it is used.
    assert _spec("toy_unit_kind").family.value == "toy_unit_kind"
    with pytest.raises(KeyError, match="no family plugin owns 'toy_unit_kind'"):
        registry().for_spec(_spec("toy_unit_kind"))
    with registered(Stub("toy_unit", ["toy_unit_kind"])):
        spec = _spec("toy_unit_kind")
        assert isinstance(spec.family, PluginFamily) and spec.family.value == "toy_unit_kind"
        back = StrategySpec.model_validate_json(spec.model_dump_json())
        assert back == spec and back.trial_key() == spec.trial_key()
        assert registry().for_spec(spec).name == "toy_unit"
    assert "toy_unit_kind" not in registry().known()
    # The built-in names keep their enums (and so their trial keys).
    assert isinstance(_spec("momentum").family, Family)
