"""The alt-data studies of the analyst-revision, sentiment-momentum and put/call families
(``swarm.research.alt_studies``): each supports its family where the edge is planted in
synthetic closes and not where it is absent, reads no row known after its cut, and runs
only when its table is in the folder (a calibration earnings folder runs the drift study
only, so these studies cannot change the calibration's runs)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from altdata.corpus import AltData
from altdata.sentiment import normalise
from altdata.sessions import nyse
from strategies.sentiment_momentum import TWEETS, scored, series
from swarm.research.alt_studies import (
    alt_family_studies,
    putcall_study,
    putcall_z,
    revision_study,
    sentiment_study,
    tone_z,
)

pytestmark = pytest.mark.unit


def _sessions(start: str, end: str) -> pd.DatetimeIndex:
    return pd.DatetimeIndex([s.tz_localize(None) for s in nyse().sessions_in_range(start, end)])


def _keys(index: pd.DatetimeIndex) -> list[int]:
    return [d.year * 10000 + d.month * 100 + d.day for d in index]


def _walk(index: pd.DatetimeIndex, seed: int, drift: np.ndarray | None = None) -> pd.Series:
    """A close path: 0.5 % daily noise plus ``drift`` (each bar's extra log return)."""
    steps = np.random.default_rng(seed).normal(0.0, 0.005, len(index))
    if drift is not None:
        steps = steps + drift
    return pd.Series(100.0 * np.exp(np.cumsum(steps)), index=index, name="close")


# --------------------------------------------------------------------------- analyst revisions

RATINGS_HEADER = "date,datetime,ticker,firm,action,rating,pt_change,price_target,headline\n"
# Before the open (EST/EDT): each action's first tradable day is its own session. Rows that
# trigger nothing by default (a target raise alone, a maintained rating) are in too.
RATINGS = """2015-02-10,2015-02-10T07:00:00-05:00,AAA,UBS,Upgrades,Buy,,,h
2015-03-17,2015-03-17T07:00:00-04:00,AAA,Citi,Downgrades,Neutral,,,h
2015-05-05,2015-05-05T07:00:00-04:00,AAA,Goldman Sachs,Upgrades,Buy,,,h
2015-06-16,2015-06-16T07:00:00-04:00,AAA,Nomura,Maintains,Buy,Raises,40,no rating change
2015-07-21,2015-07-21T07:00:00-04:00,AAA,UBS,Downgrades,Sell,,,h
2015-09-01,2015-09-01T07:00:00-04:00,AAA,Citi,Upgrades,Buy,,,h
2015-02-24,2015-02-24T07:00:00-05:00,BBB,Jefferies,Downgrades,Hold,,,h
2015-04-14,2015-04-14T07:00:00-04:00,BBB,Barclays,Upgrades,Overweight,,,h
2015-06-02,2015-06-02T07:00:00-04:00,BBB,UBS,Upgrades,Buy,,,h
2015-08-11,2015-08-11T07:00:00-04:00,BBB,Citi,Downgrades,Neutral,,,h
2015-10-06,2015-10-06T07:00:00-04:00,BBB,Jefferies,Upgrades,Buy,,,h
"""
# Known after the cut (2015-10-30), inside the closes: a downgrade the close then rallies on.
LATE_RATING = "2015-11-10,2015-11-10T07:00:00-05:00,AAA,UBS,Downgrades,Sell,,,late\n"
REV_CUT = date(2015, 10, 30)


def _ratings_root(tmp_path: Path, rows: str = RATINGS) -> Path:
    (tmp_path / "analyst").mkdir(parents=True, exist_ok=True)
    (tmp_path / "analyst" / "benzinga_rating_actions_2011_2020.csv").write_text(
        RATINGS_HEADER + rows
    )
    return tmp_path


def _revision_closes(planted: bool, rows: str = RATINGS) -> dict[str, pd.Series]:
    """Closes for 2015; planted: 6 % over the 20 bars after each action, its way (the
    late downgrade's bars rally instead)."""
    index = _sessions("2015-01-02", "2015-12-31")
    where = {d: i for i, d in enumerate(_keys(index))}
    out = {}
    for seed, ticker in enumerate(("AAA", "BBB")):
        drift = np.zeros(len(index))
        for line in rows.splitlines():
            day, _, who, _, action = line.split(",")[:5]
            side = {"Upgrades": 1, "Downgrades": -1}.get(action)
            if who != ticker or side is None or not planted:
                continue
            i = where[int(day.replace("-", ""))]
            drift[i + 1 : i + 21] += (1 if "late" in line else side) * 0.003
        out[ticker] = _walk(index, 2 + seed, drift)
    return out


@pytest.mark.parametrize("planted", [True, False])
def test_the_revision_study_supports_the_family_where_revisions_lead_returns(tmp_path, planted):
    table = AltData(_ratings_root(tmp_path)).table("ratings")
    study = revision_study(table, _revision_closes(planted), through=REV_CUT)
    assert study.family == "analyst_revision" and study.n == 10, study.line
    assert study.supported is planted and (study.t >= 2.0) is planted, study.line
    assert study.line.startswith("analyst revisions: 10 upgrades/downgrades")


def test_the_revision_study_reads_no_action_known_after_its_cut(tmp_path):
    closes = _revision_closes(True, RATINGS + LATE_RATING)
    plain = AltData(_ratings_root(tmp_path / "a")).table("ratings")
    late = AltData(_ratings_root(tmp_path / "b", RATINGS + LATE_RATING)).table("ratings")
    assert revision_study(late, closes, through=REV_CUT) == revision_study(
        plain, closes, through=REV_CUT
    )
    # Cut after it, the late downgrade counts (against the family): the test can see it.
    later = revision_study(late, closes, through=date(2015, 12, 31))
    assert (
        later.n == 11 and later.statistic < revision_study(plain, closes, through=REV_CUT).statistic
    )


def test_too_few_revisions_are_not_measured(tmp_path):
    table = AltData(_ratings_root(tmp_path)).table("ratings")
    study = revision_study(table, _revision_closes(True), through=date(2015, 4, 30))
    assert not study.supported and study.t is None and "not measured" in study.line


# --------------------------------------------------------------------------- sentiment momentum

TWEETS_HEADER = "date_utc,created_at_utc,ticker,tweet_id,user_id,followers,text\n"
SENT_INDEX = _sessions("2015-01-02", "2016-12-30")
SENT_CUT = date(2016, 10, 31)
SENT_SYMBOLS = ("AAA", "BBB", "CCC")


def _tweets(late: bool = False) -> tuple[str, dict[str, float]]:
    """Two tweets a session a symbol at 15:00 UTC (before the close), each with a random
    tone (the fake scorer's lookup); ``late``: extreme ones after the cut too."""
    rng = np.random.default_rng(7)
    lines, tones = [], {}
    for ticker in SENT_SYMBOLS:
        for day in SENT_INDEX:
            for k in range(2):
                text = f"${ticker} note {day:%Y%m%d} {k}"
                tones[normalise(text)] = float(rng.uniform(-1, 1))
                if late and day.date() > SENT_CUT:
                    tones[normalise(text)] = 1.0 if day.day % 2 else -1.0
                lines.append(f"{day:%Y-%m-%d},{day:%Y-%m-%d} 15:00:00,{ticker},1,1,1,{text}")
    return TWEETS_HEADER + "\n".join(lines) + "\n", tones


def _scored_tweets(tmp_path: Path, late: bool = False) -> dict:
    text, tones = _tweets(late)
    (tmp_path / "social").mkdir(parents=True, exist_ok=True)
    (tmp_path / "social" / "stocknet_tweets_2014_2016.csv").write_text(text)
    table = AltData(tmp_path).table("tweets")
    score = lambda t: tones[normalise(t)]  # noqa: E731
    return {TWEETS: scored(table, text="text", score=score, key=normalise)}


def _sentiment_closes(tables: dict, planted: bool) -> dict[str, pd.Series]:
    """Planted: each bar after a z-score's bar moves 0.4 % per unit of it."""
    days = series(tables, SENT_SYMBOLS, through=SENT_CUT)[TWEETS]
    out = {}
    for seed, ticker in enumerate(SENT_SYMBOLS):
        zs = tone_z(days[ticker], _keys(SENT_INDEX))
        drift = np.zeros(len(SENT_INDEX))
        if planted:
            drift[1:] = [0.004 * (z or 0.0) for z in zs[:-1]]
        out[ticker] = _walk(SENT_INDEX, 10 + seed, drift)
    return out


@pytest.mark.parametrize("planted", [True, False])
def test_the_sentiment_study_supports_the_family_where_tone_leads_returns(tmp_path, planted):
    tables = _scored_tweets(tmp_path)
    study = sentiment_study(tables, _sentiment_closes(tables, planted), through=SENT_CUT)
    assert study.family == "sentiment_momentum" and study.n >= 100, study.line
    assert study.supported is planted and (study.t >= 2.0) is planted, study.line
    assert "tweets tone z-score vs the next 5 bars" in study.line


def test_the_sentiment_study_reads_no_tweet_known_after_its_cut(tmp_path):
    plain = _scored_tweets(tmp_path / "a")
    late = _scored_tweets(tmp_path / "b", late=True)
    closes = _sentiment_closes(plain, True)
    whole = sentiment_study(plain, closes, through=SENT_CUT)
    assert sentiment_study(late, closes, through=SENT_CUT) == whole
    assert sentiment_study(late, closes, through=date(2016, 12, 30)) != whole


def test_too_few_scored_days_are_not_measured(tmp_path):
    tables = _scored_tweets(tmp_path)
    closes = {s: c.iloc[:200] for s, c in _sentiment_closes(tables, True).items()}
    study = sentiment_study(tables, closes, through=SENT_CUT)
    assert not study.supported and study.n < 100 and "not measured" in study.line


# --------------------------------------------------------------------------- put/call regime

PC_HEADER = "date,equity_calls,equity_puts,equity_pc,total_pc\n"
PC_INDEX = _sessions("2014-01-02", "2016-12-30")
PC_CUT = date(2016, 9, 30)


def _ratios(late: bool = False) -> str:
    """A persistent ratio around 0.65, one a session (known after its close); ``late``: an
    extreme run after the cut."""
    rng = np.random.default_rng(3)
    x, lines = 0.0, []
    for day in PC_INDEX:
        x = 0.95 * x + rng.normal(0.0, 0.03)
        ratio = 0.65 + x if not (late and day.date() > PC_CUT) else 1.5
        lines.append(f"{day:%Y-%m-%d},1000,{int(1000 * ratio)},{ratio:.4f},{ratio + 0.3:.4f}")
    return PC_HEADER + "\n".join(lines) + "\n"


def _pc_table(tmp_path: Path, late: bool = False):
    (tmp_path / "options").mkdir(parents=True, exist_ok=True)
    (tmp_path / "options" / "cboe_putcall_daily_2006_2019.csv").write_text(_ratios(late))
    return AltData(tmp_path).table("put_call")


def _pc_closes(table, planted: bool) -> dict[str, pd.Series]:
    """Planted: every symbol's next bar moves 0.2 % per unit of the score a bar reads."""
    zs = putcall_z(table, _keys(PC_INDEX), through=PC_CUT)
    drift = np.zeros(len(PC_INDEX))
    if planted:
        drift[1:] = [0.002 * (z or 0.0) for z in zs[:-1]]
    return {s: _walk(PC_INDEX, 20 + i, drift) for i, s in enumerate(("AAA", "BBB"))}


@pytest.mark.parametrize("planted", [True, False])
def test_the_putcall_study_supports_the_family_where_fear_leads_returns(tmp_path, planted):
    table = _pc_table(tmp_path)
    study = putcall_study(table, _pc_closes(table, planted), through=PC_CUT)
    assert study.family == "putcall_regime" and study.n >= 20, study.line
    assert study.supported is planted and (study.t >= 2.0) is planted, study.line


def test_a_negative_correlation_supports_nothing(tmp_path):
    table = _pc_table(tmp_path)
    closes = {s: 1e4 / c for s, c in _pc_closes(table, True).items()}  # the edge reversed
    study = putcall_study(table, closes, through=PC_CUT)
    assert study.t <= -2.0 and not study.supported, study.line


def test_the_putcall_study_reads_no_ratio_known_after_its_cut(tmp_path):
    plain = _pc_table(tmp_path / "a")
    late = _pc_table(tmp_path / "b", late=True)
    closes = _pc_closes(plain, True)
    whole = putcall_study(plain, closes, through=PC_CUT)
    assert putcall_study(late, closes, through=PC_CUT) == whole
    assert putcall_study(late, closes, through=date(2016, 12, 30)) != whole
    # The cut ratio series goes stale: no score after it, so fewer periods than the closes.
    assert putcall_z(plain, _keys(PC_INDEX), through=PC_CUT)[-1] is None


# --------------------------------------------------------------------------- the folder


def test_each_study_runs_only_when_its_table_is_in_the_folder(tmp_path):
    root = _ratings_root(tmp_path)
    closes = _revision_closes(True)
    through = REV_CUT
    assert [s.family for s in alt_family_studies(AltData(root), closes, through=through)] == [
        "analyst_revision"
    ]
    _pc_table(root)
    (root / "social").mkdir()
    (root / "social" / "stocknet_tweets_2014_2016.csv").write_text(
        TWEETS_HEADER + "2015-03-02,2015-03-02 15:00:00,AAA,1,1,1,$AAA beats\n"
    )
    studies = alt_family_studies(AltData(root), closes, through=through)
    assert [s.family for s in studies] == [
        "analyst_revision",
        "sentiment_momentum",
        "putcall_regime",
    ]
    assert "not measured" in studies[1].line  # one tweet: too few scored days


def test_a_calibration_earnings_folder_runs_the_drift_study_only(tmp_path):
    from swarm.calibrate import SCENARIOS, universe_seed
    from swarm.calibration.synthetic_universe import UniverseSpec, write_universe

    name = "planted-earnings-drift"
    sc = SCENARIOS[name]
    spec = UniverseSpec(
        kind=sc.universe_kind,
        seed=universe_seed(0, name, 1),
        n_symbols=sc.n_symbols or 3,
        start=date(2012, 1, 2),
        years=8.0,
        drift_annual=sc.drift_annual,
    )
    meta = write_universe(spec, tmp_path / name)
    alt = Path(meta["alt_data"])
    files = sorted(str(p.relative_to(alt)) for p in alt.rglob("*") if p.is_file())
    assert files == ["analyst/earnings_surprises_2012_2019.csv"]
    closes = {
        s: pd.read_csv(tmp_path / name / f"{s}.csv", parse_dates=["date"], index_col="date")[
            "close"
        ].loc[:"2018-06-29"]
        for s in meta["symbols"]
    }
    studies = alt_family_studies(AltData(alt), closes, through=date(2018, 6, 29))
    assert [s.family for s in studies] == ["earnings_drift"]
