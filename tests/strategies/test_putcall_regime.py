"""The contrarian put/call regime (``strategies.putcall_regime``, ``swarm/families/``): a day's
ratio reaches no decision before the close after it was published, the search's code carries
no ratio after the in-sample end, the score is the hand-computed one, the code is valid and
trades on the bars it should (in the engine and the sandbox), and proposals are snapped,
fresh and reproducible."""

from __future__ import annotations

import ast
import math
import random
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import read_real_bars
from strategy_bt_helpers import import_backtrader, load_class

from altdata.corpus import AltData
from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.engine import execute
from backtest.lookahead import check_lookahead
from backtest.sandbox import run_sandboxed
from backtest.splits import TimeSplit
from strategies.family_api import FamilyPlugin
from strategies.putcall_regime import (
    CLASS_NAME,
    GRID,
    KIND,
    STALE_DAYS,
    TABLE,
    Point,
    ema_step,
    propose,
    regime_side,
    regime_spec,
    render,
    scores,
    series,
    zscore,
)
from strategies.validate import validate_code
from swarm.errors import UserInputError
from swarm.families import registry

pytestmark = pytest.mark.unit

HEADER = "date,equity_calls,equity_puts,equity_pc,total_pc\n"
# Monday 2015-01-26 .. Wednesday 01-28, Friday 01-30 (next session: Monday 02-02), Thursday
# 2015-07-02 (Friday 07-03 was an NYSE holiday: next session Monday 07-06).
ROWS = """2015-01-26,100,70,0.7,0.9
2015-01-27,100,66,0.66,0.95
2015-01-28,100,999,9.99,9.99
2015-01-30,100,80,0.8,1.1
2015-07-02,100,60,0.6,0.85
"""


def _alt(tmp_path: Path, rows: str = ROWS) -> Path:
    (tmp_path / "options").mkdir()
    (tmp_path / "fundamentals").mkdir()  # two folders of the five: laid out like the corpus
    (tmp_path / "options" / "cboe_putcall_daily_2006_2019.csv").write_text(HEADER + rows)
    return tmp_path


def _table(tmp_path: Path):
    return AltData(_alt(tmp_path)).table(TABLE)


def _series_in(code: str) -> tuple[tuple[int, float], ...]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SERIES":
            return ast.literal_eval(node.value)
    raise AssertionError("no SERIES in the code")


# --------------------------------------------------------------------------- point in time


def test_a_days_ratio_is_keyed_by_the_next_session(tmp_path):
    table = series(_table(tmp_path), through=date(2015, 12, 31))
    assert table[False] == (
        Point(20150127, 0.7),
        Point(20150128, 0.66),
        Point(20150129, 9.99),
        Point(20150202, 0.8),  # Friday's ratio: Monday's decision
        Point(20150706, 0.6),  # before a holiday: the session after it
    )
    assert [p.ratio for p in table[True]] == [0.9, 0.95, 9.99, 1.1, 0.85]


def test_the_days_ratio_and_a_later_one_are_invisible_at_its_close(tmp_path):
    table = _table(tmp_path)
    # At Tuesday 01-27's close: Monday's ratio only; Tuesday's own (published after its
    # close) and Wednesday's planted one are not known yet.
    assert series(table, through=date(2015, 1, 27))[False] == (Point(20150127, 0.7),)
    assert series(table, through=date(2015, 1, 28))[False] == (
        Point(20150127, 0.7),
        Point(20150128, 0.66),
    )
    code = render(regime_spec(), series(table, through=date(2015, 1, 27)))
    assert _series_in(code) == ((20150127, 0.7),)
    assert "9.99" not in code and "0.66" not in code
    assert series(table, through=date(2015, 1, 23)) == {False: (), True: ()}


def _run(root: Path, insample_end: date, holdout_end: date) -> SimpleNamespace:
    written: dict[str, str] = {}
    warnings: list[str] = []
    return SimpleNamespace(
        config=SimpleNamespace(alt_data=root, data_dir=None),
        symbols=["SPY"],
        run=SimpleNamespace(write_text=lambda rel, text: written.__setitem__(rel, text)),
        progress=SimpleNamespace(warn=warnings.append),
        split=TimeSplit(
            insample_start=date(2014, 1, 2),
            insample_end=insample_end,
            holdout_start=date.fromordinal(insample_end.toordinal() + 1),
            holdout_end=holdout_end,
        ),
        written=written,
        warnings=warnings,
    )


def test_the_search_code_stops_at_the_in_sample_end_the_holdout_code_goes_on(tmp_path):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), date(2015, 1, 28), date(2015, 1, 30))
    spec = regime_spec({"total_ratio": True})
    code = plugin.code(run, spec)
    assert _series_in(code) == ((20150127, 0.9), (20150128, 0.95))
    variant = {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}
    held = plugin.holdout_variant(run, variant)
    assert run.written == {"strategies/i01-v01.holdout.py": held["code"]}
    assert _series_in(held["code"]) == ((20150127, 0.9), (20150128, 0.95), (20150129, 9.99))
    assert run.warnings == []  # both windows end where the series does


