"""Post-earnings-announcement drift (``strategies.earnings_drift``, ``swarm/families/``): a
report reaches no bar before it was known, the search's code carries no report after the
in-sample end, the code is valid and trades where it should, and proposals are fresh and
reproducible."""

from __future__ import annotations

import ast
import random
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import backtrader as bt
import pandas as pd
import pytest

from altdata.corpus import AltData
from backtest.splits import TimeSplit
from strategies.earnings_drift import (
    CLASS_NAME,
    KIND,
    Event,
    drift_spec,
    events,
    first_tradable,
    propose,
    render,
    signature,
)
from strategies.family_api import FamilyPlugin
from strategies.validate import validate_code
from swarm.errors import UserInputError
from swarm.families import registry

pytestmark = pytest.mark.unit

HEADER = "report_date,ticker,fiscal_qtr,eps_consensus_est,eps_reported,surprise,release_time\n"
# Tuesday 2015-01-27: one report before the open, one after the close; Friday 2015-01-30
# after the close (tradable Monday); one with no consensus (left out).
ROWS = """2015-01-27,PRE,14-Dec,1.00,1.10,0.10,pre
2015-01-27,POST,14-Dec,2.00,2.50,0.50,post
2015-01-30,FRI,14-Dec,1.00,0.80,-0.20,post
2015-01-27,ZERO,14-Dec,0,0.02,0.02,post
2015-04-28,POST,15-Mar,2.00,1.00,-1.00,post
"""


def _alt(tmp_path: Path, rows: str = ROWS) -> Path:
    (tmp_path / "analyst").mkdir()
    (tmp_path / "fundamentals").mkdir()  # two folders of the five: laid out like the corpus
    (tmp_path / "analyst" / "earnings_surprises_2012_2019.csv").write_text(HEADER + rows)
    return tmp_path


def _table(tmp_path: Path):
    return AltData(_alt(tmp_path)).table("surprises")


