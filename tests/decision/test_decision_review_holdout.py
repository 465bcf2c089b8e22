"""The decision family inside a run: the search reads no bar past the in-sample end, the
holdout's decisions are made for the winner only (and give the code an up-front build
would), each in-sample decision is reviewed once and stored once, and the rules brain never
spends a trial on debate rounds."""

from __future__ import annotations

import json
import random
import re
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import read_real_bars

import swarm.analyze.replay as replay_module
import swarm.analyze.review_batch as review_batch
from backtest.engine import run_code_on_bars
from backtest.splits import TimeSplit
from experiments.runfolder import holdout_code_file
from strategies.decision_family import (
    RULES_INERT_PARAMS,
    decision_spec,
    render_decision_strategy,
)
from strategies.family_api import ProposalContext
from strategies.validate import validate_code
from swarm.analyze.contracts import Action, Status
from swarm.analyze.family import (
    holdout_variant,
    pipeline_code,
    with_holdout_code,
)
from swarm.analyze.pipeline import decide
from swarm.analyze.replay import DecisionReplayer, core_config
from swarm.analyze.review import recall_reviews
from swarm.analyze.review_batch import TAG_FIELD, DecisionReviewer
from swarm.families import registry
from swarm.memo import RunMemo

CAPITAL = 100_000.0
INSAMPLE_END = date(2017, 6, 30)
SPLIT = TimeSplit(
    insample_start=date(2015, 1, 2),
    insample_end=INSAMPLE_END,
    holdout_start=date(2017, 7, 3),
    holdout_end=date(2017, 12, 29),
)
FOLDS = [
    SimpleNamespace(start=date(2016, 7, 1), end=date(2016, 12, 31)),
    SimpleNamespace(start=date(2017, 1, 1), end=INSAMPLE_END),
]
HOLDOUT = SimpleNamespace(start=date(2017, 7, 1), end=date(2017, 12, 29))


@pytest.fixture(scope="module")
def aapl() -> pd.DataFrame:
    return read_real_bars("AAPL", "2015-01-01", "2017-12-31")


class _Run:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.json: dict = {}

    def path(self, rel: str) -> Path:
        return self.root / rel

    def write_text(self, rel: str, text: str) -> None:
        self.path(rel).parent.mkdir(parents=True, exist_ok=True)
        self.path(rel).write_text(text, encoding="utf-8")

    def write_json(self, rel: str, obj) -> None:
        self.json[rel] = obj


def _ctx(tmp: Path, bars: pd.DataFrame, *, memory_dir: str = "off", cache: Path | None = None):
    lines: list[str] = []
    return SimpleNamespace(
        memo=RunMemo(),
        folds=FOLDS,
        holdout_fold=HOLDOUT,
        split=SPLIT,
        data={"AAPL": SimpleNamespace(bars=bars)},
        symbols=["AAPL"],
        llm=None,
        news_items=[],
        config=SimpleNamespace(
            costs=SimpleNamespace(cash=CAPITAL),
            memory_dir=memory_dir,
            decision_cache_dir=cache or tmp / "decisions",
        ),
        progress=SimpleNamespace(stage=lambda name, msg: lines.append(f"[{name}] {msg}")),
        run=_Run(tmp),
        lines=lines,
    )


# --------------------------------------------------------------------------- the sealed holdout


@pytest.mark.integration
def test_the_search_reads_no_bar_after_the_insample_end(aapl, tmp_path, monkeypatch):
    seen: list[pd.Timestamp] = []
    real_decide, real_review = replay_module.decide, DecisionReviewer.review

    def spy_decide(ticker, day, bars, *args, **kwargs):
        seen.append(bars.index.max())
        return real_decide(ticker, day, bars, *args, **kwargs)

    def spy_review(self, decisions, bars):
        seen.extend(frame.index.max() for frame in bars.values())
        return real_review(self, decisions, bars)

    monkeypatch.setattr(replay_module, "decide", spy_decide)
    monkeypatch.setattr(DecisionReviewer, "review", spy_review)
    ctx = _ctx(tmp_path, aapl)
    code = pipeline_code(ctx, decision_spec())
    assert code is not None and validate_code(code).ok
    assert len(seen) > 20 and max(seen) <= pd.Timestamp(INSAMPLE_END)
    # Poisoning every bar after the in-sample end changes nothing the search builds.
    poisoned = aapl.copy()
    poisoned.loc[poisoned.index > pd.Timestamp(INSAMPLE_END), ["open", "high", "low", "close"]] *= 3
    assert pipeline_code(_ctx(tmp_path / "p", poisoned), decision_spec()) == code
    # No decision of the holdout is in the search's code.
    days = [int(d) for d in re.findall(r"^ +(\d{8}): \(", code, flags=re.M)]
    assert days and max(days) <= 20170630


