"""``code_through``: each alt-data family's source with the rows known by a day's close, the
table a truncated lookahead re-run ending that day gets (issue 26). No row first tradable
after the day reaches it; through the in-sample end it is the search's code; the registry
offers it for those families only, and the gate uses it only when it reproduces the scored
code."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from backtest.splits import TimeSplit
from strategies.analyst_revision import revision_spec
from strategies.codegen import code_sha256
from strategies.earnings_drift import drift_spec
from strategies.families import default_spec
from strategies.putcall_regime import regime_spec
from strategies.sentiment_momentum import momentum_spec
from strategies.spec import Family, StrategySpec, StrategyVariant
from swarm.families import registry

pytestmark = pytest.mark.unit

# A Tuesday: each source has a row first tradable that day, and rows known only after its
# close (first tradable the next sessions).
DAY = date(2015, 7, 7)
KEY = 20150707
INSAMPLE_END = date(2015, 7, 31)


@dataclass(frozen=True)
class Source:
    """One family's corpus file, rows around ``DAY``, its spec and the table its code embeds."""

    folder: str
    file: str
    text: str
    spec: Callable[[], StrategySpec]
    table: str  # the embedded name: ticker -> rows (EVENTS, DAYS) or one series (SERIES)


SOURCES = {
    "earnings_drift": Source(
        "analyst",
        "earnings_surprises_2012_2019.csv",
        "report_date,ticker,fiscal_qtr,eps_consensus_est,eps_reported,surprise,release_time\n"
        "2015-07-06,AAPL,15-Q,1.00,1.20,0.20,post\n"  # Monday after the close: Tuesday's
        "2015-07-07,AAPL,15-Q,1.00,1.30,0.30,post\n"  # Tuesday after the close: Wednesday's
        "2015-07-08,AAPL,15-Q,1.00,1.40,0.40,pre\n",
        drift_spec,
        "EVENTS",
    ),
    "analyst_revision": Source(
        "analyst",
        "benzinga_rating_actions_2011_2020.csv",
        "date,datetime,ticker,firm,action,rating,pt_change,price_target,headline\n"
        "2015-07-07,2015-07-07T10:00:00-04:00,AAPL,UBS,Upgrades,Buy,,,h\n"
        "2015-07-07,2015-07-07T16:30:00-04:00,AAPL,Citi,Upgrades,Buy,,,h\n"
        "2015-07-08,2015-07-08T09:00:00-04:00,AAPL,Nomura,Downgrades,Neutral,,,h\n",
        revision_spec,
        "EVENTS",
    ),
    "sentiment_momentum": Source(
        "social",
        "stocknet_tweets_2014_2016.csv",
        "date_utc,created_at_utc,ticker,tweet_id,user_id,followers,text\n"
        "2015-07-07,2015-07-07 14:00:00,AAPL,1,1,10,$AAPL great quarter\n"
        "2015-07-07,2015-07-07 21:00:00,AAPL,2,2,10,$AAPL misses after hours\n"  # Wednesday's
        "2015-07-08,2015-07-08 14:00:00,AAPL,3,3,10,$AAPL strong buy\n",
        momentum_spec,
        "DAYS",
    ),
    "putcall_regime": Source(
        "options",
        "cboe_putcall_daily_2006_2019.csv",
        "date,equity_calls,equity_puts,equity_pc,total_pc\n"
        "2015-07-06,100,70,0.7,0.9\n"  # a day's ratio is known after its close: Tuesday's
        "2015-07-07,100,66,0.66,0.95\n"
        "2015-07-08,100,80,0.8,1.1\n",
        regime_spec,
        "SERIES",
    ),
}


def _alt(tmp_path: Path, source: Source) -> Path:
    (tmp_path / source.folder).mkdir()
    (tmp_path / "fundamentals").mkdir()  # two folders of the five: laid out like the corpus
    (tmp_path / source.folder / source.file).write_text(source.text)
    return tmp_path


def _run(root: Path) -> SimpleNamespace:
    warnings: list[str] = []
    return SimpleNamespace(
        config=SimpleNamespace(alt_data=root, data_dir=None),
        symbols=["AAPL"],
        run=SimpleNamespace(write_text=lambda rel, text: None),
        progress=SimpleNamespace(warn=warnings.append),
        split=TimeSplit(
            insample_start=date(2015, 1, 2),
            insample_end=INSAMPLE_END,
            holdout_start=date(2015, 8, 3),
            holdout_end=date(2015, 12, 31),
        ),
        folds=[SimpleNamespace(warmup_start=date(2015, 1, 2), start=date(2015, 4, 1))],
        warnings=warnings,
    )


def _days_in(code: str, name: str) -> list[int]:
    """The first tradable day (yyyymmdd) of every row the code embeds under ``name``."""
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            value = ast.literal_eval(node.value)
            rows = [r for v in value.values() for r in v] if isinstance(value, dict) else value
            return [int(r[0]) for r in rows]
    raise AssertionError(f"no {name} in the code")


@pytest.mark.parametrize("kind", list(SOURCES))
def test_code_through_a_day_carries_no_row_first_tradable_after_it(kind, tmp_path):
    source = SOURCES[kind]
    plugin, run, spec = registry().for_kind(kind), _run(_alt(tmp_path, source)), source.spec()
    at_day = _days_in(plugin.code_through(run, spec, DAY), source.table)
    assert at_day and max(at_day) == KEY  # the day's own row, nothing later
    later = _days_in(plugin.code_through(run, spec, date(2015, 7, 8)), source.table)
    assert max(later) == 20150708 and len(later) > len(at_day)  # known by the next close
    assert plugin.code_through(run, spec, INSAMPLE_END) == plugin.code(run, spec)
    cut = registry().code_at(run, spec)
    assert cut is not None and cut(DAY) == plugin.code_through(run, spec, DAY)


def test_a_cut_past_the_put_call_series_does_not_warn(tmp_path):
    plugin = registry().for_kind("putcall_regime")
    run = _run(_alt(tmp_path, SOURCES["putcall_regime"]))
    plugin.code_through(run, regime_spec(), date(2015, 9, 30))  # the series ended in July
    assert run.warnings == []
    plugin.code(run, regime_spec())  # the search's window runs past it too: said once
    assert len(run.warnings) == 1 and "series ends" in run.warnings[0]


def test_families_without_embedded_data_and_an_llms_own_code_have_no_cut_code(tmp_path):
    run = _run(tmp_path)
    assert registry().code_at(run, default_spec(Family.TREND)) is None
    custom = drift_spec().model_copy(update={"source_sha": "0" * 64})
    assert registry().code_at(run, custom) is None


def test_the_gate_cuts_only_code_the_plugin_reproduces(tmp_path):
    from swarm.nodes.gate import _alt_data_cuts

    run = _run(_alt(tmp_path, SOURCES["earnings_drift"]))
    spec = drift_spec()
    code = registry().for_kind("earnings_drift").code(run, spec)

    def variant(source: str) -> StrategyVariant:
        return StrategyVariant(
            variant_id="i01-v01",
            iteration=1,
            route="INITIAL",
            spec=spec,
            code=source,
            code_sha256=code_sha256(source),
        )

    cut = _alt_data_cuts(run, variant(code))
    assert cut is not None and max(_days_in(cut(DAY), "EVENTS")) == KEY
    assert _alt_data_cuts(run, variant(code + "\n# edited\n")) is None