def _events_in(code: str) -> dict[str, tuple[tuple[int, float], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EVENTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no EVENTS table")


def test_a_post_close_report_is_first_tradable_the_next_session_a_pre_open_one_that_day(
    tmp_path,
):
    table = events(_table(tmp_path), ["PRE", "POST", "FRI", "ZERO"], through=date(2015, 12, 31))
    assert table["PRE"] == (Event(20150127, 10.0),)
    assert table["POST"] == (Event(20150128, 25.0), Event(20150429, -50.0))
    assert table["FRI"] == (Event(20150202, -20.0),)  # Friday after the close: Monday
    assert table["ZERO"] == ()  # no consensus to scale the surprise by


def test_a_report_is_cut_by_when_it_was_known_not_by_its_date(tmp_path):
    table = _table(tmp_path)
    on_the_day = events(table, ["PRE", "POST"], through=date(2015, 1, 27))
    assert on_the_day == {"PRE": (Event(20150127, 10.0),), "POST": ()}  # post: after the close
    assert events(table, ["POST"], through=date(2015, 1, 28))["POST"] == (Event(20150128, 25.0),)
    assert events(table, ["PRE"], through=date(2015, 1, 26))["PRE"] == ()


def test_first_tradable_on_a_holiday_report_is_the_next_session():
    # 2015-07-03 (Friday) was an NYSE holiday: known "before its open" means Monday's.
    assert first_tradable(pd.Timestamp("2015-07-03 13:30", tz="UTC")) == date(2015, 7, 6)
    assert first_tradable(pd.Timestamp("2015-07-02 20:30", tz="UTC")) == date(2015, 7, 6)


def _run(root: Path, symbols: list[str]) -> SimpleNamespace:
    written: dict[str, str] = {}
    folder = SimpleNamespace(write_text=lambda rel, text: written.__setitem__(rel, text))
    return SimpleNamespace(
        config=SimpleNamespace(alt_data=root, data_dir=None),
        symbols=symbols,
        run=folder,
        split=TimeSplit(
            insample_start=date(2014, 1, 2),
            insample_end=date(2015, 1, 27),
            holdout_start=date(2015, 1, 28),
            holdout_end=date(2015, 12, 31),
        ),
        written=written,
    )


def test_the_search_code_has_no_report_after_the_in_sample_end_the_holdout_code_has(tmp_path):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["PRE", "POST", "FRI"])
    spec = drift_spec()
    code = plugin.code(run, spec)
    assert _events_in(code) == {"PRE": ((20150127, 10.0),), "POST": (), "FRI": ()}
    variant = {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}
    held = plugin.holdout_variant(run, variant)
    assert held["code"] != code and run.written == {"strategies/i01-v01.holdout.py": held["code"]}
    later = _events_in(held["code"])
    assert later["POST"] == ((20150128, 25.0), (20150429, -50.0))


def test_real_corpus_search_code_stops_at_the_in_sample_end(shared_data):
    plugin = registry().for_kind(KIND)
    run = _run(shared_data, ["AAPL", "MSFT"])
    table = _events_in(plugin.code(run, drift_spec()))
    days = [day for rows in table.values() for day, _ in rows]
    assert days and max(days) <= 20150127
    assert (20150128, round(100 * (3.06 - 2.6) / 2.6, 4)) not in table["AAPL"]  # known after close


def test_without_surprises_the_error_names_the_fix(tmp_path):
    run = _run(tmp_path, ["AAPL"])
    with pytest.raises(UserInputError, match="--alt-data"):
        registry().for_kind(KIND).code(run, drift_spec())


def test_a_run_naming_the_family_without_its_data_exits_at_start_up(tmp_path, shared_data):
    from swarm.develop import build_parser, config_from_args

    argv = [
        "--directive",
        "alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(shared_data / "ohlcv" / "daily"),
        "--start",
        "2014-01-01",
        "--end",
        "2018-12-31",
        "--offline",
        "--families",
        KIND,
    ]
    config, _ = config_from_args(build_parser().parse_args(argv))  # the corpus: found
    assert KIND in config.families
    empty = tmp_path / "alt"
    empty.mkdir()
    with pytest.raises(
        UserInputError, match=f"--families {KIND}: no earnings surprises.*--alt-data"
    ):
        config_from_args(build_parser().parse_args([*argv, "--alt-data", str(empty)]))


def test_the_plugin_is_discovered_with_its_kind_and_slots():
    plugin = registry().for_kind(KIND)
    assert isinstance(plugin, FamilyPlugin) and KIND in registry().known()
    assert (plugin.scope, plugin.self_proposing, plugin.repairable) == ("symbol", True, False)
    assert not plugin.screens(drift_spec())
    assert plugin.slots([KIND], 6, 2) == 6
    assert plugin.slots([KIND, "momentum"], 6, 2) == 3
    assert plugin.slots([KIND, "momentum"], 1, 2) == 1
    assert plugin.slots(["momentum"], 6, 2) == 0


@pytest.mark.parametrize("long_short", [False, True])
def test_the_code_is_valid(long_short):
    spec = drift_spec({"surprise_pct": 7, "hold_bars": 33}, long_short=long_short)
    assert spec.parameters == {"surprise_pct": 5.0, "hold_bars": 40, "entry_delay": 0}  # snapped
    code = render(spec, {"AAPL": (Event(20150128, 12.5),), "MSFT": ()})
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == CLASS_NAME
    compile(code, "<earnings_drift>", "exec")


def _bars() -> pd.DataFrame:
    days = pd.bdate_range("2015-01-02", periods=60)
    close = pd.Series(range(100, 160), index=days, dtype=float)
    return pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1000.0}
    )


def _trades(code: str, name: str) -> list[tuple[date, date, float]]:
    """(entry fill day, exit fill day, size) of each trade under plain backtrader."""
    namespace: dict = {}
    exec(compile(code, "<earnings_drift>", "exec"), namespace)
    fills: list = []

    class Recorded(namespace[CLASS_NAME]):
        def notify_order(self, order):
            super().notify_order(order)
            if order.status == order.Completed:
                fills.append((self.data.datetime.date(0), order.executed.size))

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=_bars()), name=name)
    cerebro.addstrategy(Recorded)
    cerebro.broker.setcash(100_000)
    cerebro.run()
    return [(a[0], b[0], a[1]) for a, b in zip(fills[::2], fills[1::2], strict=False)]


