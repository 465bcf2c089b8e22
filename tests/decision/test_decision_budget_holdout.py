"""The LLM token budget running out at the holdout of a ``--families decision_pipeline`` run:
the search fits in the budget, the winner's holdout decisions do not. The run ends cleanly
(exit 0, no traceback), the verdict says why the holdout has no decisions, and nothing the
search wrote is lost. The model is faked only at the chat-model boundary: it reports a huge
token count for analyst prompts dated inside the holdout (the first calls the holdout makes)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import read_real_bars
from decision_fakes import DecisionChat
from decision_fakes import answer as decision_answer

import swarm.llm.client as client_mod
from backtest.splits import split_holdout
from experiments.tracker import read_records
from swarm.develop import main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
START, END = "2016-01-01", "2017-12-31"
DECISION_TOOLS = {"LLMNote", "LLMTurn", "LLMVerdict", "LLMThesis", "LLMJudgement", "LLMCritique"}
BUDGET = 5_000_000
HUGE = 10 * BUDGET


class HoldoutCostlyChat(DecisionChat):
    """The decision roles answer well at 100 tokens a call, except that an analyst asked about
    a date on or after ``expensive_from`` costs more than the whole budget. Other roles of the
    develop loop (research, summary) get an empty answer: their rules fallback is logged."""

    expensive_from: str = "9999-12-31"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        prompt = "\n".join(str(m.content) for m in messages)
        self.calls.append((self.tool, prompt))
        args = decision_answer(self.tool, prompt, "good") if self.tool in DECISION_TOOLS else {}
        day = re.search(r"Date: (\d{4}-\d{2}-\d{2})", prompt)
        costly = self.tool == "LLMNote" and day is not None and day.group(1) >= self.expensive_from
        total = HUGE if costly else 100
        msg = AIMessage(
            content="",
            tool_calls=[{"name": self.tool, "args": args, "id": "c1", "type": "tool_call"}],
            usage_metadata={"input_tokens": total - 10, "output_tokens": 10, "total_tokens": total},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_the_budget_running_out_at_the_holdout_ends_the_run_cleanly(
    tmp_path, daily_dir, monkeypatch, capsys
):
    split = split_holdout(read_real_bars("AAPL", START, END).index)
    chat = HoldoutCostlyChat(messages=iter([]), expensive_from=str(split.holdout_start))
    chat.calls = []
    monkeypatch.setattr(client_mod, "default_model_factory", lambda settings, model: chat)
    code = main(
        [
            "--directive",
            "agents decide on AAPL",
            "--families",
            "decision_pipeline",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--start",
            START,
            "--end",
            END,
            "--variants",
            "1",
            "--max-iterations",
            "1",
            "--folds",
            "2",
            "--workers",
            "1",
            "--offline",
            "--memory-dir",
            "off",
            "--no-figures",  # report.md is still written; no chart is asserted
            "--decision-cache",
            str(tmp_path / "decisions"),
            "--out",
            str(tmp_path / "runs"),
            "--benchmark",
            "cash",
            # A pass the first iteration reaches, so the winner goes to the holdout.
            "--criteria",
            "sharpe>=-100,min_trades>=0,score>=0,dsr>=0,spa_p<=1",
            "--criteria-replace",
            "--llm",
            "openai-compatible:fake",
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "--llm-structured",
            "function_calling",
            "--llm-cache",
            str(tmp_path / "llm-cache"),
            "--max-llm-tokens",
            str(BUDGET),
            # The fake reads the holdout's dates in the prompt; a masked prompt has none.
            "--no-mask",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert "Traceback" not in err and "internal error" not in err
    run = next((tmp_path / "runs").iterdir())
    assert out.strip().splitlines()[-1] == str(run)

    # The search fitted in the budget; the holdout's first analyst call spent it.
    stats = json.loads((run / "decision_pipeline.json").read_text())
    assert stats["budget_exhausted"] is True
    search = stats["variants"][0]
    assert search["pipeline_calls"] > 20 and search["trades"] > 0
    asked = [
        m.group(1)
        for t, p in chat.calls
        if t == "LLMNote" and (m := re.search(r"Date: (\d{4}-\d{2}-\d{2})", p))
    ]
    late = [d for d in asked if d >= str(split.holdout_start)]
    assert late and len(set(late)) == 1, "the holdout's first decision, and only it, asked"
    assert max(d for d in asked if d not in late) <= str(split.insample_end)
    assert "[decisions] holdout: decision pipeline: LLM token budget exhausted" in err

    # A clear verdict: the holdout ran the in-sample code (no holdout decisions) and says so.
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    assert verdict["reason"].startswith("a variant passed the gate")  # the search's own reason
    assert "holdout not judged on the winner's own decisions" in verdict["reason"]
    assert "--max-llm-tokens" in verdict["reason"]
    records = list(read_records(run / "experiments.jsonl"))
    holdouts = [r for r in records if r["kind"] == "holdout"]
    assert holdouts and all(r["status"] == "ok" for r in holdouts)
    assert holdouts[0]["metrics"]["n_trades"] == 0  # the in-sample table has no holdout date
    assert not list((run / "strategies").glob("*.holdout.py"))
    assert "LLM token budget ran out" in (run / "report.md").read_text()
    assert stats["holdout_note"] in verdict["reason"]

    # Nothing lost: the search's trial, its code and the decisions made are on disk.
    backtests = [r for r in records if r["kind"] == "backtest"]
    assert backtests and all(f["status"] == "ok" for r in backtests for f in r["folds"])
    winner = verdict["best_variant"]
    assert (run / "strategies" / f"{winner}.py").exists()
    cached = list((tmp_path / "decisions").rglob("*.json"))
    assert len(cached) == stats["pipeline_calls"] - 1  # all but the one the budget cut short
    # The iterations' usage records, then the holdout's spend in the pipeline's stats file.
    usage = [r for r in records if r["kind"] == "llm_usage"][-1]["llm"]
    assert not usage["exhausted"] and usage["tokens_used"] < BUDGET
    assert stats["llm"]["exhausted"] and stats["llm"]["tokens_used"] >= BUDGET
    assert f"{stats['llm']['tokens_used']} of {BUDGET} tokens" in stats["holdout_note"]
    for name in ("manifest.json", "variants.json", "report.md"):
        assert (run / name).exists(), name
