"""Sentiment momentum (``strategies.sentiment_momentum``): an item reaches no bar before it
was known (after the close: the next session), copies of one story count once, the z-score
is the hand-computed one, proposals are snapped, fresh and distinct, and the rendered code is
valid and enters and exits on the bars the trusted replay says."""

from __future__ import annotations

import ast
import math
import random
import statistics
from datetime import date
from pathlib import Path

import backtrader as bt
import pandas as pd
import pytest

from altdata.corpus import AltData
from altdata.sentiment import normalise
from backtest.engine import run_code_on_bars
from strategies.earnings_drift import date_key, first_tradable
from strategies.sentiment_momentum import (
    CLASS_NAME,
    GRID,
    KIND,
    Day,
    ToneZ,
    decide,
    decisions,
    momentum_spec,
    propose,
    render,
    scored,
    series,
    sessions,
    signature,
)
from strategies.validate import validate_code

pytestmark = pytest.mark.unit

HEADER = "date_utc,created_at_utc,ticker,tweet_id,user_id,followers,text\n"
# Summer 2015 (the close is 20:00 UTC): Monday 07-06 one story twice (a copy in other case
# and punctuation), one tweet at 21:00 UTC (after the close: Tuesday's), Tuesday one more,
# Wednesday one "in the future" of a Tuesday cut. Winter: 21:00:00 UTC is the close itself.
ROWS = """2015-07-06,2015-07-06 14:00:00,AAPL,1,1,10,Great quarter $AAPL beats
2015-07-06,2015-07-06 15:00:00,AAPL,2,2,10,great quarter!! $AAPL BEATS
2015-07-06,2015-07-06 21:00:00,AAPL,3,3,10,$AAPL misses after hours
2015-07-07,2015-07-07 19:59:00,AAPL,4,4,10,$AAPL beats again
2015-07-08,2015-07-08 14:00:00,AAPL,5,5,10,$AAPL future beats
2015-07-06,2015-07-06 14:00:00,MSFT,6,6,10,$MSFT beats
2015-01-06,2015-01-06 21:00:00,MSFT,7,7,10,$MSFT at the bell beats
2015-01-06,2015-01-06 21:00:01,MSFT,8,8,10,$MSFT a second late misses
"""


def fake_score(text: str) -> float:
    return 0.5 if "beats" in text.lower() else -0.5


def _alt(tmp_path: Path, rows: str = ROWS) -> Path:
    (tmp_path / "social").mkdir(exist_ok=True)
    (tmp_path / "news").mkdir(exist_ok=True)  # two folders of the five: laid out like the corpus
    (tmp_path / "social" / "stocknet_tweets_2014_2016.csv").write_text(HEADER + rows)
    return tmp_path


def _tables(tmp_path: Path) -> dict:
    tweets = AltData(_alt(tmp_path)).table("tweets")
    return {"tweets": scored(tweets, text="text", score=fake_score, key=normalise)}


