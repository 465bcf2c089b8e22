"""Issue 29's "done when": no masked prompt of a develop run names a real ticker, company,
GICS sector or industry, or year. Every prompt of every role (the directive's plan, research,
strategy proposals, the failure analysis, the decision desk, the review critique) is read as
the chat model receives it."""

from __future__ import annotations

import pytest
from conftest import DAILY_DIR, SHARED_DATA
from decision_fakes import DecisionChat
from mask_prefilter import prompt_leaks
from mask_scan import GICS, corpus_tickers, gics_terms

import swarm.llm.client as client_mod

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
NEWS = SHARED_DATA / "news" / "benzinga_headlines_nvda_tsla_goog_amzn_2011_2020.csv"
DECISION_TOOLS = {"LLMNote", "LLMTurn", "LLMVerdict", "LLMThesis", "LLMJudgement", "LLMCritique"}


class RecordingChat(DecisionChat):
    """Records every message of every call (all roles); answers the decision desk's schemas
    competently and anything else with an empty object (the role falls back to the rules,
    after its prompt was sent)."""

    def reply(self, prompt: str) -> dict:
        return super().reply(prompt) if self.tool in DECISION_TOOLS else {}


@pytest.fixture(scope="module")
def scan() -> tuple[set[str], set[str], set[str]]:
    if not GICS.exists() or not NEWS.exists() or not (DAILY_DIR / "NVDA.csv").exists():
        pytest.skip("real corpus not found")
    return corpus_tickers(), *gics_terms()


def _develop(tmp_path, monkeypatch, chat: RecordingChat, *extra: str):
    from swarm.develop import main

    monkeypatch.setattr(client_mod, "default_model_factory", lambda settings, model: chat)
    code = main(
        [
            "--directive",
            "agents decide on NVDA in 2017, trend following in semiconductors",
            "--families",
            "decision_pipeline,trend",
            "--tickers",
            "NVDA",
            "--data-dir",
            str(DAILY_DIR),
            "--news-file",
            str(NEWS),
            "--start",
            "2017-01-01",
            "--end",
            "2018-06-30",
            "--variants",
            "1",
            "--max-iterations",
            "1",
            "--folds",
            "2",
            "--workers",
            "1",
            "--offline",
            "--quiet",
            "--no-figures",  # charts and a tear sheet send no prompt
            "--memory-dir",
            str(tmp_path / "memory"),
            "--decision-cache",
            str(tmp_path / "decisions"),
            "--out",
            str(tmp_path / "runs"),
            "--llm",
            "openai-compatible:fake",
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "--llm-structured",
            "function_calling",
            "--llm-cache",
            str(tmp_path / "llm-cache"),
            *extra,
        ]
    )
    assert code == 0


def test_no_prompt_of_a_masked_develop_run_names_a_ticker_company_sector_or_year(
    tmp_path, monkeypatch, scan
):
    chat = RecordingChat(messages=iter([]))
    chat.calls = []
    _develop(tmp_path, monkeypatch, chat, "--mask")
    tools = {t for t, _ in chat.calls}
    assert {
        "LLMPlan",
        "LLMFinding",
        "LLMSummary",
        "LLMFailure",
        "LLMNote",
        "LLMTurn",
        "LLMVerdict",
        "LLMThesis",
        "LLMJudgement",
        "LLMCritique",
    } <= tools, tools
    assert any("<<<UNTRUSTED_DATA" in p for _, p in chat.calls)  # the headlines reached them
    assert not prompt_leaks(chat.calls, scan)
