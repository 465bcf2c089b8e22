"""Issue 29 item 3: calibrate the mask with a model that knows the answers.

The cheating server (``swarm.llm.cheat_server``) answers every desk role with the sign of the
ticker's real return over the next 10 trading days whenever the prompt gives away the ticker
and the day. Unmasked, the desk follows the future; masked, the cheat is blind, its attempts
to name the period are caught by the leak audit, and the rules brain decides."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import DAILY_DIR, corpus_bars

from swarm.analyze.contracts import AnalysisConfig
from swarm.analyze.nodes import Brain
from swarm.analyze.pipeline import decide
from swarm.llm.cheat_server import HORIZON, Oracle, answer, serve
from swarm.llm.client import LLMClient
from swarm.llm.mask import known_entities
from swarm.llm.settings import LLMSettings

CFG = AnalysisConfig()
DAYS = ("2019-06-03", "2018-10-01", "2016-02-29")
STRIP = {"brain", "llm_events", "masking"}


@pytest.fixture(scope="module")
def nvda() -> pd.DataFrame:
    return corpus_bars("NVDA")


@pytest.fixture(scope="module")
def cheat_url(nvda):
    with serve(DAILY_DIR) as url:
        yield url


def future_action(bars: pd.DataFrame, day: str) -> str:
    """What the corpus says happened next: the sign of the 10-trading-day close-to-close move."""
    i = bars.index.get_loc(pd.Timestamp(day))
    return "BUY" if bars["close"].iloc[i + HORIZON] > bars["close"].iloc[i] else "SELL"


def _brain(tmp_path, url: str, mask: str) -> Brain:
    settings = LLMSettings(
        provider="openai-compatible",
        quick_model="cheat",
        deep_model="cheat",
        base_url=url,
        structured="function_calling",
        mask=mask,
    )
    client = LLMClient(settings, cache_dir=tmp_path / f"cache-{mask}")
    return Brain(llm=client, known=known_entities(DAILY_DIR))


@pytest.mark.unit
def test_the_future_on_those_days(nvda):
    # +8.4 %, -18.7 %, +3.0 % over the next 10 trading days in the corpus.
    assert [future_action(nvda, d) for d in DAYS] == ["BUY", "SELL", "BUY"]
    oracle = Oracle(DAILY_DIR)
    prompt = 'Ticker: NVDA. Facts: {"entry": 133.779999}'  # a later role: the date only by price
    assert oracle.recognise(prompt) == ("NVDA", pd.Timestamp("2019-06-03"))
    assert oracle.recognise('Ticker: ASSET-A. Facts: {"entry": 100.0}') is None


@pytest.mark.unit
def test_blind_answers_name_a_ticker_or_hold_no_view():
    oracle = Oracle(DAILY_DIR)
    prompt = 'Ticker: ASSET-A. Date: D+0. Evidence: {"RSI_14": 55.0}'
    guess = answer("LLMNote", prompt, oracle, "guess")
    assert guess["ticker"] in oracle.tickers and guess["ticker"] in guess["summary"]
    neutral = answer("LLMNote", prompt, oracle, "neutral")
    assert neutral["ticker"] == "ASSET-A" and neutral["stance"] == 0.0


@pytest.mark.integration
def test_unmasked_the_desk_follows_the_future(tmp_path, nvda, cheat_url):
    brain = _brain(tmp_path, cheat_url, "off")
    got = {d: decide("NVDA", d, nvda, CFG, brain) for d in DAYS}
    assert {d: x.action.value for d, x in got.items()} == {d: future_action(nvda, d) for d in DAYS}
    assert all(x.masking["masked"] is False for x in got.values())
    assert not [e for x in got.values() for e in x.llm_events if e["kind"] == "llm_fallback"]
    # Not the rules in disguise: on 2019-06-03 the rules sell, on 2018-10-01 they buy.
    rules = {d: decide("NVDA", d, nvda, CFG).action.value for d in DAYS[:2]}
    assert rules == {"2019-06-03": "SELL", "2018-10-01": "BUY"}


@pytest.mark.integration
def test_masked_the_cheat_is_blind_caught_and_replaced_by_the_rules(tmp_path, nvda, cheat_url):
    brain = _brain(tmp_path, cheat_url, "on")
    # One round: a failed rebuttal falls back to the side's previous case, not to the rules
    # brain's own rebuttal, so only a single round makes the two desks comparable.
    one = AnalysisConfig(debate_rounds=1)
    for day in DAYS:
        d = decide("NVDA", day, nvda, one, brain)
        rules = decide("NVDA", day, nvda, one)
        assert d.model_dump(exclude=STRIP) == rules.model_dump(exclude=STRIP), day
        leaks = d.masking["leaks"]
        # Every answer (9 roles, each asked twice: the retry) named a ticker it was not shown.
        assert leaks["audited"] == leaks["leaked"] == 18
        assert leaks["by_kind"]["ticker"] == leaks["leaked"] and leaks["contaminated"]
    calls = brain.llm.calls
    assert calls and all("ticker" in (c.leaks or []) for c in calls)


def _develop(tmp_path, url: str, mask_flag: str) -> tuple[dict, list[dict]]:
    from swarm.develop import main

    out = tmp_path / mask_flag.strip("-")
    code = main(
        [
            "--directive",
            "agents decide on NVDA",
            "--families",
            "decision_pipeline",
            "--tickers",
            "NVDA",
            "--data-dir",
            str(DAILY_DIR),
            "--start",
            "2016-01-01",
            "--end",
            "2018-12-31",
            "--variants",
            "1",
            "--max-iterations",
            "1",
            "--workers",
            "1",
            "--offline",
            "--quiet",
            "--no-figures",  # the verdict is the same without charts
            "--memory-dir",
            "off",
            "--decision-cache",
            str(out / "decisions"),
            "--llm-cache",
            str(out / "llm-cache"),
            "--out",
            str(out / "runs"),
            "--llm",
            "openai-compatible:cheat",
            "--llm-base-url",
            url,
            "--llm-structured",
            "function_calling",
            mask_flag,
        ]
    )
    assert code == 0
    (run,) = (out / "runs").iterdir()
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    return json.loads((run / "verdict.json").read_text()), records


@pytest.mark.e2e
@pytest.mark.slow
def test_a_develop_run_shows_the_cheat_unmasked_and_not_masked(tmp_path, cheat_url, capsys):
    verdict, _ = _develop(tmp_path, cheat_url, "--no-mask")
    # Measured: alpha 17.0 % a year, HAC t 5.1 in-sample; holdout 19.8 %, t 3.9.
    assert verdict["verdict"] == "SUCCESS", verdict["reason"]
    assert verdict["best_alpha"]["t_stat"] > 3 and verdict["holdout_alpha"]["t_stat"] > 2
    assert verdict["llm_masking"]["masked"] is False

    verdict, records = _develop(tmp_path, cheat_url, "--mask")
    # The route says contaminated; the gate itself passed nothing either, and the alpha left
    # is the rules brain's (measured: -6.0 % a year, t -1.9).
    assert verdict["verdict"] != "SUCCESS" and verdict["reason"].startswith("contaminated")
    assert not [r for r in records if r["kind"] == "backtest" and r.get("gate_passed")]
    assert verdict["best_alpha"]["t_stat"] < 2
    leaks = verdict["llm_masking"]["leaks"]
    assert leaks["leaked"] == leaks["audited"] > 0
