"""Analyst-revision drift (``strategies.analyst_revision``, ``swarm/families/``): a rating
action reaches no bar before it was known, the search's code carries no action after the
in-sample end, a consensus counts distinct firms, the code is valid and trades where it should
(through the lab's engine and its books), and proposals are fresh, snapped and reproducible."""

from __future__ import annotations

import ast
import random
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import backtrader as bt
import pandas as pd
import pytest
from conftest import read_real_bars

from altdata.corpus import AltData
from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import execute
from backtest.splits import TimeSplit
from strategies.analyst_revision import (
    CLASS_NAME,
    GRID,
    KIND,
    RATING,
    TARGET,
    Event,
    action_side,
    events,
    firm_key,
    propose,
    render,
    revision_spec,
    signature,
    triggers,
)
from strategies.family_api import FamilyPlugin
from strategies.validate import validate_code
from swarm.errors import UserInputError
from swarm.families import registry

pytestmark = pytest.mark.unit

HEADER = "date,datetime,ticker,firm,action,rating,pt_change,price_target,headline\n"
# Tuesday 2015-01-27 (New York, EST): one upgrade before the open, one during the session,
# one downgrade after the close (tradable Wednesday), one exactly at the close (that day's
# decision, as ``AltTable.as_of_day`` cuts); Friday 2015-01-30 after the close a target raise
# and Saturday an upgrade (both tradable Monday); rows that are no revision are left out.
ROWS = """2015-01-27,2015-01-27T08:00:00-05:00,PRE,JP Morgan,Upgrades,Overweight,,,h
2015-01-27,2015-01-27T08:05:00-05:00,PRE,J.P. Morgan,Upgrades,Overweight,,,h (repeat)
2015-01-27,2015-01-27T08:30:00-05:00,PRE,Benzinga's Top Upgrades,Upgrades,,,,roundup
2015-01-27,2015-01-27T14:00:00-05:00,MID,UBS,Upgrades,Buy,Raises,30,h
2015-01-27,2015-01-27T16:00:00-05:00,EDGE,UBS,Downgrades,Neutral,,,h
2015-01-27,2015-01-27T16:30:00-05:00,POST,Nomura Instinet,Downgrades,Neutral,Raises,20,h
2015-01-28,2015-01-28T09:00:00-05:00,POST,Goldman Sachs,Maintains,Buy,,,no revision
2015-01-30,2015-01-30T17:00:00-05:00,FRI,Nomura,Maintains,Buy,Raises,40,h
2015-01-31,2015-01-31T10:00:00-05:00,SAT,Citigroup,Upgrades,Buy,,,h
2015-04-28,2015-04-28T07:00:00-04:00,POST,Citi,Initiates Coverage On,Buy,Announces,50,no revision
"""
JAN27 = date(2015, 1, 27).toordinal()


def _alt(tmp_path: Path, rows: str = ROWS) -> Path:
    (tmp_path / "analyst").mkdir(parents=True, exist_ok=True)
    (tmp_path / "news").mkdir(exist_ok=True)  # two folders of the five: laid out like the corpus
    (tmp_path / "analyst" / "benzinga_rating_actions_2011_2020.csv").write_text(HEADER + rows)
    return tmp_path


def _table(root: Path):
    return AltData(root).table("ratings")


