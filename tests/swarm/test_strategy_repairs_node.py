"""The strategy node starts TUNE and REFINE with the analysed best's repairs along its failing
criteria, and keeps the iteration's variant count (``swarm.nodes.strategy.strategy_dev``).

The node runs in-process on a stub context: no data is read (the pair search is stubbed), no
LLM, no screen; the variants' code is rendered and validated as in a run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import swarm.nodes.strategy as strategy_node
from experiments.tracker import ExperimentTracker
from gate.contracts import FailingCriterion, FailureAnalysis, FailureType, Hint, VariantEvaluation
from strategies.param_space import DEFAULT_SPACE
from strategies.portfolio import portfolio_spec
from strategies.regime import INDEX_REGIME, REGIME_INDICES
from strategies.route import Route
from swarm.memo import RunMemo
from swarm.state import StoredVariant

pytestmark = pytest.mark.unit

BEST_ID = "i01-v01-cross_sectional_momentum-abcdef"
BEST = portfolio_spec("cross_sectional_momentum")
VARIANTS = 5


def _ctx(root: Path, *, indices: tuple[str, ...], variants: int = VARIANTS):
    written: dict[str, str] = {}

    def write_text(rel: str, text: str) -> Path:
        written[rel] = text
        return root / rel

    return SimpleNamespace(
        config=SimpleNamespace(
            seed=7,
            variants=variants,
            families=["cross_sectional_momentum"],
            preferred_families=["cross_sectional_momentum"],
            screen_size=0,
            sizing=None,
            limits=SimpleNamespace(max_iterations=10),
            param_space=DEFAULT_SPACE,
            sampler="random",
        ),
        symbols=["AAA", "BBB", "CCC", "DDD"],
        llm=None,
        news_items=[],
        memo=RunMemo(),
        data={s: object() for s in indices},
        periods_per_year=252,
        folds=[0, 1],
        criteria=SimpleNamespace(min_trades=30),
        run=SimpleNamespace(
            root=root, write_text=write_text, tracker=ExperimentTracker(root / "experiments.jsonl")
        ),
        progress=SimpleNamespace(start_batch=lambda n: None, stage=lambda kind, text: None),
        written=written,
    )


def _state(route: str, failure: FailureAnalysis) -> dict:
    stored = StoredVariant(
        variant_id=BEST_ID,
        iteration=1,
        route=Route.INITIAL,
        spec=BEST,
        code_sha256="0" * 64,
        code_file=f"strategies/{BEST_ID}.py",
        class_name="Strategy",
    )
    ev = VariantEvaluation(
        variant_id=BEST_ID,
        family=BEST.family.value,
        trial_key=BEST.trial_key(),
        metrics=None,
        score=0.55,
    )
    return {
        "iteration": 2,
        "route": route,
        "all_variants": {BEST_ID: stored},
        "best": ev,
        "evaluations": [ev],
        "failure": failure,
    }


def _drawdown_only() -> FailureAnalysis:
    # The README case: alpha t 3.16, SPA p 0.003, only the drawdown (28.9% vs 20%) fails.
    return FailureAnalysis(
        failure_type=FailureType.PARAMETER_ISSUE,
        root_cause="near miss",
        confidence=0.7,
        hints=[Hint.DRAWDOWN],
        best_variant_id=BEST_ID,
        failing=[
            FailingCriterion(
                label="max_drawdown_pct<=20",
                metric="max_drawdown_pct",
                op="<=",
                threshold=20,
                value=28.9,
                attainment=0.555,
                category=Hint.DRAWDOWN,
            )
        ],
    )


@pytest.fixture(autouse=True)
def _no_pair_search(monkeypatch):
    monkeypatch.setattr("swarm.families.portfolio.universe_pair", lambda run: None)


@pytest.mark.parametrize("route", ["TUNE", "REFINE"])
def test_the_readme_near_miss_starts_with_its_drawdown_repairs(tmp_path, route) -> None:
    ctx = _ctx(tmp_path, indices=REGIME_INDICES)  # SPY and QQQ: the index filter is on offer
    out = strategy_node.strategy_dev(_state(route, _drawdown_only()), SimpleNamespace(context=ctx))
    variants = out["variants"]
    assert len(variants) == VARIANTS
    names = [v.spec.name.split(" | ", 1)[1] for v in variants]
    assert names[:3] == [
        "repair drawdown: vol_target on",
        f"repair drawdown: +{INDEX_REGIME}",
        "repair drawdown: vol_target on, target_vol 0.15->0.1",
    ]
    assert all(v.parent_id == BEST_ID for v in variants[:3])
    assert not any(n.startswith("repair") for n in names[3:])  # the usual moves fill the rest
    assert len({v.spec.trial_key() for v in variants} | {BEST.trial_key()}) == VARIANTS + 1


def test_without_the_index_data_no_regime_filter_is_proposed(tmp_path) -> None:
    ctx = _ctx(tmp_path, indices=())
    out = strategy_node.strategy_dev(_state("TUNE", _drawdown_only()), SimpleNamespace(context=ctx))
    variants = out["variants"]
    assert len(variants) == VARIANTS
    assert [v.spec.name.split(" | ", 1)[1] for v in variants[:2]] == [
        "repair drawdown: vol_target on",
        "repair drawdown: vol_target on, target_vol 0.15->0.1",
    ]
    assert all(not v.spec.filters for v in variants)


def test_no_failing_criteria_leave_the_proposals_as_they_were(tmp_path) -> None:
    ctx = _ctx(tmp_path, indices=())
    failure = _drawdown_only().model_copy(update={"failing": []})
    out = strategy_node.strategy_dev(_state("TUNE", failure), SimpleNamespace(context=ctx))
    assert len(out["variants"]) == VARIANTS
    assert not any(" | repair " in v.spec.name for v in out["variants"])


def test_a_single_slot_goes_to_the_first_repair(tmp_path) -> None:
    ctx = _ctx(tmp_path, indices=(), variants=1)
    out = strategy_node.strategy_dev(_state("TUNE", _drawdown_only()), SimpleNamespace(context=ctx))
    (only,) = out["variants"]
    assert only.spec.name.endswith("| repair drawdown: vol_target on")
