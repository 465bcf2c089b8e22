"""The value/quality cross-section (``strategies.value_quality``, ``swarm/families/``): a
statement reaches no bar before it was known, per-share figures sit on the prices' split
basis, the search's code carries no statement after the in-sample end, the code is valid and
holds what it ranks best, stale or missing statements mean cash, and proposals are fresh."""

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
from strategies.family_api import FamilyPlugin
from strategies.validate import validate_code
from strategies.value_quality import (
    CLASS_NAME,
    KIND,
    Snapshot,
    effective,
    propose,
    render,
    snapshots,
    vq_spec,
)
from swarm.errors import UserInputError
from swarm.families import registry

pytestmark = pytest.mark.unit

COLUMNS = (
    "ticker,period_end,net_income,earnings_per_share,estimated_shares_outstanding,"
    "total_revenue,operating_income,gross_profit,total_equity,net_cash_flow_operating,"
    "capital_expenditures\n"
)
# Period end 2014-12-31 + 90 days = 2015-03-31 (a Tuesday): known at the open of the first
# session after it, Wednesday 2015-04-01. CHEAP earns 10 a share at any price near 100; DEAR
# earns 1; SPLIT reports 700 M shares before AAPL's 7:1 split of 2014-06-09... as AAPL.
ROWS = """CHEAP,2014-12-31,1000,10,100,5000,1500,2500,4000,1200,-200
DEAR,2014-12-31,100,1,100,5000,250,1000,4000,150,-50
AAPL,2013-09-28,37037000000,40.03,925248562,170910000000,48999000000,64304000000,123549000000,53666000000,-8165000000
"""


def _alt(tmp_path: Path, rows: str = ROWS) -> Path:
    (tmp_path / "fundamentals").mkdir()
    (tmp_path / "analyst").mkdir()  # two folders of the five: laid out like the corpus
    (tmp_path / "fundamentals" / "annual_statements_2012_2016.csv").write_text(COLUMNS + rows)
    return tmp_path


def _table(tmp_path: Path):
    return AltData(_alt(tmp_path)).table("statements")


