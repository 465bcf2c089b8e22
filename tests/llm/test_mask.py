"""The Masker's pure pieces (issue 29): aliases, day offsets, rebased prices, scrubbed names,
and the way back. Each is a pure function of the text and a MaskContext."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from pydantic import BaseModel

from swarm.llm.cutoff import UNMASKED_BANNER, declared_cutoff, resolve_policy
from swarm.llm.mask import (
    KnownEntities,
    MaskContext,
    alias_for,
    alias_tickers,
    context_for,
    core_names,
    known_entities,
    mask_dates,
    mask_text,
    rebase_numbers,
    scrub_entities,
    unmask_answer,
    window_scales,
)
from swarm.llm.schemas import Citation

pytestmark = pytest.mark.unit
ANCHOR = dt.date(2019, 6, 3)
CTX = MaskContext(
    aliases={"NVDA": "ASSET-A"},
    anchor=ANCHOR,
    price_scale=0.5,
    volume_scale=1e-5,
    prices=(172.885199, 133.779999),
    volumes=(11966100.0,),
)


def test_aliases_are_stable_and_say_nothing():
    assert [alias_for(i) for i in (0, 1, 25, 26, 27)] == [
        "ASSET-A",
        "ASSET-B",
        "ASSET-Z",
        "ASSET-AA",
        "ASSET-AB",
    ]
    text = alias_tickers(
        "NVDA and $NVDA beat AMD; NVDAX is not it; A is a word",
        {"NVDA": "ASSET-A"},
        frozenset({"AMD", "A"}),
    )
    assert text == "ASSET-A and $ASSET-A beat [ticker]; NVDAX is not it; A is a word"


def test_dates_become_offsets_and_years_go():
    text = mask_dates("Last bar 2019-06-03, news 2019-05-30T08:00:00-04:00, Q1 2019 beat", ANCHOR)
    assert text == "Last bar D+0, news D-4, Q1 [year] beat"
    # A number that only looks like a year is kept: a price, a volume, a count.
    assert mask_dates("close 2019.5, volume 120190000, 2,019 shares", ANCHOR) == (
        "close 2019.5, volume 120190000, 2,019 shares"
    )


def test_keyed_prices_are_rebased_volumes_scaled_amounts_withheld_ratios_kept():
    text = rebase_numbers(
        '{"SMA_50": 172.885199, "VOLUME": 11966100.0, "RSI_14": 18.83, '
        '"BBANDS_WIDTH_20_2_pct": 13.1, "revenue": 11716000000.0}',
        CTX,
    )
    assert text == (
        '{"SMA_50": 86.4426, "VOLUME": 119.661, "RSI_14": 18.83, '
        '"BBANDS_WIDTH_20_2_pct": 13.1, "revenue": null}'
    )


def test_prose_prices_are_rebased_and_big_amounts_scrubbed():
    text = rebase_numbers("close 133.78 below SMA_50 172.89; RSI 18.83; cap 3,200,000,000", CTX)
    assert text == "close 66.89 below SMA_50 86.44; RSI 18.83; cap [amount]"


def test_company_and_product_names_are_scrubbed_but_words_stay():
    names = ("Apple", "Target", "Texas Instruments", "Amazon.com", "Amazon")
    text = scrub_entities(
        "Apple And Amazon.com Earnings; TEXAS INSTRUMENTS; APPLE; Target "
        "raised; price target kept; an apple a day",
        names,
    )
    assert text == (
        "[entity] And [entity] Earnings; [entity]; [entity]; [entity] raised; "
        "price target kept; an apple a day"
    )


def test_core_names_of_legal_names():
    assert core_names("NVIDIA Corporation") == ["NVIDIA Corporation", "NVIDIA"]
    assert core_names("Amazon.com Inc.") == ["Amazon.com Inc.", "Amazon.com", "Amazon"]
    assert core_names("Alphabet Inc. (Class A)") == ["Alphabet Inc.", "Alphabet"]


def test_mask_text_end_to_end():
    known = KnownEntities().merged(names=["NVIDIA"])
    ctx = CTX.model_copy(update={"known": known})
    text = mask_text(
        "Ticker: NVDA. Date: 2019-06-03. NVIDIA (NVDA) vs AMD in 2018: close "
        '133.78. Evidence: {"CLOSE": 133.779999}',
        ctx,
    )
    assert text == (
        "Ticker: ASSET-A. Date: D+0. [entity] (ASSET-A) vs [ticker] in [year]: close "
        '66.89. Evidence: {"CLOSE": 66.89}'
    )
    assert "NVDA" not in text and "2019" not in text and "133.78" not in text


class _Thesis(BaseModel):
    ticker: str
    stop: float
    target: float
    rationale: str
    cited: list[Citation] = []


def test_answers_map_back_to_real_tickers_and_prices():
    ans = _Thesis(
        ticker="ASSET-A",
        stop=60.0,
        target=80.0,
        rationale="ASSET-A above 86.44",
        cited=[Citation(key="SMA_50", value=86.44), Citation(key="RSI_14", value=18.8)],
    )
    real = unmask_answer(ans, CTX)
    assert real.ticker == "NVDA" and real.stop == 120.0 and real.target == 160.0
    assert real.rationale == "NVDA above 172.88"
    assert real.cited[0].value == pytest.approx(172.88) and real.cited[1].value == 18.8


def test_window_scales_rebase_the_window_start_to_100():
    idx = pd.date_range("2019-01-01", periods=300, freq="D")
    bars = pd.DataFrame({"close": range(1, 301), "volume": [50.0] * 300}, index=idx)
    price, volume = window_scales(bars)
    assert price * bars["close"].iloc[-252] == pytest.approx(100.0)
    assert volume == pytest.approx(2.0)
    ctx = context_for(["nvda"], "2019-06-03", bars=bars, evidence={"SMA_50": 10.0, "RSI_14": 5.0})
    assert ctx.aliases == {"NVDA": "ASSET-A"} and ctx.prices == (10.0,)


def test_known_entities_read_the_corpus(shared_data):
    known = known_entities(shared_data / "ohlcv" / "daily")
    assert {"NVDA", "AAPL", "MMM"} <= known.tickers
    assert {"NVIDIA", "Apple", "3M"} <= set(known.names)


@pytest.mark.parametrize(
    ("mode", "models", "cutoff", "earliest", "masked", "banner"),
    [
        ("auto", ["gpt-4o-mini"], None, "2019-06-03", True, None),
        ("auto", ["gpt-4o-mini"], None, "2024-06-03", False, None),
        ("auto", ["my-local-model"], None, "2024-06-03", True, None),  # unknown: conservative
        ("auto", ["gpt-4o"], dt.date(2015, 1, 1), "2019-06-03", False, None),  # declared
        ("off", ["gpt-4o"], None, "2019-06-03", False, UNMASKED_BANNER),
        ("on", ["gpt-4o"], None, "2024-06-03", True, None),
    ],
)
def test_mask_policy(mode, models, cutoff, earliest, masked, banner):
    p = resolve_policy(mode=mode, models=models, cutoff=cutoff, earliest_data=earliest)
    assert p.masked is masked and p.banner == banner
    assert p.summary()["masked"] is masked


def test_declared_cutoffs():
    assert declared_cutoff("gpt-4o-mini-2024-07-18")[0] == dt.date(2023, 10, 31)
    assert declared_cutoff("gpt-4.1")[0] == dt.date(2024, 6, 30)
    assert declared_cutoff("mystery")[0] is None


def test_gics_sectors_are_scrubbed_in_any_case():
    known = KnownEntities(sectors=("Semiconductors", "Information Technology"))
    ctx = MaskContext(anchor=ANCHOR, known=known)
    text = mask_text("trend in semiconductors; INFORMATION TECHNOLOGY; Semiconductors.", ctx)
    assert text == "trend in [sector]; [sector]; [sector]."


def test_known_entities_carry_the_gics_sectors(shared_data):
    known = known_entities(shared_data / "ohlcv" / "daily")
    assert {"Information Technology", "Semiconductors"} <= set(known.sectors)
    assert "Semiconductors" not in known.names  # a sector is not an answer's leak


def test_ratio_keys_under_a_price_or_volume_prefix_stay_and_exit_is_a_price():
    text = rebase_numbers(
        '{"VOLUME_vs_SMA_20": 1.3, "NATR_14_vs_median_252": 0.7, "exit": 208.69}', CTX
    )
    assert text == '{"VOLUME_vs_SMA_20": 1.3, "NATR_14_vs_median_252": 0.7, "exit": 104.345}'


def test_a_run_wide_context_rebases_each_prompt_by_the_symbol_it_is_about():
    idx = pd.date_range("2019-01-01", periods=300, freq="D")
    a = pd.DataFrame({"close": [200.0] * 300, "volume": [1e6] * 300}, index=idx)
    b = pd.DataFrame({"close": [50.0] * 300, "volume": [4e6] * 300}, index=idx)
    ctx = context_for(["NVDA", "AMD"], "2019-10-27", symbol_bars={"NVDA": a, "AMD": b})
    one = ctx.scoped("Symbol: NVDA.")
    assert one.price_scale == pytest.approx(0.5) and one.volume_scale == pytest.approx(1e-4)
    assert mask_text('Symbol: NVDA. {"CLOSE": 210.0, "VOLUME": 2000000}', one) == (
        'Symbol: ASSET-B. {"CLOSE": 105.0, "VOLUME": 200.0}'
    )
    both = ctx.scoped("NVDA and AMD")
    assert both.withhold_levels
    assert mask_text('NVDA and AMD: {"CLOSE": 210.0, "RSI_14": 55.0}', both) == (
        'ASSET-B and ASSET-A: {"CLOSE": null, "RSI_14": 55.0}'
    )
    # One symbol in the run: a prompt that names none is still about it.
    solo = context_for(["NVDA"], "2019-10-27", symbol_bars={"NVDA": a})
    assert solo.scoped("the best variant").price_scale == pytest.approx(0.5)


def test_two_letter_tickers_are_masked_unless_they_are_words():
    text = alias_tickers(
        "Watch GE and FB; A Peek; SO it goes; MA crossover",
        {},
        frozenset({"GE", "FB", "A", "SO", "MA"}),
    )
    assert text == "Watch [ticker] and [ticker]; A Peek; SO it goes; MA crossover"