def _days_in(code: str) -> dict[str, tuple[tuple[int, int, float], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DAYS":
            return ast.literal_eval(node.value)
    raise AssertionError("no DAYS table")


def test_an_item_after_the_close_counts_for_the_next_session_copies_once(tmp_path):
    table = series(_tables(tmp_path), ["AAPL", "MSFT"], through=date(2015, 7, 31))["tweets"]
    assert table["AAPL"] == (
        Day(20150706, 1, 0.5),  # the copy (other case, "!!") is one story
        Day(20150707, 2, 0.0),  # 21:00 UTC Monday is after the 20:00 UTC close: Tuesday's
        Day(20150708, 1, 0.5),
    )
    # Winter: the close is 21:00 UTC; at it the tweet is known by the close, a second later not.
    assert table["MSFT"] == (Day(20150106, 1, 0.5), Day(20150107, 1, -0.5), Day(20150706, 1, 0.5))


def test_the_same_story_on_two_sessions_counts_on_each(tmp_path):
    rows = ROWS + "2015-07-07,2015-07-07 14:00:00,AAPL,9,9,10,Great quarter $AAPL beats\n"
    tweets = AltData(_alt(tmp_path, rows)).table("tweets")
    tables = {"tweets": scored(tweets, text="text", score=fake_score, key=normalise)}
    aapl = series(tables, ["AAPL"], through=date(2015, 7, 7))["tweets"]["AAPL"]
    assert aapl == (Day(20150706, 1, 0.5), Day(20150707, 3, round(0.5 / 3, 6)))


def test_an_item_known_after_the_cut_is_invisible_in_the_series_and_the_code(tmp_path):
    tables = _tables(tmp_path)
    on_monday = series(tables, ["AAPL"], through=date(2015, 7, 6))["tweets"]["AAPL"]
    assert on_monday == (Day(20150706, 1, 0.5),)  # Monday 21:00 UTC: not by Monday's close
    on_tuesday = series(tables, ["AAPL"], through=date(2015, 7, 7))
    assert [d.day for d in on_tuesday["tweets"]["AAPL"]] == [20150706, 20150707]
    code = render(momentum_spec(), on_tuesday)
    days = _days_in(code)["AAPL"]
    assert max(day for day, _, _ in days) == 20150707 and "future" not in code
    assert "beats" not in code  # the child gets tones, never the texts


def test_sessions_looked_up_at_once_are_the_one_by_one_sessions(monkeypatch):
    """``altdata.sessions.first_sessions`` (every day at once) gives what the one-day
    functions give, around closes, half days, weekends and holidays of 35 years; a day
    outside the calendar takes the one-day path (which says why)."""
    import numpy as np

    import altdata.sessions as cal
    import strategies.sentiment_momentum as sm

    rng = np.random.default_rng(7)
    base = pd.Timestamp("1990-01-02", tz="UTC").value
    span = pd.Timestamp("2026-12-31", tz="UTC").value - base
    moments = pd.Series(pd.to_datetime(base + rng.integers(0, span, 3000), utc=True))
    closes = [cal.session_close(d) for d in ("2015-11-27", "2019-07-03", "2008-12-24")]
    near = [c + pd.Timedelta(seconds=s) for c in closes for s in (-1, 0, 1)]
    moments = pd.concat([moments, pd.Series(near)], ignore_index=True)
    at_once = sessions(moments)
    monkeypatch.setattr(sm, "first_sessions", lambda days: None)
    one_by_one = sessions(moments)
    assert at_once.tolist() == one_by_one.tolist()
    assert at_once.nunique() > 2000  # the moments span the calendar
    monkeypatch.undo()
    assert cal.first_sessions(pd.DatetimeIndex(["1989-12-29"])) is None
    assert cal.first_sessions(pd.DatetimeIndex([cal.nyse().sessions[-1]])) is None
    first, close, after = cal.first_sessions(pd.DatetimeIndex(["2015-07-03", "2015-07-06"]))
    assert [d.date() for d in first] == [date(2015, 7, 6)] * 2
    assert close == [cal.session_close("2015-07-06")] * 2
    assert [d.date() for d in after] == [date(2015, 7, 7)] * 2


def test_sessions_agree_with_first_tradable():
    moments = pd.Series(
        pd.to_datetime(
            [
                "2015-07-03 13:30",
                "2015-07-02 20:30",
                "2015-07-06 19:59:59",
                "2015-07-06 20:00:00",
                "2015-07-06 20:00:01",
                "2015-01-06 21:00",
                "2015-01-06 21:00:01",
                "2015-11-27 18:00:01",
                "2015-11-28 03:00",
                "2014-12-31 23:59",
            ],
            utc=True,
            format="mixed",
        )
    )
    assert sessions(moments).tolist() == [date_key(first_tradable(m)) for m in moments]
    assert sessions(moments).tolist()[3:5] == [20150706, 20150707]
    assert sessions(moments).tolist()[7] == 20151130  # after the half day's 18:00 UTC close


def test_the_z_score_is_the_hand_computed_one():
    pooled = ToneZ(lookback=4, smooth=2, min_items=2, weighted=True)
    bars = [(2, 0.4), (1, 0.9), (3, 0.3), (2, -0.2), (4, 0.8), (0, 0.0), (2, 0.6)]
    zs = [pooled.update(c, s) for c, s in bars]
    # levels: .4/2=.2; (1 item: no reading) .2; .3/3=.1; (.3-.2)/5=.02; (-.2+.8)/6=.1;
    # 4 items .8 alone = .2; (0+.6)/2 = .3
    assert zs[:3] == [None, None, None]  # fewer than max(3, 4 // 2) earlier readings
    assert zs[3] == pytest.approx(
        (0.02 - 1 / 6) / math.sqrt((2 * (1 / 30) ** 2 + (1 / 15) ** 2) / 2)
    )
    assert zs[3] == pytest.approx(-2.540341, abs=1e-6)
    for i, level in ((4, 0.1), (5, 0.2), (6, 0.3)):
        prior = [0.2, 0.2, 0.1, 0.02, 0.1, 0.2][max(0, i - 4) : i]
        want = (level - statistics.mean(prior)) / statistics.stdev(prior)
        assert zs[i] == pytest.approx(want)
    days_alike = ToneZ(lookback=4, smooth=2, min_items=2, weighted=False)
    zs = [days_alike.update(c, s) for c, s in bars[:5]]
    # levels: .2, .2, .1, mean(.1, -.1) = 0, mean(-.1, .2) = .05
    assert zs[3] == pytest.approx((0 - 1 / 6) / statistics.stdev([0.2, 0.2, 0.1]))
    assert zs[4] == pytest.approx((0.05 - 0.125) / statistics.stdev([0.2, 0.2, 0.1, 0.0]))


def test_no_reading_no_z_and_a_flat_history_no_z():
    tz = ToneZ(lookback=20, smooth=1, min_items=1, weighted=True)
    assert all(tz.update(0, 0.0) is None for _ in range(40))  # no coverage: never a signal
    flat = ToneZ(lookback=4, smooth=1, min_items=1, weighted=True)
    assert [flat.update(1, 0.3) for _ in range(6)] == [None] * 6  # no spread to scale by


def test_decide_enters_on_a_fresh_cross_and_exits_on_the_z_or_the_holding():
    args = dict(entry_z=1.0, exit_z=0.0, hold_bars=5, allow_short=False)
    assert decide(1.2, 0.4, 0, 0, **args) == (1, True)
    assert decide(1.2, 1.1, 0, 0, **args) == (0, False)  # not fresh: no re-entry
    assert decide(0.5, 1.2, 1, 1, **args) == (1, False)
    assert decide(-0.1, 0.5, 1, 2, **args) == (0, False)  # below exit_z
    assert decide(0.5, 0.6, 1, 5, **args) == (0, False)  # held hold_bars
    assert decide(None, 0.6, 1, 2, **args) == (1, False)  # no reading: hold on
    assert decide(-1.5, 0.0, 0, 0, **args) == (0, False)  # long only
    assert decide(-1.5, 0.0, 1, 1, **args | {"allow_short": True}) == (-1, True)
    assert decide(-0.2, -1.5, -1, 1, **args | {"allow_short": True}) == (-1, False)
    assert decide(0.1, -1.5, -1, 1, **args | {"allow_short": True}) == (0, False)


# --------------------------------------------------------------------------- proposals


@pytest.mark.parametrize("route", ["INITIAL", "RESEARCH", "TUNE", "FIX", "REFINE"])
def test_proposals_are_snapped_fresh_distinct_and_deterministic(route):
    first = propose(route="INITIAL", n=3, rng=random.Random(0), seen=set(), best=None)
    seen = {p.spec.trial_key() for p in first}
    best = ("i01-v02", first[2].spec) if route in ("TUNE", "FIX", "REFINE") else None
    again = [
        propose(route=route, n=6, rng=random.Random(7), seen=seen, best=best) for _ in range(2)
    ]
    assert [p.spec for p in again[0]] == [p.spec for p in again[1]]
    keys = [p.spec.trial_key() for p in again[0]]
    assert len(keys) == 6 == len(set(keys)) and not set(keys) & seen
    assert len({p.spec.name for p in again[0]}) == 6
    for p in again[0]:
        assert set(p.spec.parameters) == set(GRID)
        assert all(v in GRID[k] for k, v in p.spec.parameters.items())
        assert p.spec.family.value == KIND
    if best is not None:
        assert all(p.parent_id == "i01-v02" for p in again[0])
    if route == "REFINE":
        assert again[0][0].spec.long_short != best[1].long_short
    if route == "TUNE":
        moved = [
            sum(p.spec.parameters[k] != best[1].parameters[k] for k in best[1].parameters)
            for p in again[0]
        ]
        assert moved == sorted(moved) and set(moved) <= {1, 2} and moved[0] == 1


def test_off_grid_values_snap():
    spec = momentum_spec({"lookback": 50, "entry_z": 1.3, "source": 2.6, "hold_bars": 7})
    p = spec.parameters
    assert (p["lookback"], p["entry_z"], p["source"], p["hold_bars"]) == (40, 1.5, 3, 5)


def test_proposals_stay_on_covered_sources_and_never_trade_alike():
    days = [int(d.strftime("%Y%m%d")) for d in pd.bdate_range("2015-01-01", periods=120)]
    rng = random.Random(3)
    rows = tuple(Day(d, 1 + rng.randrange(6), round(rng.uniform(-0.5, 0.5), 6)) for d in days)
    table = {"tweets": {"AAPL": rows}, "news": {"AAPL": ()}, "both": {"AAPL": rows}}
    props = propose(
        route="RESEARCH",
        n=8,
        rng=random.Random(0),
        seen=set(),
        best=None,
        table=table,
        days=days,
        sources=["tweets"],
    )
    assert len(props) == 8 and all(p.spec.parameters["source"] == 1 for p in props)
    sigs = {signature(p.spec, table, days) for p in props}
    assert len(sigs) == 8
    # Without smoothing, pooling the items or weighing days alike is one strategy.
    base = momentum_spec({"smooth": 1, "weighted": 1})
    twin = momentum_spec({"smooth": 1, "weighted": 0})
    assert signature(base, table, days) == signature(twin, table, days)
    tuned = propose(
        route="TUNE",
        n=20,
        rng=random.Random(0),
        seen=set(),
        best=("b", base),
        table=table,
        days=days,
        sources=["tweets"],
    )
    assert twin.trial_key() not in {p.spec.trial_key() for p in tuned}
    assert (
        propose(
            route="INITIAL",
            n=4,
            rng=random.Random(0),
            seen=set(),
            best=None,
            table=table,
            days=days,
            sources=[],
        )
        == []
    )


# --------------------------------------------------------------------------- the code


@pytest.mark.parametrize("long_short", [False, True])
def test_the_code_is_valid(long_short):
    spec = momentum_spec({"lookback": 33}, long_short=long_short)
    code = render(spec, {"tweets": {"AAPL": (Day(20150128, 3, 0.25),), "MSFT": ()}})
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == CLASS_NAME
    compile(code, "<sentiment_momentum>", "exec")
    assert '("lookback", 40)' in code  # snapped


def _bars(n: int = 60) -> pd.DataFrame:
    days = pd.bdate_range("2015-01-02", periods=n)
    close = pd.Series([100.0 + i for i in range(n)], index=days)
    return pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1000.0}
    )