@pytest.mark.integration
def test_the_winner_gets_its_holdout_decisions_at_the_holdout_same_code_as_up_front(aapl, tmp_path):
    spec = decision_spec({"conviction_floor": 0.15})
    ctx = _ctx(tmp_path, aapl)
    insample_code = pipeline_code(ctx, spec)
    calls_after_search = ctx.memo.decision_replayer.stats.pipeline_calls
    variant = {
        "variant_id": "i01-v01-x",
        "spec": spec.model_dump(mode="json"),
        "code": insample_code,
        "code_sha256": "trial",
    }
    held = holdout_variant(ctx, variant)
    # What the search would have built had it decided on every window up front.
    up_front = DecisionReplayer(cache=None).table(
        spec,
        {"AAPL": aapl},
        [(f.start, f.end) for f in FOLDS] + [(HOLDOUT.start, HOLDOUT.end)],
        capital=CAPITAL,
    )
    assert held["code"] == render_decision_strategy(spec, up_front, capital=CAPITAL)
    assert held["code_sha256"] != "trial" and variant["code"] == insample_code  # trial untouched
    stats = ctx.memo.decision_replayer.stats
    holdout_weeks = 26
    assert stats.pipeline_calls - calls_after_search == holdout_weeks  # only the new dates
    assert stats.variants[-1]["window"].startswith("folds + holdout")
    assert ctx.run.path(holdout_code_file("i01-v01-x")).read_text() == held["code"]
    assert with_holdout_code(ctx, variant)["code"] == held["code"]  # what the export ships
    # The same code gives the same holdout result; the search's code would trade nothing there.
    bars = aapl.loc[: pd.Timestamp(HOLDOUT.end)]

    def holdout_run(code):
        return run_code_on_bars(code, bars, start=HOLDOUT.start, symbol="AAPL")

    first, again = holdout_run(held["code"]), holdout_run(held["code"])
    assert first.status.value == "ok" and first.metrics.n_trades > 0
    assert first.metrics == again.metrics
    assert holdout_run(insample_code).metrics.n_trades == 0
    # A variant of another family is run as it is.
    other = {"variant_id": "v", "spec": variant["spec"] | {"family": "momentum"}}
    assert holdout_variant(ctx, other) is other


# --------------------------------------------------------------------------- reviews


@pytest.mark.integration
def test_in_sample_decisions_are_reviewed_once_and_stored_once(aapl, tmp_path):
    memory = str(tmp_path / "memory")
    cache = tmp_path / "decisions"
    ctx = _ctx(tmp_path / "run1", aapl, memory_dir=memory, cache=cache)
    pipeline_code(ctx, decision_spec())
    r1 = ctx.memo.decision_reviewer.stats.model_copy()
    assert r1.memory == "on" and r1.reviewed > 20
    assert sum(getattr(r1, f) for f in TAG_FIELD.values()) == r1.reviewed
    assert r1.stored == r1.reviewed and r1.already_in_memory == 0
    # Every review ends inside the in-sample bars.
    mem = ctx.memo.memory
    assert mem.count() == r1.stored
    # A second variant shares the dates: nothing reviewed twice, nothing written twice.
    pipeline_code(ctx, decision_spec({"horizon_bars": 5, "conviction_floor": 0.4}))
    r2 = ctx.memo.decision_reviewer.stats
    assert r2.stored == r2.reviewed and mem.count() == r2.stored
    assert r2.reviewed - r1.reviewed <= r1.horizon_not_over  # only the dates that had not ended
    written = ctx.run.json["decision_pipeline.json"]
    assert written["reviews"]["reviewed"] == r2.reviewed
    assert written["variants"][0]["reviews"]["reviewed"] == r1.reviewed
    assert "reviews so far" in ctx.lines[-1] and "Realized" in ctx.lines[-1]
    # A rerun on the same memory: the same reviews, none written again.
    rerun = _ctx(tmp_path / "run2", aapl, memory_dir=memory, cache=cache)
    pipeline_code(rerun, decision_spec())
    r3 = rerun.memo.decision_reviewer.stats
    assert r3.reviewed == r1.reviewed and r3.stored == 0
    assert r3.already_in_memory == r1.reviewed and rerun.memo.memory.count() == r2.stored
    assert [getattr(r3, f) for f in TAG_FIELD.values()] == [
        getattr(r1, f) for f in TAG_FIELD.values()
    ]
    # A later analysis of the symbol recalls the newest reviews that ended before its date.
    recalled = recall_reviews(rerun.memo.memory, "AAPL", "2017-07-03")
    assert len(recalled) == 3 and recalled[0].date >= "2017-05-01"
    assert all(r.date <= "2017-06-30" for r in recalled)