def _events_in(code: str) -> dict[str, tuple[tuple[int, ...], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EVENTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no EVENTS table")


def _days(table) -> dict[str, list[tuple[int, int, int]]]:
    return {t: [(e.day, e.side, e.kind) for e in rows] for t, rows in table.items()}


# --------------------------------------------------------------------------- the events


def test_a_rows_side_comes_from_its_rating_change_else_its_target_move():
    assert action_side("Upgrades", "Lowers") == (1, RATING)
    assert action_side("Downgrades", "Raises") == (-1, RATING)
    assert action_side("Maintains", "Raises") == (1, TARGET)
    assert action_side("Reiterates", "Lowers") == (-1, TARGET)
    assert action_side("Maintains", float("nan")) is None
    assert action_side("Initiates Coverage On", "Announces") is None


def test_one_firm_under_its_headline_spellings_is_one_firm():
    keys = {firm_key(f) for f in ("B of A Securities", "BofA Securities", "Bank of America")}
    assert keys == {"bofa"}
    assert firm_key("Nomura Instinet") == firm_key("Nomura") != firm_key("UBS")
    assert firm_key("Cowen & Co.") == "cowen" and firm_key(float("nan")) == ""


@pytest.fixture
def table(tmp_path):
    return _table(_alt(tmp_path))


def test_pre_open_and_intraday_actions_reach_that_days_close_after_close_ones_the_next(table):
    found = events(table, ["PRE", "MID", "EDGE", "POST", "FRI", "SAT"], through=date(2015, 12, 31))
    assert _days(found) == {
        "PRE": [(20150127, 1, RATING)],  # before the open; the repeat and the roundup: gone
        "MID": [(20150127, 1, RATING)],  # during the session: before that day's close
        "EDGE": [(20150127, -1, RATING)],  # at the close: the close's decision may know it
        "POST": [(20150128, -1, RATING)],  # after the close: the next session
        "FRI": [(20150202, 1, TARGET)],  # Friday after the close: Monday
        "SAT": [(20150202, 1, RATING)],  # a Saturday: Monday
    }
    assert found["PRE"][0].ordinal == JAN27


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
        folds=[SimpleNamespace(start=date(2014, 6, 2))],
        written=written,
    )


# One bar in the future of the in-sample end (Tuesday 2015-01-27): Wednesday's session, and
# a second after Tuesday's close.
PLANTED = """2015-01-28,2015-01-28T10:00:00-05:00,PRE,Wedbush,Upgrades,Outperform,,,planted
2015-01-27,2015-01-27T16:00:01-05:00,PRE,Needham,Downgrades,Hold,,,planted
"""


def test_an_action_planted_one_bar_in_the_future_reaches_neither_the_events_nor_the_code(
    tmp_path,
):
    clean, planted = _alt(tmp_path / "clean"), _alt(tmp_path / "planted", ROWS + PLANTED)
    end = date(2015, 1, 27)
    symbols = ["PRE", "POST"]
    assert events(_table(planted), symbols, through=end) == events(
        _table(clean), symbols, through=end
    )
    plugin = registry().for_kind(KIND)
    spec = revision_spec({"min_actions": 2, "lookback_days": 5})
    with_plant, without = _run(planted, symbols), _run(clean, symbols)
    code = plugin.code(with_plant, spec)
    assert code == plugin.code(without, spec)
    assert _events_in(code) == {"PRE": ((20150127, JAN27, 1, RATING, 0),), "POST": ()}
    # the holdout's code, cut at the holdout end, does carry them, on Wednesday's bar
    variant = {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}
    held = plugin.holdout_variant(with_plant, variant)
    assert with_plant.written == {"strategies/i01-v01.holdout.py": held["code"]}
    later = [(d, s) for d, _, s, _, _ in _events_in(held["code"])["PRE"]]
    assert later == [(20150127, 1), (20150128, -1), (20150128, 1)]


def test_the_search_code_on_the_real_corpus_stops_at_the_in_sample_end(shared_data):
    plugin = registry().for_kind(KIND)
    run = _run(shared_data, ["NVDA", "AAPL"])
    table = _events_in(plugin.code(run, revision_spec()))
    days = [row[0] for rows in table.values() for row in rows]
    assert days and max(days) <= 20150127 and table["AAPL"] == ()  # AAPL's start in 2020
    held = _events_in(plugin.holdout_variant(run, _variant(run))["code"])
    assert max(row[0] for row in held["NVDA"]) > 20150127


def _variant(run: SimpleNamespace) -> dict:
    spec = revision_spec()
    code = registry().for_kind(KIND).code(run, spec)
    return {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}


# --------------------------------------------------------------------------- consensus


def _e(day: int, side: int, firm: int, kind: int = RATING) -> Event:
    d = date(day // 10000, day // 100 % 100, day % 100)
    return Event(day, d.toordinal(), side, kind, firm)


def test_a_consensus_counts_distinct_firms_within_the_lookback():
    rows = [
        _e(20150105, 1, 0),
        _e(20150106, 1, 0),  # the same firm again: still one firm
        _e(20150112, 1, 1),  # a second firm 7 days after the first
        _e(20150302, 1, 2),  # alone again
    ]
    one = dict(min_actions=1, lookback_days=5, count_targets=False)
    assert triggers(rows, **one) == [(20150105, 1), (20150106, 1), (20150112, 1), (20150302, 1)]
    assert triggers(rows, **one | {"min_actions": 2}) == []  # 7 days apart: not within 5
    assert triggers(rows, **one | {"min_actions": 2, "lookback_days": 10}) == [(20150112, 1)]
    assert triggers(rows, **one | {"min_actions": 3, "lookback_days": 60}) == [(20150302, 1)]


def test_target_moves_count_only_when_asked_and_a_split_day_triggers_nothing():
    rows = [_e(20150105, 1, 0, TARGET), _e(20150106, 1, 1)]
    rows += [_e(20150107, -1, 2), _e(20150107, -1, 3), _e(20150107, 1, 4)]
    kw = dict(min_actions=2, lookback_days=10)
    # 20150107: two firms down, two up (firms 1 and 4): both ways, so no trigger
    assert triggers(rows, **kw, count_targets=False) == []
    # the target raise of firm 0 makes 20150106 a consensus of two
    assert triggers(rows, **kw, count_targets=True) == [(20150106, 1)]


# --------------------------------------------------------------------------- specs, proposals


def test_specs_are_snapped_to_the_grid_and_named_by_every_parameter():
    spec = revision_spec(
        {
            "min_actions": 7,
            "lookback_days": 13,
            "hold_bars": 33,
            "entry_delay": 4,
            "count_targets": 0.8,
        }
    )
    assert spec.parameters == {
        "min_actions": 3,
        "lookback_days": 10,
        "hold_bars": 40,
        "entry_delay": 5,
        "count_targets": 1,
    }
    assert all(v in GRID[k] for k, v in spec.parameters.items())
    assert spec.name == f"{KIND}-long | ratings+targets, 3 firm(s) in 10d, hold 40, delay 5"


@pytest.mark.parametrize("route", ["INITIAL", "RESEARCH", "TUNE", "FIX", "REFINE"])
def test_proposals_are_fresh_snapped_and_deterministic(route):
    first = propose(route="INITIAL", n=3, rng=random.Random(0), seen=set(), best=None)
    seen = {p.spec.trial_key() for p in first}
    best = ("i01-v02", first[1].spec) if route in ("TUNE", "FIX", "REFINE") else None
    again = [
        propose(route=route, n=6, rng=random.Random(7), seen=seen, best=best) for _ in range(2)
    ]
    assert [p.spec for p in again[0]] == [p.spec for p in again[1]]
    keys = [p.spec.trial_key() for p in again[0]]
    assert len(keys) == 6 == len(set(keys)) and not set(keys) & seen
    assert len({p.spec.name for p in again[0]}) == 6
    for p in again[0]:
        assert all(v in GRID[k] for k, v in p.spec.parameters.items())
        assert p.spec.family.value == KIND
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
    ups = {"AAPL": (_e(20150128, 1, 0), _e(20150428, 1, 1))}
    best = ("i01-v01", revision_spec())
    tune = propose(route="TUNE", n=6, rng=random.Random(0), seen=set(), best=best, table=ups)
    # one firm per trigger: a lookback step, a consensus of 2 or 3, or counting targets trades
    # as the best does (or never); only the holding and the delay can differ
    assert tune and all(
        p.spec.parameters["lookback_days"] == 20 and p.spec.parameters["count_targets"] == 0
        for p in tune
    )
    signatures = {signature(p.spec, ups) for p in tune} | {signature(best[1], ups)}
    assert len(signatures) == len(tune) + 1
    initial = propose(route="INITIAL", n=8, rng=random.Random(0), seen=set(), best=None, table=ups)
    assert len({signature(p.spec, ups) for p in initial}) == len(initial) == 8
    # a trigger before ``start`` cannot place an order: no spec differs by it alone
    assert signature(best[1], ups, start=20150301) == (
        (("AAPL", 20150428, 1),),
        False,
        20,
        0,
    )


# --------------------------------------------------------------------------- the code


@pytest.mark.parametrize("long_short", [False, True])
def test_the_code_is_valid_and_compiles(long_short):
    spec = revision_spec({"min_actions": 2, "count_targets": 1}, long_short=long_short)
    code = render(spec, {"AAPL": (_e(20150128, 1, 0),), "MSFT": ()})
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == CLASS_NAME
    compile(code, "<analyst_revision>", "exec")
    assert ("allow_short", long_short) in _params(code).items()


def _params(code: str) -> dict:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "params":
            return dict(ast.literal_eval(node.value))
    raise AssertionError("no params")


def _bars() -> pd.DataFrame:
    days = pd.bdate_range("2015-01-02", periods=60)
    close = pd.Series([100.0 + i for i in range(60)], index=days)
    return pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6}
    )