def test_real_corpus_search_code_stops_at_the_in_sample_end(shared_data):
    run = _run(shared_data, date(2015, 1, 27), date(2015, 12, 31))
    keys = [day for day, _ in _series_in(registry().for_kind(KIND).code(run, regime_spec()))]
    assert keys == sorted(keys) and keys[0] == 20061102 and keys[-1] == 20150127
    assert len(keys) > 2000


def test_a_window_past_the_series_warns_and_renders(tmp_path, capsys):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), date(2015, 12, 31), date(2016, 6, 30))
    code = plugin.code(run, regime_spec())
    assert _series_in(code)[-1] == (20150706, 0.6)
    (warning,) = run.warnings
    assert "series ends" in warning and "flat after 2015-07-13" in warning
    config = SimpleNamespace(
        alt_data=run.config.alt_data, data_dir=None, end=date(2016, 6, 30), families=[KIND]
    )
    plugin.preflight(config)
    assert "flat after 2015-07-13" in capsys.readouterr().err


def test_without_ratios_the_error_names_the_flag_and_the_file(tmp_path):
    empty = tmp_path / "alt"
    (empty / "options").mkdir(parents=True)
    (empty / "fundamentals").mkdir()
    config = SimpleNamespace(alt_data=empty, data_dir=None, end=date(2016, 1, 1))
    with pytest.raises(UserInputError, match="--alt-data.*cboe_putcall_daily_2006_2019.csv"):
        registry().for_kind(KIND).preflight(config)
    run = _run(empty, date(2015, 1, 2), date(2015, 6, 1))
    with pytest.raises(UserInputError, match=f"--families {KIND}: no put/call ratios"):
        registry().for_kind(KIND).code(run, regime_spec())


def test_the_family_name_validates_on_the_command_line(shared_data):
    from swarm.develop import build_parser, config_from_args

    argv = [
        "--directive",
        "contrarian put/call",
        "--tickers",
        "SPY",
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
    config, _ = config_from_args(build_parser().parse_args(argv))
    assert config.families == [KIND]


def test_the_plugin_is_discovered_with_its_kind_and_slots():
    plugin = registry().for_kind(KIND)
    assert isinstance(plugin, FamilyPlugin) and KIND in registry().known()
    assert (plugin.scope, plugin.self_proposing, plugin.repairable) == ("symbol", True, False)
    assert not plugin.screens(regime_spec())
    assert plugin.slots([KIND], 5, 1) == 5
    assert plugin.slots([KIND, "momentum"], 5, 1) == 2
    assert plugin.slots(["momentum"], 5, 1) == 0


# --------------------------------------------------------------------------- the signal


def test_ema_and_zscore_by_hand():
    assert ema_step(None, 2.0, 3) == 2.0  # seeds
    assert ema_step(2.0, 4.0, 3) == pytest.approx(3.0)  # alpha = 2 / (3 + 1)
    assert ema_step(2.0, 4.0, 1) == 4.0  # span 1: the raw value
    # mean 2.5, sample variance (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3
    assert zscore([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.5 / math.sqrt(5 / 3))
    assert zscore([0.7, 0.7, 0.7]) is None and zscore([0.7]) is None


def test_scores_agree_with_pandas():
    rng = random.Random(5)
    ratios = [round(0.5 + rng.random() * 0.4, 2) for _ in range(300)]
    got = scores(ratios, span=5, lookback=60)
    level = pd.Series(ratios).ewm(span=5, adjust=False).mean()
    roll = level.rolling(60)
    want = (level - roll.mean()) / roll.std(ddof=1)
    assert got[:59] == [None] * 59
    assert got[59:] == pytest.approx(want.iloc[59:].tolist(), rel=1e-9)


def test_regime_side_rules():
    args = {"entry_z": 1.5, "exit_z": 0.5, "hold_bars": 3, "allow_short": False}
    assert regime_side(1.5, 0, 0, 0, **args) == (1, 0)  # fear: in
    assert regime_side(1.4, 0, 0, 0, **args) == (0, 0)
    assert regime_side(0.6, 1, 2, 0, **args) == (1, 0)  # still above the exit
    assert regime_side(0.4, 1, 2, 0, **args) == (0, 0)  # below it: out
    assert regime_side(2.0, 1, 3, 0, **args) == (0, 1)  # held hold_bars: out, blocked
    assert regime_side(2.0, 0, 0, 1, **args) == (0, 1)  # the same regime: no re-entry
    assert regime_side(0.4, 0, 0, 1, **args) == (0, 0)  # regime over: unblocked
    assert regime_side(-2.0, 0, 0, 0, **args) == (0, 0)  # long only: no short
    assert regime_side(None, 1, 1, 1, **args) == (0, 0)  # no score: flat
    both = args | {"allow_short": True}
    assert regime_side(-1.5, 0, 0, 0, **both) == (-1, 0)  # complacency: short
    assert regime_side(-0.6, -1, 1, 0, **both) == (-1, 0)
    assert regime_side(-0.4, -1, 1, 0, **both) == (0, 0)
    assert regime_side(-2.0, 1, 1, 0, **both) == (-1, 0)  # straight from fear to complacency


# --------------------------------------------------------------------------- the code

BAR_DAYS = pd.bdate_range("2015-01-02", periods=60)


def _bars() -> pd.DataFrame:
    close = pd.Series([100.0 + i for i in range(60)], index=BAR_DAYS)
    frame = pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6}
    )
    frame.index.name = "date"
    return frame


