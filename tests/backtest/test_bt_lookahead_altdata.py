"""Lookahead check on alternative data (issue 26): each truncated run gets the embedded table
cut at its last bar (``code_at``), so an earnings-drift strategy that acts on a report before
it was known is caught; the honest rendered strategy is clean. Without ``code_at`` every run
embeds the same table and the same peek passes: the check would be vacuous."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from altdata.corpus import AltData
from altdata.pit import AltTable
from altdata.sessions import nyse
from backtest.contracts import BacktestJob, CostModel, Fold
from backtest.engine import execute
from backtest.lookahead import check_lookahead, cut_positions
from backtest.trace import collect_trace
from strategies.earnings_drift import drift_spec, events, render
from strategies.validate import validate_code

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYMBOL = "AAPL"
FOLD = Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 2, 2), end=date(2015, 6, 30))
N_CUTS = 12
HEADER = "report_date,ticker,fiscal_qtr,eps_consensus_est,eps_reported,surprise,release_time\n"
SPEC = drift_spec({"surprise_pct": 5.0, "hold_bars": 5, "entry_delay": 0})

# The rendered loop takes a report on its first tradable day ...
HONEST_LOOP = (
    "        while self.cursor < len(self.events) and self.events[self.cursor][0] <= today:\n"
)
# ... the hostile one a session before it: it trades before the report is out.
PEEK_LOOP = "        while self.cursor < len(self.events) and self._soon(self.events[self.cursor][0], day):\n"
PEEK_METHOD = """
    def _soon(self, key, day):
        when = day.replace(year=key // 10000, month=key // 100 % 100, day=key % 100)
        return (when - day).days <= (3 if day.weekday() == 4 else 1)

    def next(self):
"""


def _bars() -> pd.DataFrame:
    """NYSE sessions of the fold with a gentle random walk (no report moves them)."""
    days = pd.DatetimeIndex(nyse().sessions_in_range("2015-01-02", "2015-06-30")).tz_localize(None)
    close = 100.0 * np.exp(np.cumsum(np.random.default_rng(3).normal(0, 0.01, len(days))))
    return pd.DataFrame(
        {
            "open": close,
            "high": close * 1.01,
            "low": close * 0.99,
            "close": close,
            "volume": 1e6,
        },
        index=days,
    )


def _surprises(tmp_path: Path, days: list[date]) -> AltTable:
    """A beat released before the open of each of ``days`` (first tradable that day), laid
    out like the corpus."""
    rows = "".join(f"{d.isoformat()},{SYMBOL},15-Q,1.00,1.20,0.20,pre\n" for d in days)
    (tmp_path / "analyst").mkdir()
    (tmp_path / "fundamentals").mkdir()  # two folders of the five: laid out like the corpus
    (tmp_path / "analyst" / "earnings_surprises_2012_2019.csv").write_text(HEADER + rows)
    table = AltData(tmp_path).table("surprises")
    assert table is not None
    return table


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[pd.DataFrame, AltTable]:
    """Bars and reports first tradable the session after three of the check's cuts: a cut
    run ending the session before a report does not know it yet."""
    bars = _bars()
    cuts = cut_positions(pd.DatetimeIndex(bars.index), FOLD, N_CUTS)
    days = [bars.index[cuts[k] + 1].date() for k in (2, 6, 9)]
    return bars, _surprises(tmp_path_factory.mktemp("alt"), days)


def _code_at(table: AltTable, spec_code: Callable[[dict], str]) -> Callable[[date], str]:
    return lambda day: spec_code(events(table, [SYMBOL], through=day))


def _hostile(table: dict) -> str:
    code = render(SPEC, table)
    assert code.count(HONEST_LOOP) == 1 and code.count("\n    def next(self):\n") == 1
    return code.replace(HONEST_LOOP, PEEK_LOOP).replace("\n    def next(self):\n", PEEK_METHOD)


def _session_before(bars: pd.DataFrame, key: int) -> str:
    day = pd.Timestamp(f"{key // 10000}-{key // 100 % 100:02d}-{key % 100:02d}")
    return bars.index[bars.index.get_loc(day) - 1].date().isoformat()


def _check(code: str, bars: pd.DataFrame, code_at: Callable[[date], str] | None, **kw):
    return check_lookahead(
        code,
        bars,
        fold=FOLD,
        costs=CostModel(),
        n_cuts=N_CUTS,
        symbol=SYMBOL,
        code_at=code_at,
        **kw,
    )


def test_a_strategy_trading_a_session_before_the_report_is_caught_only_with_the_cut_table(
    setup,
) -> None:
    bars, table = setup
    scored = events(table, [SYMBOL], through=FOLD.end)  # the in-sample end's table
    assert len(scored[SYMBOL]) == 3
    code = _hostile(scored)
    assert validate_code(code).ok  # the static lint cannot see this peek: it runs as scored
    old = _check(code, bars, None)
    assert old.checked and not old.biased, old  # one table for every run: unseen
    new = _check(code, bars, _code_at(table, _hostile))
    assert new.checked and new.biased, new
    # Caught at each cut the session before a report: the full run bought there, the cut
    # run (whose table does not hold the report yet) did not.
    before = [_session_before(bars, e.day) for e in scored[SYMBOL]]
    assert [m.split(":")[0] for m in new.mismatches] == [f"cut at {d}" for d in before]
    assert all("orders up to the cut" in m for m in new.mismatches), new.mismatches


def test_the_honest_rendered_strategy_is_clean_with_the_cut_table(setup) -> None:
    bars, table = setup
    code = render(SPEC, events(table, [SYMBOL], through=FOLD.end))
    asked: list[date] = []
    cut_code = _code_at(table, lambda t: render(SPEC, t))

    def code_at(day: date) -> str:
        asked.append(day)
        return cut_code(day)

    report = _check(code, bars, code_at)
    assert report.checked and not report.biased, report.mismatches[:3]
    assert report.n_cuts == N_CUTS
    # One table per cut, at its last bar; the full run keeps the scored code.
    cuts = cut_positions(pd.DatetimeIndex(bars.index), FOLD, N_CUTS)
    assert asked == [bars.index[c].date() for c in cuts] and FOLD.end not in asked
    # Not vacuous: it buys on each report's first tradable day, the session after a cut.
    run = execute(
        BacktestJob(job_id="j", variant_id="v", code=code, symbol=SYMBOL, bars=bars, fold=FOLD)
    )
    buys = [row[0] for row in collect_trace(run)["orders"] if row[1] == "buy"]
    days = [str(e.day) for e in events(table, [SYMBOL], through=FOLD.end)[SYMBOL]]
    assert [b.replace("-", "") for b in buys] == days


def test_a_failing_cut_table_is_an_unchecked_report_not_an_error(setup) -> None:
    bars, _ = setup

    def broken(day: date) -> str:
        raise FileNotFoundError(f"no reports for {day}")

    report = _check(render(SPEC, {SYMBOL: ()}), bars, broken)
    assert not report.checked and not report.biased
    assert report.error is not None and "FileNotFoundError" in report.error


# --------------------------------------------------------------------------- a portfolio family

VQ_COLUMNS = (
    "ticker,period_end,net_income,earnings_per_share,estimated_shares_outstanding,"
    "total_revenue,operating_income,gross_profit,total_equity,net_cash_flow_operating,"
    "capital_expenditures\n"
)
VQ_SYMBOLS = ("AAPL", "MSFT", "NVDA")
# The rendered strategy reads a statement on its first tradable day ...
VQ_HONEST = "            if day > today:\n"
# ... the hostile one up to five calendar days early (mid-month, yyyymmdd + 5 is a later day).
VQ_PEEK = "            if day > today + 5:\n"


def _vq_setup(tmp_path: Path) -> tuple[dict[str, pd.DataFrame], AltTable, list[int]]:
    """Three symbols' bars; statements known long before the fold rank AAPL first; a later
    statement of NVDA (first tradable the session after a cut) makes it the cheapest, and a
    still later one (the same) the dearest again."""
    from strategies.value_quality import snapshots  # noqa: F401  (the family's own cut)

    base = _bars()
    rng = np.random.default_rng(5)
    bars = {s: base * float(1 + 0.1 * i) for i, s in enumerate(VQ_SYMBOLS)}
    for s in VQ_SYMBOLS:
        bars[s] = bars[s] * np.exp(np.cumsum(rng.normal(0, 0.002, len(base))))[:, None]
    cuts = cut_positions(pd.DatetimeIndex(base.index), FOLD, N_CUTS)
    targets = [base.index[c + 1] for c in cuts if base.index[c + 1].day <= 25][1:4:2]
    rows = [
        "AAPL,2014-06-30,4000,4,1000,10000,3000,5000,8000,3500,-500",
        "MSFT,2014-06-30,2000,2,1000,10000,2000,4000,8000,1500,-500",
        "NVDA,2014-06-30,1000,1,1000,10000,1000,3000,8000,800,-500",
    ]
    for i, t in enumerate(targets):  # known at the open of t: period end t - 91 days
        end = (t - pd.Timedelta(days=91)).date().isoformat()
        eps, margin = (8, 4000) if i == 0 else (1, 500)
        rows.append(f"NVDA,{end},{eps * 1000},{eps},1000,10000,{margin},3000,8000,{eps * 900},-100")
    (tmp_path / "fundamentals").mkdir()
    (tmp_path / "analyst").mkdir()
    path = tmp_path / "fundamentals" / "annual_statements_2012_2016.csv"
    path.write_text(VQ_COLUMNS + "\n".join(rows) + "\n")
    table = AltData(tmp_path).table("statements")
    assert table is not None
    keys = [t.year * 10000 + t.month * 100 + t.day for t in targets]
    return bars, table, keys


def _vq_render(table: dict, hostile: bool) -> str:
    from strategies.value_quality import render, vq_spec

    code = render(vq_spec({"value_weight": 1.0, "top_n": 1, "rebalance_bars": 5}), table)
    if hostile:
        assert code.count(VQ_HONEST) == 1
        code = code.replace(VQ_HONEST, VQ_PEEK)
    return code.replace('("rebalance_bars", 5)', '("rebalance_bars", 1)')


def test_a_portfolio_family_reading_a_statement_early_is_caught_with_the_cut_table(tmp_path):
    from strategies.value_quality import snapshots

    bars, table, keys = _vq_setup(tmp_path)
    assert len(keys) == 2

    def cut(hostile: bool) -> Callable[[date], str]:
        return lambda day: _vq_render(snapshots(table, VQ_SYMBOLS, through=day), hostile)

    scored = snapshots(table, VQ_SYMBOLS, through=FOLD.end)
    assert sorted(s.day for s in scored["NVDA"])[-2:] == keys
    kw = {"fold": FOLD, "costs": CostModel(), "n_cuts": N_CUTS, "symbol": "PORTFOLIO"}
    honest = check_lookahead(_vq_render(scored, False), bars, code_at=cut(False), **kw)
    assert honest.checked and not honest.biased, honest.mismatches[:3]
    code = _vq_render(scored, True)
    assert validate_code(code).ok
    old = check_lookahead(code, bars, **kw)
    assert old.checked and not old.biased, old  # one table for every run: unseen
    new = check_lookahead(code, bars, code_at=cut(True), **kw)
    assert new.checked and new.biased, new