def _fills(code: str, symbol: str = "AAPL") -> list[tuple[date, date, str]]:
    """(decision bar, fill bar, side) of each fill the lab's books accepted."""
    bars = _bars()
    first, last = bars.index[0].date(), bars.index[-1].date()
    job = BacktestJob(
        job_id="t",
        variant_id="v",
        code=code,
        symbol=symbol,
        bars=bars,
        fold=Fold(index=0, warmup_start=first, start=first, end=last),
    )
    run = execute(job)
    assert run.result.status == JobStatus.OK, run.result.error
    return [(f.created, f.executed, f.side) for f in run.fills]


def test_it_enters_at_the_first_bar_that_knows_the_action_and_holds_hold_bars():
    spec = revision_spec({"hold_bars": 10, "entry_delay": 2})
    code = render(spec, {"AAPL": (_e(20150114, 1, 0), _e(20150302, -1, 1)), "MSFT": ()})
    # decided on 2015-01-14 + 2 bars (Jan 16), filled at the next open; out 10 bars later
    assert _fills(code) == [
        (date(2015, 1, 16), date(2015, 1, 19), "buy"),
        (date(2015, 1, 30), date(2015, 2, 2), "sell"),
    ]
    assert _fills(code, "MSFT") == []  # its own actions: none


def test_a_consensus_enters_on_the_second_firms_day_and_a_down_one_exits_or_shorts():
    table = {"AAPL": (_e(20150107, 1, 0), _e(20150112, 1, 1))}
    table = {"AAPL": table["AAPL"] + (_e(20150121, -1, 2), _e(20150121, -1, 3))}
    two = render(revision_spec({"min_actions": 2, "lookback_days": 10, "hold_bars": 20}), table)
    assert _fills(two) == [
        (date(2015, 1, 12), date(2015, 1, 13), "buy"),  # the second firm's day, not the first's
        (date(2015, 1, 21), date(2015, 1, 22), "sell"),  # two downgrades close the long early
    ]
    # one firm is enough: long on the 7th, held 5 bars past the second upgrade (the 12th),
    # then short on the downgrades for 5 bars; long only, the downgrades find it flat
    short = render(revision_spec({"hold_bars": 5}, long_short=True), table)
    assert _fills(short) == [
        (date(2015, 1, 7), date(2015, 1, 8), "buy"),
        (date(2015, 1, 19), date(2015, 1, 20), "sell"),
        (date(2015, 1, 21), date(2015, 1, 22), "sell"),
        (date(2015, 1, 28), date(2015, 1, 29), "buy"),
    ]
    assert _fills(render(revision_spec({"hold_bars": 5}), table)) == _fills(short)[:2]


