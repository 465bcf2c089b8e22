"""The risk engine sees the book (issue 28 item 3): the CLI's ``--book`` and the family
replay's own book make ``max_positions``, ``exposure_cap``, ``daily_loss_cap`` and the margin
check bite; each of the seven checks rejects; a malformed book is exit 2 naming the file and
the field; the replay's book is deterministic and never holds more than the limits allow."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from strategies.decision_family import decision_spec
from swarm.analyze.__main__ import main
from swarm.analyze.book import Book, Holding, ReplayBook, first_exit, portfolio_of
from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    CheckName,
    Direction,
    RiskLimits,
    Status,
    TraderThesis,
)
from swarm.analyze.replay import DecisionReplayer
from swarm.analyze.risk import risk_engine
from swarm.analyze.trader import validate


def thesis(direction=Direction.LONG, entry=100.0, stop=96.0, target=108.0, atr=2.0):
    t = TraderThesis(
        direction=direction,
        entry=entry,
        stop=stop,
        target=target,
        atr=atr,
        atr_period=14,
        horizon_days=10,
        rationale="r",
    )
    return validate(t, max_stop_atr=4.0)


def held(n: int, notional: float = 1_000.0) -> list[Holding]:
    return [Holding(ticker=f"T{i}", quantity=10, price=notional / 10) for i in range(n)]


# --------------------------------------------------------------------------- unit


@pytest.mark.unit
def test_a_book_is_what_the_engine_counts():
    book = Book(
        positions=[
            Holding(ticker="AAPL", quantity=100, price=150.0),
            Holding(ticker="MSFT", quantity=-50, price=200.0),
        ],
        loss_today=300,
    )
    pf = portfolio_of(book, capital=100_000, short_margin=1.5)
    assert pf.open_positions == 2
    assert pf.gross_exposure == 25_000  # 15,000 long + 10,000 short
    assert pf.cash == 100_000 - 15_000 - 1.5 * 10_000  # a short ties up 150% of itself
    assert pf.loss_today == 300
    assert portfolio_of(book.model_copy(update={"cash": 5.0}), capital=1, short_margin=1).cash == 5


# Each of the seven checks rejecting, the four account checks through a book. A long of 250
# shares at 100 (stop 96: 1,000 at risk) is the trade every row asks for.
@pytest.mark.unit
@pytest.mark.parametrize(
    ("book", "cfg", "t", "failed"),
    [
        (Book(), {}, thesis(), []),
        (Book(), {}, thesis(stop=100.0), [CheckName.DEGENERATE_THESIS, CheckName.SIZE_NONZERO]),
        (
            Book(),
            {"capital": 1_000},
            thesis(stop=80.0, atr=6.0, target=140.0),
            [CheckName.SIZE_NONZERO],
        ),
        (Book(loss_today=1_001), {}, thesis(), [CheckName.DAILY_LOSS_CAP]),
        (
            Book(positions=held(1, 80_000)),
            {"limits": RiskLimits(max_exposure_pct=200)},
            thesis(),
            [CheckName.MARGIN_SUFFICIENT],
        ),  # 20,000 of cash left for a 25,000 notional
        (
            Book(),
            {"limits": RiskLimits(max_notional_pct=20)},
            thesis(),
            [CheckName.MAX_NOTIONAL_PCT],
        ),
        (Book(positions=held(10)), {}, thesis(), [CheckName.MAX_POSITIONS]),
        (Book(positions=held(9)), {}, thesis(), []),  # the tenth position still fits
        (Book(positions=held(3, 25_000.01), cash=50_000), {}, thesis(), [CheckName.EXPOSURE_CAP]),
        (
            Book(positions=held(3, 25_000), cash=50_000),
            {},
            thesis(),
            [],
        ),  # exactly 100% after the trade
    ],
)
def test_each_check_rejects_on_the_book_it_is_given(book, cfg, t, failed):
    base = AnalysisConfig(**cfg)
    pf = portfolio_of(book, capital=base.capital, short_margin=base.limits.short_margin)
    out = risk_engine(t, base.model_copy(update={"portfolio": pf}))
    assert out.failed == failed
    assert out.approved is (not failed)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("direction", "lows", "highs", "closes", "horizon", "expected"),
    [
        (1, [99, 95, 99], [101, 101, 101], [100, 100, 100], 3, (1, 96.0)),  # the stop
        (1, [99, 99, 99], [101, 109, 101], [100, 100, 100], 3, (1, 108.0)),  # the target
        (1, [95, 99, 99], [109, 101, 101], [100, 100, 100], 3, (0, 96.0)),  # both: the stop
        (1, [99, 99, 99], [101, 101, 101], [100, 102, 103], 2, (1, 102.0)),  # the horizon
        (1, [99, 99], [101, 101], [100, 102], 3, (None, math.nan)),  # data ends first
        (-1, [99, 99], [105, 101], [100, 100], 2, (0, 104.0)),  # a short's stop is above
    ],
)
def test_first_exit_table(direction, lows, highs, closes, horizon, expected):
    stop, target = (96.0, 108.0) if direction > 0 else (104.0, 92.0)
    off, price = first_exit(
        direction,
        stop=stop,
        target=target,
        low=np.array(lows, float),
        high=np.array(highs, float),
        close=np.array(closes, float),
        horizon=horizon,
    )
    assert off == expected[0]
    assert price == expected[1] or (math.isnan(price) and math.isnan(expected[1]))


def _decision(action: Action, size: int, entry=100.0, stop=96.0, target=108.0, horizon=10):
    """What ``ReplayBook.record`` reads of a decision."""
    t = SimpleNamespace(entry=entry, stop=stop, target=target, horizon_days=horizon)
    return SimpleNamespace(action=action, trader=t, risk=SimpleNamespace(size=size))


@pytest.mark.unit
def test_the_replay_book_opens_settles_and_counts_the_day_s_loss():
    idx = pd.bdate_range("2020-01-01", periods=6)
    flat = pd.DataFrame({"open": 100.0, "high": 101.0, "low": 99.0, "close": 100.0}, index=idx)
    falls = flat.copy()
    falls.loc[idx[2], "low"] = 90.0  # the stop at 96 is hit on the third bar
    book = ReplayBook(capital=100_000, short_margin=1.5, bars={"A": falls, "B": flat})
    assert book.portfolio(idx[0]).open_positions == 0
    book.record("A", idx[0], _decision(Action.BUY, 250))
    book.record("B", idx[0], _decision(Action.SELL, 100, stop=104.0, target=92.0))
    pf = book.portfolio(idx[1])
    assert pf.open_positions == 2 and pf.gross_exposure == 35_000
    assert pf.cash == 100_000 - 25_000 - 1.5 * 10_000 and pf.loss_today == 0
    pf = book.portfolio(idx[2])  # A stopped out today: 250 x 4 lost
    assert pf.open_positions == 1 and pf.loss_today == 1_000
    assert pf.cash == 100_000 - 1_000 - 1.5 * 10_000
    assert book.portfolio(idx[3]).loss_today == 0  # a new day
    book.record("B", idx[3], _decision(Action.BUY, 100))  # the other way: B closes, none opens
    assert book.portfolio(idx[3]).open_positions == 0


# --------------------------------------------------------------------------- the replay


@pytest.fixture(scope="module")
def two():
    return {t: read_real_bars(t, "2015-01-01", "2018-06-30") for t in ("AAPL", "MSFT")}


@pytest.mark.integration
def test_the_replay_book_holds_no_more_than_max_positions_and_is_deterministic(two):
    window = [(date(2017, 1, 1), date(2017, 12, 31))]
    spec = decision_spec({"horizon_bars": 20})

    def build(limits):
        rep = DecisionReplayer(cache=None, limits=limits)
        return rep, rep.sized_decisions(spec, two, window, capital=100_000.0)

    free_rep, free = build(RiskLimits())
    one_rep, one = build(RiskLimits(max_positions=1))
    assert one == build(RiskLimits(max_positions=1))[1]  # deterministic
    assert one_rep.stats.rejected.get("max_positions", 0) > 0
    assert free_rep.stats.rejected.get("max_positions", 0) == 0
    assert one_rep.stats.trades < free_rep.stats.trades
    for by_day in one.values():
        for d in by_day.values():
            assert d.config.portfolio.open_positions <= 1
            acted = d.risk.judge is not None and d.risk.judge.action != Action.HOLD
            if d.config.portfolio.open_positions == 1 and acted:
                assert d.status == Status.REJECTED and "max_positions" in d.reason
    later = [
        d
        for by_day in free.values()
        for d in by_day.values()
        if d.config.portfolio.open_positions > 0
    ]
    assert later, "the book never held a position when a later decision was made"


# --------------------------------------------------------------------------- the CLI


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _read(folder: str, name: str) -> dict:
    return json.loads(Path(folder, name).read_text())


@pytest.mark.integration
@pytest.mark.parametrize(
    ("content", "field"),
    [
        (
            '{"positions": [{"ticker": "AAPL", "quantity": "many", "price": 1}]}',
            "positions.0.quantity",
        ),
        ('{"positions": [{"ticker": "AAPL", "quantity": 0, "price": 1}]}', "positions.0.quantity"),
        ('{"loss_today": -5}', "loss_today"),
        ('{"cash": 1, "leverage": 3}', "leverage"),
        ("{not json", "(the document)"),
    ],
)
def test_a_malformed_book_is_exit_2_naming_the_file_and_the_field(
    capsys, tmp_path, daily_dir, content, field
):
    book = tmp_path / "book.json"
    book.write_text(content)
    out_dir = tmp_path / "runs"
    code, out, err = run(
        capsys,
        "--ticker",
        "NVDA",
        "--date",
        "2019-06-03",
        "--data-dir",
        str(daily_dir),
        "--out",
        str(out_dir),
        "--memory-dir",
        "off",
        "--book",
        str(book),
    )
    assert code == 2 and out == ""
    line = err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("error: --book: ")
    assert str(book) in line and f"field {field}" in line, line
    assert not out_dir.exists()


@pytest.mark.integration
def test_a_full_book_rejects_the_trade_and_the_folder_carries_the_book_on(
    capsys, tmp_path, daily_dir
):
    common = [
        "--ticker",
        "NVDA",
        "--date",
        "2019-06-03",
        "--data-dir",
        str(daily_dir),
        "--memory-dir",
        "off",
        "--quiet",
    ]
    code, out, _ = run(capsys, *common, "--out", str(tmp_path / "a"))
    assert code == 0
    folder = out.strip().splitlines()[-1]
    decided = _read(folder, "decision.json")
    assert decided["action"] in ("BUY", "SELL"), "the fixture date must trade"
    carried = Book.model_validate(_read(folder, "book.json"))
    assert [h.ticker for h in carried.positions] == ["NVDA"] and carried.capital == 100_000
    # Ten positions open: the same trade is rejected by max_positions alone.
    full = tmp_path / "full.json"
    full.write_text(
        json.dumps(
            {"positions": [{"ticker": f"T{i}", "quantity": 1, "price": 10.0} for i in range(10)]}
        )
    )
    code, out, _ = run(capsys, *common, "--out", str(tmp_path / "b"), "--book", str(full))
    assert code == 0
    rejected = _read(out.strip().splitlines()[-1], "decision.json")
    assert rejected["status"] == "REJECTED" and rejected["risk"]["rejected_by"] == ["max_positions"]
    assert rejected["config"]["portfolio"]["open_positions"] == 10
    # Continuing from the first analysis's folder: its NVDA position is in the book.
    code, out, _ = run(capsys, *common, "--out", str(tmp_path / "c"), "--book", folder)
    assert code == 0
    again = _read(out.strip().splitlines()[-1], "decision.json")
    assert again["config"]["portfolio"]["open_positions"] == 1