def _trades(code: str, name: str, bars: pd.DataFrame) -> list[tuple[date, date, float]]:
    """(entry fill day, exit fill day, size) of each trade under plain backtrader."""
    namespace: dict = {}
    exec(compile(code, "<sentiment_momentum>", "exec"), namespace)
    fills: list = []

    class Recorded(namespace[CLASS_NAME]):
        def notify_order(self, order):
            super().notify_order(order)
            if order.status == order.Completed:
                fills.append((self.data.datetime.date(0), order.executed.size))

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=bars), name=name)
    cerebro.addstrategy(Recorded)
    cerebro.broker.setcash(100_000)
    cerebro.run()
    return [(a[0], b[0], a[1]) for a, b in zip(fills[::2], fills[1::2], strict=False)]


def _hand_series(bars: pd.DataFrame, spikes: dict[int, float], after: float) -> tuple[Day, ...]:
    """Two items a bar, tone alternating 0 / 0.1, ``spikes`` (bar index -> tone) and the
    given tone on every bar after the last spike."""
    last = max(spikes)
    out = []
    for i, day in enumerate(bars.index):
        tone = spikes.get(i, after if i > last else 0.1 * (i % 2))
        out.append(Day(date_key(day.date()), 2, tone))
    return tuple(out)


def test_it_enters_after_a_tone_spike_and_leaves_when_the_z_falls_back():
    bars = _bars()
    rows = _hand_series(bars, {30: 0.6}, after=0.05)
    spec = momentum_spec(
        {
            "lookback": 20,
            "smooth": 1,
            "min_items": 1,
            "entry_z": 1.5,
            "exit_z": 0.0,
            "hold_bars": 10,
        }
    )
    code = render(spec, {"tweets": {"AAPL": rows, "MSFT": ()}})
    days = [date_key(d.date()) for d in bars.index]
    # Decided at bar 30's close (z >> 1), filled at bar 31's open; bar 31's tone 0.05 is
    # below the window's mean (the spike is in it): out at bar 32's open.
    assert decisions(spec, rows, days) == ((days[30], 1), (days[31], 0))
    ((entry, exit_, size),) = _trades(code, "AAPL", bars)
    assert (entry, exit_) == (bars.index[31].date(), bars.index[32].date()) and size > 0
    assert _trades(code, "MSFT", bars) == []  # no readings of its own: flat