def test_an_action_before_the_first_bar_counts_towards_a_consensus_but_does_not_trigger():
    table = {"AAPL": (_e(20141231, 1, 0), _e(20150105, 1, 1))}
    lone = render(revision_spec({"hold_bars": 5}), {"AAPL": table["AAPL"][:1]})
    assert _fills(lone) == []
    both = render(revision_spec({"min_actions": 2, "lookback_days": 10, "hold_bars": 5}), table)
    assert _fills(both)[0] == (date(2015, 1, 5), date(2015, 1, 6), "buy")


def _triggered(code: str, bars: pd.DataFrame, name: str) -> list[tuple[int, int]]:
    """(yyyymmdd, side) of each bar the strategy triggered on, under plain backtrader (an
    entry delay of 5 keeps the trigger visible after the bar's ``next``)."""
    namespace: dict = {}
    exec(compile(code, "<analyst_revision>", "exec"), namespace)
    seen: list[tuple[int, int]] = []

    class Recorded(namespace[CLASS_NAME]):
        def next(self):
            super().next()
            if self.enter_at == len(self) + self.p.entry_delay:
                day = self.data.datetime.date(0)
                seen.append((day.year * 10000 + day.month * 100 + day.day, self.side))

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=bars), name=name)
    cerebro.addstrategy(Recorded)
    cerebro.run()
    return seen


