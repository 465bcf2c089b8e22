"""A fourth family in one file: a plugin registered here, and nowhere else, is proposed,
backtested and gated by a develop run (issue 25: families as plugins).

The toy family buys when the close crosses above its N-bar mean and sells when it crosses
back. Everything family-specific lives in ``ToyFamily``: its slots, proposals, code and holdout
code; the strategy node, the backtest fan-out, the gate and the holdout ask the registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from strategies.family_api import FamilyPlugin, Proposal, ProposalContext, Scope
from strategies.spec import StrategySpec
from swarm.develop import build_parser, config_from_args
from swarm.errors import UserInputError
from swarm.families import registered, registry
from swarm.run import execute, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KIND = "toy_mean_cross"
CODE = """import backtrader as bt


class ToyMeanCross(bt.Strategy):
    params = (("period", {period}),)

    def __init__(self):
        self.mean = bt.indicators.SimpleMovingAverage(self.data.close, period=self.p.period)
        self.cross = bt.indicators.CrossOver(self.data.close, self.mean)

    def next(self):
        if not self.position and self.cross[0] > 0:
            self.order_target_percent(target=0.95)
        elif self.position and self.cross[0] < 0:
            self.order_target_percent(target=0.0)
"""


class ToyFamily:
    name = "toy"
    kinds = (KIND,)
    scope: Scope = "symbol"
    self_proposing = True
    repairable = False

    def __init__(self) -> None:
        self.proposed = 0
        self.coded: list[str] = []
        self.held: list[str] = []

    def slots(self, families: Any, n: int, n_symbols: int) -> int:
        return n if KIND in families else 0

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        out = []
        for period in (10, 20, 30, 40, 50, 60, 80, 100, 120, 150):
            spec = self.reconcile(
                StrategySpec(
                    family=KIND,
                    name=f"toy-{period}",
                    approach="close crosses its mean",
                    entry=KIND,
                    parameters={"period": period},
                )
            )
            if spec.trial_key() not in ctx.seen and len(out) < n:
                parent = ctx.own_best[0] if ctx.own_best else None
                out.append(Proposal(spec, parent, f"toy period {period}"))
        self.proposed += len(out)
        return out

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        return spec.model_copy(update={"sizing": "fixed_fraction", "filters": [], "exits": []})

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        self.coded.append(spec.name)
        return CODE.format(period=int(spec.parameters["period"]))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        self.held.append(variant["variant_id"])
        return variant

    def screens(self, spec: StrategySpec) -> bool:
        return False


def _argv(daily_dir: Path, out: Path, families: str) -> list[str]:
    return [
        "--directive",
        "trend following in tech",
        "--tickers",
        "AAPL,MSFT",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2013-01-01",
        "--end",
        "2018-12-31",
        "--variants",
        "3",
        "--folds",
        "2",
        "--max-iterations",
        "2",
        "--workers",
        "1",
        "--seed",
        "3",
        "--criteria",
        "sharpe>=0.1,min_trades>=2",
        "--criteria-replace",
        "--offline",
        "--memory-dir",
        "off",
        "--families",
        families,
        "--out",
        str(out),
    ]


def test_the_toy_satisfies_the_protocol_and_is_unknown_unregistered(daily_dir, tmp_path):
    assert isinstance(ToyFamily(), FamilyPlugin)
    assert KIND not in registry().known()
    with pytest.raises(UserInputError, match="--families"):
        config_from_args(build_parser().parse_args(_argv(daily_dir, tmp_path, KIND)))


def test_a_registered_toy_family_is_proposed_backtested_and_gated(daily_dir, tmp_path):
    toy = ToyFamily()
    with registered(toy):
        assert KIND in registry().known()
        argv = _argv(daily_dir, tmp_path, KIND)
        config, criteria = config_from_args(build_parser().parse_args(argv))
        prepared = prepare(config, criteria, argv=argv, quiet=True)
        execute(prepared)
        run = prepared.run.root
    assert KIND not in registry().known()  # unregistered when the block ends
    variants = json.loads((run / "variants.json").read_text())
    assert variants and all(v["spec"]["family"] == KIND for v in variants.values())
    assert toy.proposed == len(variants) == len(toy.coded)
    for v in variants.values():  # its own code, run on each symbol alone and gated
        assert "class ToyMeanCross" in (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert v["in_sample"]["metrics"]["n_trades"] > 0
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    backtests = [r for r in records if r["kind"] == "backtest"]
    assert {r["symbol"] for r in backtests} == {"AAPL", "MSFT"}
    assert any(r["kind"] == "gate" for r in records)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == len(variants)
    assert verdict["verdict"] in ("SUCCESS", "ABANDON") and verdict["best_variant"] in variants
    # The holdout asks the family for its code, for a winner only.
    assert toy.held == ([verdict["best_variant"]] if verdict["verdict"] == "SUCCESS" else [])
