"""The rules desk run in process (``swarm.analyze.graph.run_in_process``) decides exactly as the
LangGraph graph does: the same nodes in the graph's order, the same state merges. The family's
replay uses it (thousands of dates); an LLM desk always runs the graph."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import SHARED_DATA, corpus_bars

from altdata.corpus import DATASETS, AltData
from swarm.analyze import graph as analyze_graph
from swarm.analyze import pipeline
from swarm.analyze.contracts import AnalysisConfig, AnalystRole, OutcomeTag, Recalled
from swarm.analyze.nodes import RULES_ANALYSTS, Brain
from swarm.analyze.pipeline import decide
from swarm.analyze.replay import DecisionReplayer, core_config

pytestmark = pytest.mark.unit


def _days(bars: pd.DataFrame, start: str, end: str, step: int) -> list[pd.Timestamp]:
    inside = bars.loc[start:end].index
    return list(inside[::step])


def _both(ticker: str, day, bars, cfg, **kw) -> tuple[dict, dict]:
    graph = decide(ticker, day, bars, cfg, **kw)
    direct = decide(ticker, day, bars, cfg, in_process=True, **kw)
    return graph.model_dump(mode="json"), direct.model_dump(mode="json")


@pytest.mark.parametrize("ticker", ["AAPL", "NVDA"])
@pytest.mark.parametrize(("rounds", "floor"), [(1, 0.0), (2, 0.2), (3, 0.35)])
def test_in_process_decisions_equal_the_graphs(ticker: str, rounds: int, floor: float) -> None:
    bars = corpus_bars(ticker)
    cfg = core_config({"debate_rounds": rounds, "conviction_floor": floor})
    actions = set()
    for day in _days(bars, "2013-01-01", "2019-12-31", 97):
        graph, direct = _both(ticker, day, bars, cfg)
        assert direct == graph, f"{ticker} {day.date()}"
        actions.add(graph["action"])
    assert len(actions) >= 2  # the dates cover more than one kind of decision


def test_in_process_equals_the_graph_with_memory_and_alt_data() -> None:
    if not (SHARED_DATA / DATASETS["statements"].source).is_file():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    bars, alt = corpus_bars("AAPL"), AltData(SHARED_DATA)
    memory = [
        Recalled(
            id=f"id-{tag.value}",
            date="2015-03-02",
            tag=tag,
            text=f"[{tag.value}] AAPL decision of 2015-03-02 (BUY, long): lessons",
        )
        for tag in (OutcomeTag.FALSIFIED, OutcomeTag.REALIZED)
    ]
    for day in _days(bars, "2015-04-01", "2016-12-31", 61):
        graph, direct = _both("AAPL", day, bars, AnalysisConfig(), recalled=memory, alt=alt)
        assert direct == graph, str(day.date())
        assert any(not n["abstained"] for n in graph["analysts"] if n["role"] == "fundamentals")


def test_in_process_equals_the_graph_when_analysts_crash_and_the_quorum_fails() -> None:
    def crash(*_a, **_k):
        raise RuntimeError("feed down")

    bars = corpus_bars("MSFT")
    for broken in ({AnalystRole.NEWS}, set(AnalystRole) - {AnalystRole.MARKET}):
        analysts = {r: (crash if r in broken else b) for r, b in RULES_ANALYSTS.items()}
        graph, direct = _both("MSFT", "2017-05-01", bars, AnalysisConfig(), analysts=analysts)
        assert direct == graph
        assert len([e for e in graph["llm_events"] if e["kind"] == "analyst_failed"]) == len(broken)


def test_the_replay_runs_in_process_and_an_llm_desk_keeps_the_graph(monkeypatch) -> None:
    calls: list[str] = []
    real = analyze_graph.run_in_process
    monkeypatch.setattr(
        analyze_graph, "run_in_process", lambda inputs: calls.append("direct") or real(inputs)
    )
    bars = corpus_bars("AAPL").loc[:"2016-12-31"]
    replayer = DecisionReplayer(cache=None)
    cfg = core_config({"debate_rounds": 2, "conviction_floor": 0.2})
    day = bars.index[-1]
    assert replayer.core_decision("AAPL", bars, day, cfg, "sha") is not None
    assert calls == ["direct"]

    # With an LLM brain the graph runs (its analysts ask the model concurrently).
    sentinel = object()

    class Graph:
        def invoke(self, _state, context=None):
            calls.append("graph")
            return {"decision": sentinel}

    calls.clear()
    monkeypatch.setattr(analyze_graph, "build_analyze_graph", Graph)
    monkeypatch.setattr(pipeline, "_masked_brain", lambda brain, *_a: (brain, None))
    assert decide("AAPL", day, bars, cfg, Brain(llm=object()), in_process=True) is sentinel
    assert calls == ["graph"]
