"""The leak audit (issue 29): an answer naming a ticker, company, year or dated event that its
masked prompt did not show is a leak; what the prompt showed is not."""

from __future__ import annotations

import pytest

from swarm.llm.leak_audit import CONTAMINATED_LEAK_RATE, LeakCounts, LeakKind, audit_texts
from swarm.llm.mask import KnownEntities

pytestmark = pytest.mark.unit
KNOWN = KnownEntities().merged(names=["NVIDIA", "Target"])
PROMPT = 'Ticker: ASSET-A. Date: D+0. Evidence: {"SMA_50": 86.44}. [entity] beat in Q1 [year].'


def _kinds(*texts, prompt=PROMPT):
    report = audit_texts(list(texts), prompt=prompt, known=KNOWN, real_tickers=["NVDA"])
    return sorted(leak.kind for leak in report.leaks)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("ASSET-A trades above SMA_50 86.44; the target is 2R away", []),
        ("NVDA", [LeakKind.TICKER]),
        ("nvda looks strong", [LeakKind.TICKER]),
        ("like AAPL did", [LeakKind.TICKER]),
        ("NVIDIA's data-centre boom", [LeakKind.COMPANY]),
        ("Nvidia's data-centre boom", [LeakKind.COMPANY]),
        ("as in 2020, it rallies", [LeakKind.YEAR]),
        ("after the June 3 earnings", [LeakKind.DATE]),
        ("on 2019-06-10 it gapped", [LeakKind.DATE, LeakKind.YEAR]),
        ("Target: 2R above the entry", []),  # a company that is a word, at a sentence start
        ("by D+10 the move is done", []),
    ],
)
def test_leaks_by_kind(text, kinds):
    assert _kinds(text) == kinds


def test_what_the_prompt_showed_is_not_a_leak():
    assert _kinds("AAPL and 2019", prompt=PROMPT + " AAPL 2019") == []


def test_the_reason_never_repeats_the_leaked_value():
    report = audit_texts(["NVDA in 2020"], prompt=PROMPT, known=KNOWN, real_tickers=["NVDA"])
    assert not report.clean
    assert "NVDA" not in report.reason() and "2020" not in report.reason()
    assert "ticker" in report.reason() and "year" in report.reason()


def test_leak_rate_and_contamination():
    clean = LeakCounts(audited=100, leaked=int(100 * CONTAMINATED_LEAK_RATE))
    assert not clean.contaminated
    dirty = LeakCounts(audited=100, leaked=int(100 * CONTAMINATED_LEAK_RATE) + 1)
    assert dirty.contaminated and dirty.summary()["contaminated"] is True
    assert LeakCounts().rate == 0.0 and not LeakCounts().contaminated
