"""The graph state holds models: they survive the checkpoint, and Send payloads are typed."""

from __future__ import annotations

import enum
import typing

import pytest
from pydantic import BaseModel

from backtest.contracts import JobStatus
from backtest.lookahead import LookaheadReport
from experiments.records import Series
from gate.contracts import FailureAnalysis, FailureType, Hint, LoopCounters, Route
from strategies.families import default_spec
from strategies.spec import Family, PortfolioFamily, StrategySpec, StrategyVariant
from swarm.nodes.backtest import PORTFOLIO, fan_out_backtests
from swarm.nodes.research import fan_out_subagents
from swarm.research.subagents import SUBAGENTS
from swarm.state import (
    CHECKPOINT_TYPES,
    BacktestTask,
    BestSoFar,
    Evaluation,
    StoredResult,
    StoredVariant,
    SubagentTask,
)

pytestmark = pytest.mark.unit


PORTFOLIO_SPEC = StrategySpec(
    family=PortfolioFamily.ROTATION,
    name="rotation",
    approach="a",
    entry="rotation",
    scope="portfolio",
)


def _variant(variant_id: str = "v1", spec: StrategySpec | None = None) -> StrategyVariant:
    return StrategyVariant(
        variant_id=variant_id,
        iteration=2,
        route=Route.TUNE,
        spec=spec or default_spec(Family.MOMENTUM),
        code="x = 1",
        code_sha256="c",
    )


def _state_values() -> dict:
    variant = _variant()
    best = BestSoFar(
        variant_id="v1",
        family="trend",
        trial_key="k",
        metrics=None,
        score=0.4,
        portfolio=Series(dates=["2020-01-02"], values=[0.01]),
    )
    return {
        "route": Route.TUNE,
        "counters": LoopCounters(iteration=2, strategy_iterations=2),
        "evaluations": [Evaluation(variant_id="v1", family="trend", trial_key="k", metrics=None)],
        "best": best,
        "failure": FailureAnalysis(
            failure_type=FailureType.DESIGN_FLAW,
            root_cause="r",
            confidence=0.5,
            hints=[Hint.MARKET_EXPOSURE],
        ),
        "results": [
            StoredResult(
                job_id="j",
                variant_id="v1",
                symbol="A",
                fold=0,
                status=JobStatus.OK,
                result_file="backtests/v1/A-f0.json",
            )
        ],
        "variants": [variant, _variant("v2", PORTFOLIO_SPEC)],
        "all_variants": {
            "v1": StoredVariant(
                **{k: v for k, v in variant if k != "code"},
                code_file="strategies/v1.py",
                class_name="Momentum",
            )
        },
        "lookahead": {"v1": LookaheadReport(biased=False, n_cuts=20, mismatches=["m"])},
    }


def test_models_come_back_from_the_checkpoint_as_models(caplog, checkpoint_round_trip) -> None:
    values = checkpoint_round_trip(_state_values())
    assert values["counters"] == LoopCounters(iteration=2, strategy_iterations=2)
    assert isinstance(values["best"], BestSoFar) and values["best"].portfolio.values == [0.01]
    assert values["failure"].hints == [Hint.MARKET_EXPOSURE]
    assert values["results"][0].result_file == "backtests/v1/A-f0.json"
    assert values["route"] == Route.TUNE
    assert values["variants"] == [_variant(), _variant("v2", PORTFOLIO_SPEC)]
    assert values["variants"][1].spec.family is PortfolioFamily.ROTATION
    entry = values["all_variants"]["v1"]
    assert isinstance(entry, StoredVariant) and entry.class_name == "Momentum"
    assert entry.spec.trial_key() == default_spec(Family.MOMENTUM).trial_key()
    assert values["lookahead"]["v1"] == LookaheadReport(biased=False, n_cuts=20, mismatches=["m"])
    assert "unregistered type" not in caplog.text  # every state type is on the allowlist
    assert "Blocked deserialization" not in caplog.text
    assert {k: values[k] for k in _state_values()} == _state_values()  # no dict came back


def test_every_enum_inside_the_state_types_is_on_the_allowlist() -> None:
    # A model is stored as its model_dump(): its nested enums are stored as themselves, and one
    # not on the allowlist is blocked on restore (a warning, and its raw value).
    found: set[type] = set()

    def walk(tp: object) -> None:
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            found.add(tp)
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            for f in tp.model_fields.values():
                walk(f.annotation)
        else:
            for arg in typing.get_args(tp):
                walk(arg)

    for t in CHECKPOINT_TYPES:
        walk(t)
    assert found and found <= set(CHECKPOINT_TYPES)


def test_send_payloads_are_typed() -> None:
    state = {
        "iteration": 3,
        "symbols": ["A", "B"],
        "n_folds": 2,
        "variants": [_variant(), _variant("v2", PORTFOLIO_SPEC)],
    }
    sends = fan_out_backtests(state)
    assert len(sends) == 6 and all(isinstance(s.arg, BacktestTask) for s in sends)
    assert sends[3].arg == BacktestTask(
        iteration=3, variant_id="v1", code_sha256="c", symbol="B", fold=1
    )
    # A portfolio variant runs once per fold, on the whole universe.
    assert [s.arg.symbol for s in sends[4:]] == [PORTFOLIO, PORTFOLIO]
    subs = fan_out_subagents({"research_round": 2, "iteration": 4})
    assert len(subs) == len(SUBAGENTS)
    assert subs[0].arg == SubagentTask(subagent_id=SUBAGENTS[0].id, research_round=2, iteration=4)