def _snapshots_in(code: str) -> dict[str, tuple[tuple, ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SNAPSHOTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no SNAPSHOTS table")


def test_a_statement_is_first_tradable_the_session_after_period_end_plus_90_days(tmp_path):
    table = _table(tmp_path)
    assert snapshots(table, ["CHEAP"], through=date(2015, 3, 31)) == {"CHEAP": ()}
    (cheap,) = snapshots(table, ["CHEAP"], through=date(2015, 4, 1))["CHEAP"]
    assert (cheap.day, cheap.period_end) == (20150401, 20141231)
    assert cheap.eps == 10.0 and cheap.fcf_ps == 10.0 and cheap.book_ps == 40.0
    assert (cheap.op_margin, cheap.gross_margin, cheap.roe) == (0.3, 0.5, 0.25)


def test_per_share_figures_are_put_on_the_prices_split_basis(tmp_path):
    (aapl,) = snapshots(_table(tmp_path), ["AAPL"], through=date(2015, 1, 2))["AAPL"]
    # FY2013 EPS 40.03 as reported; the corpus closes are adjusted for 7:1 (2014) and 4:1 (2020)
    assert aapl.eps == pytest.approx(40.03 / 28, rel=1e-6)
    assert aapl.day == 20131230  # 2013-09-28 + 90 days = 2013-12-27 (Fri): Monday's session


def test_a_statement_planted_one_bar_ahead_is_invisible(tmp_path):
    # Known at the open of 2015-04-01: the bar of 2015-03-31 cannot see it, in the table or
    # in the code the trusted side renders for a window ending that day.
    run = _run(_alt(tmp_path), ["CHEAP", "DEAR"], insample_end=date(2015, 3, 31))
    code = registry().for_kind(KIND).code(run, vq_spec())
    assert _snapshots_in(code) == {"CHEAP": (), "DEAR": ()}


def _run(root: Path, symbols: list[str], insample_end: date) -> SimpleNamespace:
    written: dict[str, str] = {}
    folder = SimpleNamespace(write_text=lambda rel, text: written.__setitem__(rel, text))
    return SimpleNamespace(
        config=SimpleNamespace(alt_data=root, data_dir=None),
        symbols=symbols,
        run=folder,
        progress=None,
        split=TimeSplit(
            insample_start=date(2014, 1, 2),
            insample_end=insample_end,
            holdout_start=date(2015, 4, 1),
            holdout_end=date(2015, 12, 31),
        ),
        written=written,
    )


def test_the_search_code_stops_at_the_in_sample_end_and_the_holdout_code_does_not(tmp_path):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["CHEAP", "DEAR"], insample_end=date(2015, 3, 31))
    spec = vq_spec()
    code = plugin.code(run, spec)
    variant = {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}
    held = plugin.holdout_variant(run, variant)
    assert run.written == {"strategies/i01-v01.holdout.py": held["code"]}
    later = _snapshots_in(held["code"])
    assert [row[0] for row in later["CHEAP"]] == [20150401]
    through = plugin.code_through(run, spec, date(2015, 4, 1))
    assert _snapshots_in(through) == later


def test_real_corpus_statements_cover_the_tech_names_and_stop_at_the_cut(shared_data):
    table = AltData(shared_data).table("statements")
    cut = snapshots(table, ["AAPL", "MSFT", "NVDA", "GOOGL"], through=date(2015, 6, 30))
    assert cut["GOOGL"] == ()  # the corpus has no Alphabet statements: never ranked
    assert all(cut[t] for t in ("AAPL", "MSFT", "NVDA"))
    assert max(s.day for rows in cut.values() for s in rows) <= 20150630
    assert all(s.eps is not None and s.op_margin is not None for s in cut["MSFT"])


@pytest.mark.parametrize("long_short", [False, True])
def test_the_code_is_valid(long_short, tmp_path):
    table = snapshots(_table(tmp_path), ["CHEAP", "DEAR"], through=date(2015, 12, 31))
    code = render(vq_spec(long_short=long_short), table)
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == CLASS_NAME


def _bars(start: str, n: int, price: float) -> pd.DataFrame:
    index = pd.bdate_range(start, periods=n)
    return pd.DataFrame(
        {"open": price, "high": price, "low": price, "close": price, "volume": 1e6},
        index=index,
    )


def _holdings(code: str, feeds: dict[str, pd.DataFrame]) -> list[dict[str, float]]:
    """Each bar's position sizes by feed name, from a plain-backtrader run of ``code``."""
    namespace: dict = {}
    exec(compile(code, "vq", "exec"), namespace)
    seen: list[dict[str, float]] = []

    class Probe(namespace[CLASS_NAME]):
        def next(self):
            super().next()
            seen.append({d._name: self.getposition(d).size for d in self.datas})

    cerebro = bt.Cerebro(stdstats=False)
    for name, frame in feeds.items():
        cerebro.adddata(bt.feeds.PandasData(dataname=frame), name=name)
    cerebro.addstrategy(Probe, rebalance_bars=1)
    cerebro.broker.setcash(100_000)
    cerebro.run()
    return seen


def _snap(day: int, eps: float, period_end: int = 20141231) -> Snapshot:
    return Snapshot(day, period_end, eps, eps, 4 * eps, 0.3, 0.5, 0.25)


def test_it_holds_the_best_ranked_only_from_the_first_tradable_bar_and_cash_when_stale():
    # 2015-03-02..: CHEAP and DEAR at 100; CHEAP earns 10, DEAR 1 (same quality): pure value
    # holds CHEAP. NONE has no statement: never held. Known 2015-03-16; stale after
    # 2014-12-31 + 455 days = 2016-03-30.
    feeds = {s: _bars("2015-03-02", 300, 100.0) for s in ("CHEAP", "DEAR", "NONE")}
    table = {"CHEAP": (_snap(20150316, 10.0),), "DEAR": (_snap(20150316, 1.0),), "NONE": ()}
    spec = vq_spec({"value_weight": 1.0, "top_n": 1, "max_age_days": 455})
    held = _holdings(render(spec, table), feeds)
    days = list(feeds["CHEAP"].index)
    first = days.index(pd.Timestamp("2015-03-16"))
    assert all(not any(h.values()) for h in held[: first + 1])  # decided at its close
    assert held[first + 1]["CHEAP"] > 0 and held[first + 1]["DEAR"] == 0  # filled next open
    assert all(h["NONE"] == 0 and h["DEAR"] == 0 for h in held)
    stale = days.index(pd.Timestamp("2016-03-31"))
    assert held[stale - 1]["CHEAP"] > 0 and held[stale + 1]["CHEAP"] == 0  # cash once stale


def test_long_short_shorts_the_worst_and_a_later_statement_replaces_the_older():
    feeds = {s: _bars("2015-03-02", 120, 100.0) for s in ("CHEAP", "DEAR")}
    table = {
        "CHEAP": (_snap(20150316, 10.0),),
        "DEAR": (_snap(20150316, 1.0), _snap(20150504, 20.0, period_end=20150331)),
    }
    spec = vq_spec({"value_weight": 1.0, "top_n": 1}, long_short=True)
    held = _holdings(render(spec, table), feeds)
    days = list(feeds["CHEAP"].index)
    before = days.index(pd.Timestamp("2015-04-30"))
    after = days.index(pd.Timestamp("2015-05-06"))
    assert held[before]["CHEAP"] > 0 > held[before]["DEAR"]
    assert held[after]["DEAR"] > 0 > held[after]["CHEAP"]  # DEAR now earns 20 a share


@pytest.mark.parametrize("route", ["INITIAL", "TUNE", "REFINE", "RESEARCH"])
def test_proposals_are_fresh_and_deterministic(route):
    best = ("i01-v01", vq_spec())
    seen = {best[1].trial_key()}
    a = propose(route=route, n=6, rng=random.Random(1), seen=seen, best=best)
    b = propose(route=route, n=6, rng=random.Random(1), seen=seen, best=best)
    assert [p.spec for p in a] == [p.spec for p in b] and len(a) == 6
    keys = [p.spec.trial_key() for p in a]
    assert len(set(keys)) == 6 and not set(keys) & seen
    assert all(p.spec.scope == "portfolio" for p in a)
    if route == "REFINE":
        assert a[0].spec.long_short and a[0].parent_id == "i01-v01"


def test_no_proposal_holds_the_same_book_as_another_when_few_symbols_are_ranked():
    props = propose(route="INITIAL", n=40, rng=random.Random(0), seen=set(), best=None, n_ranked=2)
    books = [effective(p.spec, 2).trial_key() for p in props]
    assert len(books) == len(set(books))
    assert all(effective(p.spec, 2).parameters["top_n"] == 1 for p in props)


def test_the_plugin_is_discovered_as_a_portfolio_family_with_its_slots():
    plugin = registry().for_kind(KIND)
    assert isinstance(plugin, FamilyPlugin) and KIND in registry().known()
    assert (plugin.scope, plugin.self_proposing, plugin.repairable) == ("portfolio", True, False)
    assert registry().job_symbols(vq_spec(), ["AAPL", "MSFT"]) == ["PORTFOLIO"]
    assert not plugin.screens(vq_spec())
    assert plugin.slots([KIND], 6, 4) == 6
    assert plugin.slots([KIND, "momentum"], 6, 4) == 3
    assert plugin.slots([KIND], 6, 1) == 0
    assert plugin.slots(["momentum"], 6, 4) == 0


def test_without_statements_the_error_names_the_fix(tmp_path):
    run = _run(tmp_path, ["AAPL", "MSFT"], insample_end=date(2015, 3, 31))
    with pytest.raises(UserInputError, match="--alt-data"):
        registry().for_kind(KIND).code(run, vq_spec())


def test_a_run_naming_the_family_checks_its_statements_at_start_up(tmp_path, shared_data):
    from swarm.develop import build_parser, config_from_args

    argv = [
        "--directive",
        "value and quality in tech",
        "--data-dir",
        str(shared_data / "ohlcv" / "daily"),
        "--start",
        "2013-01-01",
        "--end",
        "2017-12-31",
        "--offline",
    ]
    config, _ = config_from_args(build_parser().parse_args(argv))  # the corpus: found
    assert config.families == [KIND]
    empty = tmp_path / "alt"
    empty.mkdir()
    with pytest.raises(UserInputError, match=f"--families {KIND}: no annual statements"):
        config_from_args(build_parser().parse_args([*argv, "--alt-data", str(empty)]))
    uncovered = [*argv, "--tickers", "GOOGL,ORCL,AAPL", "--families", KIND]
    with pytest.raises(UserInputError, match="a cross-section needs 2"):
        config_from_args(build_parser().parse_args(uncovered))
