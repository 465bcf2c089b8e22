"""Issue 29 on the decision pipeline: a masked run's prompts carry no real ticker, company
name or year; leaking answers fall back to the rules and are counted; an unmasked run before
the cutoff carries the banner; the rules brain is untouched by --mask."""

from __future__ import annotations

import csv
import json
import re

import mask_scan as scan
import pandas as pd
import pytest
from conftest import DAILY_DIR, SHARED_DATA
from decision_fakes import DecisionChat
from mask_scan import prompt_leaks

from swarm.analyze.contracts import AnalysisConfig
from swarm.analyze.nodes import Brain
from swarm.analyze.pipeline import decide
from swarm.analyze.report import render_report
from swarm.llm.client import LLMClient
from swarm.llm.cutoff import UNMASKED_BANNER
from swarm.llm.mask import core_names, known_entities
from swarm.llm.settings import LLMSettings
from swarm.research.news import load_news_csv

pytestmark = pytest.mark.unit
CFG = AnalysisConfig()
DAY = "2019-06-03"
NEWS = SHARED_DATA / "news" / "benzinga_headlines_nvda_tsla_goog_amzn_2011_2020.csv"
GICS = SHARED_DATA / "fundamentals" / "sp500_securities_gics.csv"


def _settings(**over) -> LLMSettings:
    return LLMSettings(
        provider="openai-compatible",
        quick_model="fake-quick",
        deep_model="fake-deep",
        base_url="http://127.0.0.1:1/v1",
        structured="function_calling",
        **over,
    )


@pytest.fixture(scope="module")
def nvda() -> pd.DataFrame:
    if not (DAILY_DIR / "NVDA.csv").exists() or not GICS.exists():
        pytest.skip("real corpus not found")
    df = pd.read_csv(DAILY_DIR / "NVDA.csv", parse_dates=["date"]).set_index("date")
    return df[["open", "high", "low", "close", "volume"]].astype("float64").loc[:DAY]


def _brain(tmp_path, mode="good", **over):
    chat = DecisionChat(messages=iter([]), mode=mode)
    chat.calls = []
    client = LLMClient(
        _settings(**over), cache_dir=tmp_path / "cache", model_factory=lambda s, m: chat
    )
    return Brain(llm=client, known=known_entities(DAILY_DIR)), chat


def corpus_tickers() -> set[str]:
    """The corpus's tickers: its OHLCV file names (README: one file per symbol)."""
    stems = {p.stem for p in (SHARED_DATA / "ohlcv").rglob("*.csv")}
    return {s.split("_")[0] for s in stems} | {s.split("-")[0] for s in stems}


def gics_names() -> tuple[set[str], set[str]]:
    """(legal names, the names they go by) from the GICS table."""
    with open(GICS, newline="", encoding="utf-8") as fh:
        legal = {r["security"] for r in csv.DictReader(fh)}
    return legal, {n for s in legal for n in core_names(s)[1:] if len(n) >= 3}


def test_no_masked_prompt_names_a_ticker_company_or_year(tmp_path, nvda):
    news = [n for n in load_news_csv(NEWS) if n.ticker == "NVDA"] if NEWS.exists() else []
    assert not news or any(str(n.date) < DAY for n in news)
    b, chat = _brain(tmp_path)
    d = decide("NVDA", DAY, nvda, CFG, b, news=[n for n in news if str(n.date) <= DAY])
    prompts = [p for _, p in chat.calls]
    assert len(prompts) >= 9 and d.masking["masked"] is True
    if news:
        assert any("UNTRUSTED_DATA" in p for p in prompts)  # headlines reached the prompts
    legal, cores = gics_names()
    tickers = corpus_tickers()
    for p in prompts:
        words = set(re.findall(r"[A-Za-z0-9.\-]+", p))
        assert not (tickers & words), sorted(tickers & words)
        low = p.lower()
        assert not [n for n in legal if n.lower() in low]
        assert not [
            n for n in cores if re.search(rf"(?<![A-Za-z0-9]){re.escape(n)}(?![A-Za-z0-9])", p)
        ]
        assert not re.search(r"(?<![\d.,])(19|20)\d\d(?![\d]|\.\d|,\d)", p)
        # No price level: the close of the day (133.78) never appears.
        assert "133.78" not in p
    # The whole corpus's tickers and the GICS sector and industry names too.
    assert not prompt_leaks(chat.calls, (scan.corpus_tickers(), *scan.gics_terms()))
    # The answers were mapped back: the decision is about NVDA at real prices.
    assert d.ticker == "NVDA" and abs(d.trader.entry - 133.78) < 0.01
    assert d.masking["leaks"]["leaked"] == 0 and d.masking["leaks"]["audited"] >= 9