@pytest.mark.integration
def test_with_memory_off_the_reviews_are_counted_and_nothing_is_stored(aapl, tmp_path):
    ctx = _ctx(tmp_path, aapl, memory_dir="off")
    assert pipeline_code(ctx, decision_spec()) is not None
    r = ctx.memo.decision_reviewer.stats
    assert r.memory.startswith("off") and r.reviewed > 20 and r.stored == 0
    assert ctx.run.json["decision_pipeline.json"]["reviews"]["stored"] == 0


class _Memory:
    """Enough of ResearchMemory for the reviewer: remembers lessons in a dict."""

    available, reason = True, None

    def __init__(self) -> None:
        self.lessons: dict[str, tuple[str, str]] = {}

    def count(self) -> int:
        return len(self.lessons)

    def recall(self, symbols, kinds=(), k=5, min_relevance=0.3):
        return [SimpleNamespace(run_id=run_id) for run_id, _ in self.lessons.values()]

    def remember_lesson(self, run_id, iteration, text, metadata=None, **kw):
        self.lessons[f"{run_id}:{hash(text)}"] = (run_id, text)
        return 1


@pytest.mark.unit
def test_the_llm_writes_few_critiques_and_none_once_the_budget_is_spent(aapl, monkeypatch):
    asked: list[str] = []

    def fake_critique(llm, decision, review, *, log):
        asked.append(decision.date)
        return review.model_copy(update={"model_used": "fake"})

    monkeypatch.setattr(review_batch, "critique_with_llm", fake_critique)
    core = core_config(dict(decision_spec().parameters))
    days = [d for d in aapl.index if pd.Timestamp("2017-01-01") <= d <= pd.Timestamp("2017-03-31")]
    decisions = {"AAPL": {d: decide("AAPL", d, aapl, core) for d in days[::5]}}
    llm = SimpleNamespace(exhausted=False)
    reviewer = DecisionReviewer(memory=_Memory(), llm=llm, llm_max=3)
    reviewer.review(decisions, {"AAPL": aapl.loc[: pd.Timestamp(INSAMPLE_END)]})
    assert len(asked) == 3 == reviewer.stats.llm_critiques
    assert reviewer.stats.stored == sum(
        d.status != Status.DEGRADED for d in decisions["AAPL"].values()
    )
    llm.exhausted = True
    spent = DecisionReviewer(memory=_Memory(), llm=llm)
    spent.review(decisions, {"AAPL": aapl.loc[: pd.Timestamp(INSAMPLE_END)]})
    assert len(asked) == 3 and spent.stats.stored == reviewer.stats.stored


# --------------------------------------------------------------------------- debate rounds


@pytest.mark.integration
def test_debate_rounds_can_move_a_rules_decision(aapl):
    base = dict(decision_spec().parameters)
    # AAPL 2017-07-14: the rebuttal lifts the bull's conviction over the floor: HOLD -> BUY.
    one = decide("AAPL", "2017-07-14", aapl, core_config(base | {"debate_rounds": 1}))
    two = decide("AAPL", "2017-07-14", aapl, core_config(base | {"debate_rounds": 2}))
    assert one.action == Action.HOLD and two.action == Action.BUY
    assert one.debate.conviction < 0.2 <= two.debate.conviction
    assert any(t.rebutted for r in two.debate.rounds for t in (r.bull, r.bear))
    # AAPL 2017-04-13: a close call tips from the bear to the bull.
    one = decide("AAPL", "2017-04-13", aapl, core_config(base | {"debate_rounds": 1}))
    two = decide("AAPL", "2017-04-13", aapl, core_config(base | {"debate_rounds": 2}))
    assert (one.debate.winner.value, two.debate.winner.value) == ("bear", "bull")


@pytest.mark.unit
def test_with_the_rules_brain_proposals_move_debate_rounds_too():
    assert RULES_INERT_PARAMS == ()
    pctx = ProposalContext(
        route="INITIAL",
        rng=random.Random(0),
        seen=set(),
        families=["decision_pipeline"],
        n_symbols=1,
    )
    props = registry().for_kind("decision_pipeline").propose(pctx, 7)  # no run: the rules brain
    assert decision_spec().parameters["debate_rounds"] == 2  # an opening and a rebuttal
    assert any(p.spec.parameters["debate_rounds"] == 1 for p in props)


@pytest.mark.unit
def test_the_stats_file_is_json(tmp_path, aapl):
    ctx = _ctx(tmp_path, aapl)
    pipeline_code(ctx, decision_spec())
    json.dumps(ctx.run.json["decision_pipeline.json"])