def test_it_leaves_after_hold_bars_while_the_tone_stays_up():
    bars = _bars()
    rows = _hand_series(bars, {30: 0.6}, after=0.3)
    spec = momentum_spec(
        {
            "lookback": 20,
            "smooth": 1,
            "min_items": 1,
            "entry_z": 1.5,
            "exit_z": -0.5,
            "hold_bars": 3,
        }
    )
    days = [date_key(d.date()) for d in bars.index]
    assert decisions(spec, rows, days) == ((days[30], 1), (days[33], 0))
    code = render(spec, {"tweets": {"AAPL": rows}})
    ((entry, exit_, _),) = _trades(code, "AAPL", bars)
    assert (entry, exit_) == (bars.index[31].date(), bars.index[34].date())


def test_long_short_shorts_a_tone_drop_and_the_engine_books_it():
    bars = _bars()
    rows = _hand_series(bars, {30: -0.6}, after=0.05)
    params = {"lookback": 20, "smooth": 1, "min_items": 1, "hold_bars": 5, "entry_z": 1.5}
    short = render(momentum_spec(params, long_short=True), {"tweets": {"AAPL": rows}})
    ((entry, _, size),) = _trades(short, "AAPL", bars)
    assert entry == bars.index[31].date() and size < 0
    assert _trades(render(momentum_spec(params), {"tweets": {"AAPL": rows}}), "AAPL", bars) == []
    result = run_code_on_bars(short, bars, symbol="AAPL")  # the trusted books, costs on
    assert result.status == "ok", result.error
    assert result.metrics.n_trades == 1