def test_it_enters_after_the_first_tradable_bar_and_holds_the_period():
    spec = drift_spec({"surprise_pct": 5, "hold_bars": 10, "entry_delay": 2})
    code = render(spec, {"AAPL": (Event(20150114, 8.0), Event(20150302, 2.0)), "MSFT": ()})
    ((entry, exit_, size),) = _trades(code, "AAPL")
    # decided on 2015-01-14 + 2 bars (Jan 16), filled at the next open; out 10 bars later
    assert (entry, exit_) == (date(2015, 1, 19), date(2015, 2, 2)) and size > 0
    assert _trades(code, "MSFT") == []  # its own reports: none


def test_long_short_shorts_a_miss_and_long_only_ignores_it():
    table = {"AAPL": (Event(20150114, -8.0),)}
    short = render(drift_spec({"hold_bars": 5}, long_short=True), table)
    ((entry, _, size),) = _trades(short, "AAPL")
    assert entry == date(2015, 1, 15) and size < 0
    assert _trades(render(drift_spec({"hold_bars": 5}), table), "AAPL") == []


@pytest.mark.parametrize("route", ["INITIAL", "RESEARCH", "TUNE", "FIX", "REFINE"])
def test_proposals_are_fresh_and_deterministic(route):
    first = propose(route="INITIAL", n=3, rng=random.Random(0), seen=set(), best=None)
    seen = {p.spec.trial_key() for p in first}
    best = ("i01-v02", first[1].spec) if route in ("TUNE", "FIX", "REFINE") else None
    again = [
        propose(route=route, n=5, rng=random.Random(7), seen=seen, best=best) for _ in range(2)
    ]
    assert [p.spec for p in again[0]] == [p.spec for p in again[1]]
    keys = [p.spec.trial_key() for p in again[0]]
    assert len(keys) == 5 == len(set(keys)) and not set(keys) & seen
    assert len({p.spec.name for p in again[0]}) == 5
    if best is not None:
        assert all(p.parent_id == "i01-v02" for p in again[0])
    if route == "REFINE":
        assert again[0][0].spec.long_short != best[1].long_short
    if route == "TUNE":  # grid steps from the best: single moves first, then pairs
        moved = [
            sum(p.spec.parameters[k] != best[1].parameters[k] for k in best[1].parameters)
            for p in again[0]
        ]
        assert moved == sorted(moved) and set(moved) <= {1, 2} and moved[0] == 1


def test_proposals_run_on_past_the_listed_ideas():
    seen: set[str] = set()
    rng = random.Random(1)
    for _ in range(6):
        props = propose(route="RESEARCH", n=4, rng=rng, seen=seen, best=None)
        assert len(props) == 4
        keys = {p.spec.trial_key() for p in props}
        assert not keys & seen
        seen |= keys


def test_no_proposal_trades_exactly_as_the_best_or_another_proposal():
    beats = {"AAPL": (Event(20150128, 8.0), Event(20150428, 30.0)), "MSFT": (Event(20150124, 3.0),)}
    best = ("i01-v01", drift_spec())
    refine = propose(route="REFINE", n=4, rng=random.Random(0), seen=set(), best=best, table=beats)
    assert all(not p.spec.long_short for p in refine)  # no miss to short: the flip is inert
    signatures = {signature(p.spec, beats) for p in refine} | {signature(best[1], beats)}
    assert len(signatures) == len(refine) + 1
    misses = beats | {"MSFT": (Event(20150124, -8.0),)}
    flipped = propose(
        route="REFINE", n=4, rng=random.Random(0), seen=set(), best=best, table=misses
    )
    assert flipped[0].spec.long_short and flipped[0].why == "refine: long/short"
    initial = propose(
        route="INITIAL", n=8, rng=random.Random(0), seen=set(), best=None, table=beats
    )
    assert len({signature(p.spec, beats) for p in initial}) == len(initial) == 8


def test_inert_trials_are_judged_on_the_reports_a_fold_can_trade(tmp_path):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["PRE", "POST"])
    run.folds = [SimpleNamespace(start=date(2015, 2, 5))]  # margin: the longest entry delay
    assert plugin.scored_events(run) == {"PRE": (Event(20150127, 10.0),), "POST": ()}
    run.folds = [SimpleNamespace(start=date(2015, 3, 2))]  # before it: warm-up, no order
    assert plugin.scored_events(run) == {"PRE": (), "POST": ()}