def _key(day: pd.Timestamp) -> int:
    return day.year * 10000 + day.month * 100 + day.day


def _series(spikes: dict[int, float], *, until: int = 60) -> dict[bool, tuple[Point, ...]]:
    """40 warm-up ratios before the bars, then one per bar (bar index -> planted ratio), all
    alternating 0.6 / 0.7 otherwise, keyed by the bar that may first read them."""
    warm = pd.bdate_range(end="2014-12-31", periods=40)
    points = [Point(_key(d), 0.6 + 0.1 * (i % 2)) for i, d in enumerate(warm)]
    points += [
        Point(_key(d), spikes.get(i, 0.6 + 0.1 * (i % 2))) for i, d in enumerate(BAR_DAYS[:until])
    ]
    return {False: tuple(points), True: ()}


FOLD = Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 1, 2), end=date(2015, 3, 26))


def _job(code: str) -> BacktestJob:
    return BacktestJob(job_id="j", variant_id="v", code=code, symbol="SPY", bars=_bars(), fold=FOLD)


def _fills(code: str) -> list[tuple[date, date, str]]:
    """(decided, filled, side) of each fill through the engine and its books (costs on)."""
    run = execute(_job(code))
    assert run.result.status == JobStatus.OK, run.result.error
    return [(f.created, f.executed, f.side) for f in run.fills]


def _day(i: int) -> date:
    return BAR_DAYS[i].date()


SPEC = {"span": 1, "lookback": 20, "entry_z": 1.5, "exit_z": 0.5, "hold_bars": 40}


@pytest.mark.parametrize("long_short", [False, True])
def test_the_code_is_valid(long_short):
    spec = regime_spec({"lookback": 70, "entry_z": 1.2, "exit_z": 2.0}, long_short=long_short)
    assert spec.parameters == {  # snapped, the exit below the entry
        "total_ratio": False,
        "span": 5,
        "lookback": 60,
        "entry_z": 1.0,
        "exit_z": 0.5,
        "hold_bars": 20,
    }
    code = render(spec, _series({}))
    report = validate_code(code)
    assert report.ok, report.errors
    assert report.class_name == CLASS_NAME
    compile(code, "<putcall_regime>", "exec")


def test_a_spike_is_read_on_its_key_bar_and_filled_at_the_next_open():
    code = render(regime_spec(SPEC), _series({20: 1.0}))
    # read at bar 20's close, in at bar 21's open; the next ratio (0.6 or 0.7) scores below
    # the exit against a window holding the spike: out at bar 22's open
    assert _fills(code) == [
        (_day(20), _day(21), "buy"),
        (_day(21), _day(22), "sell"),
    ]


def test_a_day_ratio_from_the_csv_trades_two_bars_later(tmp_path):
    """The whole chain: a ratio dated day D (published after D's close) is first read at
    D+1's close and filled at D+2's open."""
    warm = pd.bdate_range(end="2014-12-31", periods=40)
    rows = [(d, 0.6 + 0.1 * (i % 2)) for i, d in enumerate(warm)]
    rows += [(d, 1.0 if i == 20 else 0.6 + 0.1 * (i % 2)) for i, d in enumerate(BAR_DAYS)]
    text = "".join(f"{d.date()},1,1,{r},{r}\n" for d, r in rows)
    table = series(AltData(_alt(tmp_path, text)).table(TABLE), through=date(2015, 3, 31))
    fills = _fills(render(regime_spec(SPEC), table))
    assert fills[0] == (_day(21), _day(22), "buy")