def test_a_series_with_no_items_stays_flat_in_the_engine():
    code = render(momentum_spec(long_short=True), {"tweets": {"ZZZ": ()}})
    result = run_code_on_bars(code, _bars(), symbol="ZZZ")
    assert result.status == "ok", result.error
    assert result.metrics.n_trades == 0


def _orders(code: str, bars: pd.DataFrame) -> tuple[tuple[int, int], ...]:
    """(bar day, side it orders: 1, -1, or 0 to close) of every order the child places."""
    namespace: dict = {}
    exec(compile(code, "<sentiment_momentum>", "exec"), namespace)
    days = [date_key(d.date()) for d in bars.index]
    placed: list = []

    class Recorded(namespace[CLASS_NAME]):
        def next(self):
            before = self.order
            super().next()
            if self.order is not None and self.order is not before:
                held, size = self.position.size, self.order.size
                side = 0 if held and size == -held else (1 if size > 0 else -1)
                placed.append((days[len(self) - 1], side))

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=bars), name="AAPL")
    cerebro.addstrategy(Recorded)
    cerebro.broker.setcash(1_000_000)
    cerebro.run()
    return tuple(placed)


def test_the_child_places_the_orders_the_trusted_replay_says_on_the_corpus(shared_data):
    from swarm.research.news import score_headline

    tweets = AltData(shared_data).table("tweets")
    tables = {"tweets": scored(tweets, text="text", score=score_headline, key=normalise)}
    table = series(tables, ["AAPL"], through=date(2015, 12, 31))
    bars = pd.read_csv(shared_data / "ohlcv" / "daily" / "AAPL.csv", index_col=0, parse_dates=True)
    bars = bars.loc["2014-01-01":"2015-12-31", ["open", "high", "low", "close", "volume"]]
    days = [date_key(d.date()) for d in bars.index]
    for spec in (momentum_spec(), momentum_spec({"smooth": 1, "lookback": 20}, long_short=True)):
        want = decisions(spec, table["tweets"]["AAPL"], days)
        assert len(want) > 20
        assert _orders(render(spec, table), bars) == want