def test_answers_naming_the_real_ticker_are_caught_and_fall_back(tmp_path, nvda):
    one = CFG.model_copy(update={"debate_rounds": 1})  # a failed rebuttal restates, unlike rules
    rules = decide("NVDA", DAY, nvda, one)
    b, _ = _brain(tmp_path, "name_real")
    d = decide("NVDA", DAY, nvda, one, b)
    strip = {"brain", "llm_events", "masking"}
    assert d.model_dump(exclude=strip) == rules.model_dump(exclude=strip)
    leaks = d.masking["leaks"]
    assert leaks["leaked"] == leaks["audited"] > 0 and leaks["by_kind"] == {
        "ticker": leaks["leaked"]
    }
    assert leaks["contaminated"] is True
    report = render_report(d)
    assert "CONTAMINATED" in report and "leak audit" in report
    assert b.llm.leak_stats()["leaked"] == leaks["leaked"]
    assert all(c.leaks == ["ticker"] for c in b.llm.calls)


def test_unmasked_before_the_cutoff_carries_the_banner(tmp_path, nvda):
    b, chat = _brain(tmp_path, mask="off")
    d = decide("NVDA", DAY, nvda, CFG, b)
    assert d.masking["masked"] is False and d.masking["banner"] == UNMASKED_BANNER
    assert any("NVDA" in p for _, p in chat.calls)
    report = render_report(d)
    assert UNMASKED_BANNER in report and "NOT masked" in report


def test_rules_brain_decisions_carry_no_masking(nvda):
    d = decide("NVDA", DAY, nvda, CFG, Brain())
    assert d.masking is None and "Masking" not in render_report(d)


def test_llm_none_runs_are_byte_identical_with_and_without_mask(tmp_path, daily_dir):
    from swarm.analyze.__main__ import main

    outs = []
    for flag in (["--mask"], [], ["--no-mask"]):
        out = tmp_path / (flag[0].strip("-") if flag else "default")
        argv = [
            "--ticker",
            "NVDA",
            "--date",
            DAY,
            "--data-dir",
            str(daily_dir),
            "--out",
            str(out),
            "--memory-dir",
            "off",
            "--quiet",
            *flag,
        ]
        assert main(argv) == 0
        (root,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
        outs.append(
            {n: (root / n).read_bytes() for n in ("decision.json", "report.md", "features.json")}
        )
        assert not (root / "llm_calls.jsonl").exists()
    assert outs[0] == outs[1] == outs[2]


def test_a_lone_review_asks_its_critique_masked(tmp_path, daily_dir, monkeypatch):
    """``swarm.analyze --review`` with a model: the critique's prompt is masked as the
    decision's were (the alias, offsets, rebased entry and exit)."""
    import swarm.llm.client as client_mod
    from swarm.analyze.__main__ import main

    out = tmp_path / "out"
    assert (
        main(
            [
                "--ticker",
                "NVDA",
                "--date",
                DAY,
                "--data-dir",
                str(daily_dir),
                "--out",
                str(out),
                "--memory-dir",
                "off",
                "--quiet",
            ]
        )
        == 0
    )
    (root,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    chat = DecisionChat(messages=iter([]), mode="good")
    chat.calls = []
    monkeypatch.setattr(client_mod, "default_model_factory", lambda settings, model: chat)
    argv = [
        "--review",
        str(root),
        "--data-dir",
        str(daily_dir),
        "--memory-dir",
        "off",
        "--quiet",
        "--llm",
        "openai-compatible:fake",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--llm-structured",
        "function_calling",
        "--llm-cache",
        str(tmp_path / "llm-cache"),
        "--mask",
    ]
    assert main(argv) == 0
    assert [t for t, _ in chat.calls] == ["LLMCritique"]
    prompt = chat.calls[0][1]
    assert "ASSET-A D+0" in prompt and "133.78" not in prompt
    assert not prompt_leaks(chat.calls, (scan.corpus_tickers(), *scan.gics_terms()))
    review = json.loads((root / "review.json").read_text())
    assert review["model_used"] == "fake" and review["lessons"] == ["respect the stop"]