def test_the_hold_limit_closes_and_the_regime_must_end_before_a_new_entry():
    fear = {i: 1.0 + 0.1 * (i - 20) for i in range(20, 28)}  # eight days of rising fear
    table = _series(fear | {50: 1.0})  # then a spike
    z = scores([p.ratio for p in table[False]], span=1, lookback=20)[40:]
    assert min(z[20:28]) > SPEC["entry_z"] and z[28] < SPEC["exit_z"]  # fear through bar 27
    assert _fills(render(regime_spec(SPEC | {"hold_bars": 5}), table)) == [
        (_day(20), _day(21), "buy"),
        (_day(25), _day(26), "sell"),  # held five bars (21..25): out, though z is high
        (_day(50), _day(51), "buy"),  # not at bars 26-27 (same regime): after it ended
        (_day(51), _day(52), "sell"),
    ]


def test_long_short_shorts_complacency_and_long_only_ignores_it():
    dip = _series({30: 0.3})
    short = _fills(render(regime_spec(SPEC, long_short=True), dip))
    assert short == [(_day(30), _day(31), "sell"), (_day(31), _day(32), "buy")]
    assert _fills(render(regime_spec(SPEC), dip)) == []


def test_the_strategy_is_flat_once_the_series_ends():
    code = render(regime_spec(SPEC), _series({29: 1.0}, until=30))  # last ratio: bar 29
    fills = _fills(code)
    last = _day(29)
    stale = next(i for i, d in enumerate(BAR_DAYS) if (d.date() - last).days > STALE_DAYS)
    assert fills == [(_day(29), _day(30), "buy"), (_day(stale), _day(stale + 1), "sell")]


def test_the_score_in_the_strategy_is_the_pure_one():
    """The strategy's z on each bar equals ``scores`` over the ratios it may read."""
    table = _series({20: 1.0, 33: 0.9, 45: 0.4})
    spec = regime_spec({"span": 3, "lookback": 20})
    cls = load_class(render(spec, table))
    seen: list[float | None] = []

    class Recorded(cls):
        def next(self):
            super().next()
            seen.append(self.z)

    bt = import_backtrader()
    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=_bars()))
    cerebro.addstrategy(Recorded)
    cerebro.run()
    want = scores([p.ratio for p in table[False]], span=3, lookback=20)[40:]
    assert len(seen) == 60
    # a bar with a working order keeps the last score: compare where it was computed
    pairs = [(s, w) for s, w in zip(seen, want, strict=True) if s is not None]
    assert len(pairs) >= 50
    assert [s for s, _ in pairs] == pytest.approx([w for _, w in pairs], rel=1e-12)


def test_it_runs_in_the_sandbox():
    code = render(regime_spec(SPEC, long_short=True), _series({20: 1.0, 30: 0.3}))
    out = run_sandboxed(_job(code))  # validated, forked, confined; the parent keeps the books
    assert out.result.status == JobStatus.OK, out.result.error
    assert out.result.metrics.n_trades == 2


# --------------------------------------------------------------------------- proposals


@pytest.mark.parametrize("route", ["INITIAL", "RESEARCH", "TUNE", "FIX", "REFINE"])
def test_proposals_are_snapped_fresh_distinct_and_deterministic(route):
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
        params = p.spec.parameters
        assert all(params[k] in GRID[k] for k in GRID) and params["exit_z"] < params["entry_z"]
        assert p.spec.family.value == KIND
    if best is not None:
        assert all(p.parent_id == "i01-v02" for p in again[0])
    if route == "REFINE":
        assert again[0][0].spec.long_short != best[1].long_short
    if route == "TUNE":  # grid steps from the best: single moves first
        moved = [
            sum(p.spec.parameters[k] != best[1].parameters[k] for k in best[1].parameters)
            for p in again[0]
        ]
        assert moved == sorted(moved) and set(moved) <= {1, 2} and moved[0] == 1


def test_proposals_run_on_past_the_listed_ideas():
    seen: set[str] = set()
    rng = random.Random(1)
    for _ in range(5):
        props = propose(route="RESEARCH", n=4, rng=rng, seen=seen, best=None)
        assert len(props) == 4
        keys = {p.spec.trial_key() for p in props}
        assert not keys & seen
        seen |= keys


@pytest.mark.slow
def test_the_gates_lookahead_check_finds_it_clean_on_real_data(shared_data):
    """The check the gate runs before a pass (truncated re-runs, sandboxed) on SPY with the
    corpus ratios. It cannot see the embedded series' future (the series is not cut with the
    bars): the keys above are what keep a ratio from its decision before it was known."""
    table = series(AltData(shared_data).table(TABLE), through=date(2016, 12, 30))
    code = render(regime_spec({"entry_z": 1.0, "exit_z": 0.0}, long_short=True), table)
    bars = read_real_bars("SPY", "2015-01-01", "2016-12-31")
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2016, 12, 30)
    )
    report = check_lookahead(code, bars, fold=fold, costs=CostModel(), symbol="SPY")
    assert report.checked and not report.biased, report.mismatches or report.error
