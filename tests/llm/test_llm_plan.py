"""With --llm, the model reads the directive into the typed plan; the rules check it against
the data and stand in when it fails. The chat model is faked at its boundary only."""

from __future__ import annotations

import pytest
from llm_fakes import factory_for, scripted, tool_call

from swarm.llm.client import LLMClient
from swarm.llm.settings import LLMSettings
from swarm.plan import build_plan

pytestmark = pytest.mark.unit

SETTINGS = LLMSettings(
    provider="openai-compatible",
    quick_model="fake",
    deep_model="fake",
    base_url="http://127.0.0.1:1/v1",
    structured="function_calling",
)
DAY = "date,open,high,low,close,volume\n2020-01-02,1,2,0.5,1.5,100\n"


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "daily"
    folder.mkdir()
    for s in ("AAPL", "MSFT", "NVDA", "GOOGL", "AMZN", "AMD", "INTC", "SPY", "QQQ"):
        (folder / f"{s}.csv").write_text(DAY)
    return folder


def _plan(tmp_path, data, directive, *answers):
    model, seen = scripted(*answers)
    client = LLMClient(SETTINGS, cache_dir=tmp_path / "cache", model_factory=factory_for(model))
    plan = build_plan(
        directive,
        data_dir=data,
        source="csv",
        offline=True,
        llm=client,
        cache_dir=tmp_path / "no-cache",
    )
    return plan, seen


def _answer(**over):
    args = {
        "styles": ["cross_sectional_momentum"],
        "universe_terms": ["semis"],
        "tickers": [],
        "timeframe": "1d",
        "scope": ["portfolio"],
        "benchmark": None,
    } | over
    return tool_call("LLMPlan", args)


def test_the_model_reads_the_directive_into_the_plan(tmp_path, data):
    plan, seen = _plan(tmp_path, data, "rank the chipmakers by their winners", _answer())
    assert plan.read_by == "llm"
    assert plan.preferred_families == ["cross_sectional_momentum"]
    assert plan.styles == ["cross_sectional_momentum"]
    assert plan.tickers == ["NVDA", "AMD", "INTC"]  # the semis the folder holds
    assert "rank the chipmakers" in str(seen[0][-1].content)


def test_an_answer_outside_the_vocabulary_is_retried_then_the_rules_stand(tmp_path, data):
    bad = _answer(styles=["astrology"])
    plan, seen = _plan(tmp_path, data, "momentum alpha in tech", bad, bad)
    assert len(seen) == 2 and plan.read_by == "rules"
    assert plan.preferred_families == ["momentum"]
    assert plan.tickers == ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]


def test_a_universe_the_data_lacks_sets_the_models_reading_aside(tmp_path, data):
    plan, _ = _plan(tmp_path, data, "momentum alpha in tech", _answer(universe_terms=["crypto"]))
    assert plan.read_by == "rules" and plan.tickers[0] == "AAPL"
    assert any("set aside" in n for n in plan.notes)


def test_a_masked_plan_sees_aliases_and_maps_the_answer_back(
    tmp_path, data, shared_data, monkeypatch
):
    from swarm.plan import llm_client_for_plan

    model, seen = scripted(_answer(tickers=["ASSET-A"], universe_terms=[]))
    monkeypatch.setattr("swarm.llm.client.default_model_factory", factory_for(model))
    settings = SETTINGS.model_copy(update={"mask": "on", "cache_dir": tmp_path / "cache"})
    client = llm_client_for_plan(
        settings,
        start="2017-01-01",
        end="2018-06-30",
        tickers=["NVDA"],
        data_dir=shared_data / "ohlcv" / "daily",
    )
    directive = "momentum on NVDA in 2017 among the semiconductors"
    plan = build_plan(
        directive,
        data_dir=data,
        source="csv",
        offline=True,
        llm=client,
        cache_dir=tmp_path / "no-cache",
    )
    prompt = str(seen[0][-1].content)
    assert prompt.endswith("Directive: momentum on ASSET-A in [year] among the [sector]")
    assert plan.read_by == "llm" and plan.explicit_tickers == ["NVDA"]


def test_the_plans_own_cache_folder_goes_with_its_client(tmp_path, monkeypatch):
    import gc
    import tempfile

    from swarm.plan import llm_client_for_plan

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model, _ = scripted(_answer())
    monkeypatch.setattr("swarm.llm.client.default_model_factory", factory_for(model))
    client = llm_client_for_plan(SETTINGS.model_copy(update={"cache_dir": None}))
    made = list(tmp_path.glob("swarm-plan-*"))
    assert len(made) == 1 and made[0].is_dir()
    del client
    gc.collect()
    assert not made[0].exists()  # not one folder left in the temp dir per planned run