@pytest.mark.parametrize(
    "params",
    [
        {"min_actions": 1, "count_targets": 0},
        {"min_actions": 2, "lookback_days": 20, "count_targets": 1},
        {"min_actions": 3, "lookback_days": 60, "count_targets": 1},
    ],
)
def test_the_strategy_triggers_exactly_where_the_rule_does_on_the_real_corpus(shared_data, params):
    table = events(_table(shared_data), ["NVDA"], through=date(2016, 12, 30))
    bars = read_real_bars("NVDA", "2012-01-03", "2016-12-30")
    spec = revision_spec(params | {"entry_delay": 5}, long_short=True)
    p = spec.parameters
    expected = triggers(
        table["NVDA"],
        min_actions=p["min_actions"],
        lookback_days=p["lookback_days"],
        count_targets=bool(p["count_targets"]),
    )
    expected = [t for t in expected if t[0] >= 20120104]  # on the first bar: not a trigger
    assert len(expected) >= 5
    assert _triggered(render(spec, table), bars, "NVDA") == expected


# --------------------------------------------------------------------------- the plugin


def test_the_plugin_is_discovered_with_its_kind_and_slots():
    plugin = registry().for_kind(KIND)
    assert isinstance(plugin, FamilyPlugin) and KIND in registry().known()
    assert (plugin.scope, plugin.self_proposing, plugin.repairable) == ("symbol", True, False)
    assert not plugin.screens(revision_spec())
    assert plugin.slots([KIND], 6, 2) == 6
    assert plugin.slots([KIND, "momentum"], 6, 2) == 3
    assert plugin.slots(["momentum"], 6, 2) == 0


def test_without_rating_actions_the_error_names_the_flag_and_the_file(tmp_path):
    run = _run(tmp_path, ["AAPL"])
    with pytest.raises(UserInputError, match="--alt-data.*benzinga_rating_actions_2011_2020"):
        registry().for_kind(KIND).code(run, revision_spec())
    config = SimpleNamespace(alt_data=tmp_path, data_dir=None, families=[KIND])
    with pytest.raises(UserInputError, match=f"--families {KIND}: no analyst rating actions"):
        registry().preflight(config)


def test_a_run_naming_the_family_without_its_data_exits_at_start_up(tmp_path, shared_data):
    from swarm.develop import build_parser, config_from_args

    argv = [
        "--directive",
        "alpha in tech",
        "--tickers",
        "NVDA",
        "--data-dir",
        str(shared_data / "ohlcv" / "daily"),
        "--start",
        "2012-01-01",
        "--end",
        "2016-12-31",
        "--offline",
        "--families",
        KIND,
    ]
    config, _ = config_from_args(build_parser().parse_args(argv))  # the corpus: found
    assert config.families == [KIND]
    empty = tmp_path / "alt"
    empty.mkdir()
    with pytest.raises(UserInputError, match="--alt-data"):
        config_from_args(build_parser().parse_args([*argv, "--alt-data", str(empty)]))
