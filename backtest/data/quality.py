"""Data-quality report and content hash of an OHLCV frame.

The report is descriptive, never corrective: it tells the researcher what is in
the data (coverage, gaps, broken bars, outliers, unadjusted splits) so that a
strategy's result can be judged against it. Thresholds are module constants so
the data brief can quote them.

Gaps and coverage count the days the market trades (``backtest.data.trading_days``): an NYSE
holiday is no gap, a crypto weekend is an expected bar. Given the requested window, the report
also says when the data starts or ends inside it (``coverage_warnings``): "100 % coverage" of a
series that starts years after the window opens is true only of the series' own span.
"""

from __future__ import annotations

import hashlib
import math
from datetime import date

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from backtest.data.trading_days import MarketDays, market_days, missing_between, trading_days

OHLCV = ["open", "high", "low", "close", "volume"]

# Without a known calendar (WEEKDAYS), Fri -> Tue over a long weekend is 4 days: not a gap.
# With one (NYSE, 24/7), any missing trading day is.
DAILY_GAP_DAYS = 4
# Trading days a series may start after / end before the requested window without a warning
# (a vendor's lag of a day or two, a holiday on an exchange whose calendar is unknown).
EDGE_TOLERANCE_DAYS = 3
INTRADAY_GAP_HOURS = 3.0
OUTLIER_MADS = 10.0  # robust z-score (MAD scaled to sigma) of a log return
OUTLIER_MIN_MOVE = 0.15  # ...and at least a 15% move, so quiet series don't flag noise
SPLIT_MIN_MOVE = 0.30
SPLIT_RATIOS = (1.5, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 10.0, 15.0, 20.0)
SPLIT_RATIO_TOL = 0.03  # relative distance to a split ratio (AMD +52.3% is 1.5% off 1.5)
LOW_COVERAGE_PCT = 90.0
MAX_LISTED = 10  # dates quoted per finding


class Gap(BaseModel):
    """Two consecutive bars further apart than the timeframe allows."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    from_: str = Field(alias="from")  # ISO timestamp of the bar before the hole
    to: str
    calendar_days: float
    missing_days: int | None = None  # trading days without a bar, when the calendar is known


class SuspectedSplit(BaseModel):
    date: str
    pct_change: float  # close-to-close, in percent
    ratio: float  # max(prev/close, close/prev)
    nearest_split_ratio: float


class QualityReport(BaseModel):
    timeframe: str
    n_bars: int
    start: str | None
    end: str | None
    expected_bars: int
    coverage_pct: float
    n_gaps: int
    gaps: list[Gap] = Field(default_factory=list)
    ohlc_violations: int = 0
    ohlc_violation_dates: list[str] = Field(default_factory=list)
    outlier_bars: list[str] = Field(default_factory=list)
    suspected_splits: list[SuspectedSplit] = Field(default_factory=list)
    zero_volume_bars: int = 0
    issues: list[str] = Field(default_factory=list)
    calendar: str = MarketDays.WEEKDAYS.value  # the trading days gaps and coverage count
    window_start: str | None = None  # the requested window, when the loader knew it
    window_end: str | None = None
    window_coverage_pct: float | None = None  # bars over the bars the whole window should hold
    coverage_warnings: list[str] = Field(default_factory=list)  # data starts/ends inside it

    @property
    def ok(self) -> bool:
        """Whether no issue was found."""
        return not self.issues


def _iso(ts: pd.Timestamp, intraday: bool) -> str:
    return ts.isoformat() if intraday else ts.date().isoformat()


def _is_intraday(index: pd.DatetimeIndex) -> bool:
    return bool(len(index)) and bool((index != index.normalize()).any())


def _ohlc_violations(bars: pd.DataFrame) -> pd.Series:
    o, h, lo, c = (bars[k].to_numpy(float) for k in ("open", "high", "low", "close"))
    tol = 1e-9 * np.maximum(np.abs(h), 1.0)  # float noise only
    bad = (
        (h + tol < np.maximum.reduce([o, c, lo]))
        | (lo - tol > np.minimum.reduce([o, c, h]))
        | (np.minimum.reduce([o, h, lo, c]) <= 0)
        | ~np.isfinite(o + h + lo + c)
    )
    return pd.Series(bad, index=bars.index)


def _gaps(index: pd.DatetimeIndex, intraday: bool, kind: MarketDays) -> list[Gap]:
    if len(index) < 2:
        return []
    prev, nxt = index[:-1], index[1:]
    delta_days = (nxt - prev) / pd.Timedelta(days=1)
    known = kind != MarketDays.WEEKDAYS
    days = index.normalize()
    missing = np.zeros(len(index) - 1, dtype=int)
    if known:
        missing = missing_between(days.unique(), trading_days(kind, days[0], days[-1]))
        # back from pairs of distinct days to pairs of bars (intraday: many bars a day)
        day_pos = days.unique().get_indexer(days)
        step = np.diff(day_pos)
        missing = np.where(step > 0, np.concatenate([[0], missing])[day_pos[1:]], 0)
    day_hole = missing > 0 if known else delta_days > DAILY_GAP_DAYS
    if not intraday:
        mask = day_hole
    else:
        # Weekend days inside the hole don't count (approximation good enough for
        # both 24/7 crypto and exchange sessions).
        d0 = prev.normalize().to_numpy("datetime64[D]")
        d1 = nxt.normalize().to_numpy("datetime64[D]")
        weekend_days = (d1 - d0).astype(int) - np.busday_count(d0, d1)
        hours = delta_days * 24 - weekend_days * 24
        per_day = pd.Series(1, index=index).groupby(index.normalize()).size()
        if per_day.median() >= 20:  # round-the-clock market
            mask = hours > INTRADAY_GAP_HOURS
        else:  # session data: the overnight hole is normal; flag holes inside a day
            same_day = prev.normalize() == nxt.normalize()
            mask = (same_day & (hours > INTRADAY_GAP_HOURS)) | day_hole
    mask = np.asarray(mask)
    return [
        Gap(
            **{"from": _iso(a, intraday), "to": _iso(b, intraday)},
            calendar_days=round(d, 3),
            missing_days=int(m) if known else None,
        )
        for a, b, d, m in zip(
            prev[mask], nxt[mask], np.asarray(delta_days)[mask], missing[mask], strict=True
        )
    ]


def _bars_per_day(index: pd.DatetimeIndex, intraday: bool) -> float:
    if not intraday:
        return 1.0
    per_day = pd.Series(1, index=index).groupby(index.normalize()).size()
    return float(per_day.median())


def _expected_bars(index: pd.DatetimeIndex, intraday: bool, kind: MarketDays) -> int:
    start, end = index[0], index[-1]
    days = len(trading_days(kind, start, end))
    per_day = _bars_per_day(index, intraday)
    if intraday and per_day >= 20:
        return int((end - start) / pd.Timedelta(hours=1)) + 1
    return int(days * per_day)


def _window(
    index: pd.DatetimeIndex, kind: MarketDays, window: tuple[date, date], expected: int
) -> tuple[float, list[str]]:
    """Coverage of the requested window, and a warning per edge the data falls short of."""
    w0, w1 = pd.Timestamp(window[0]), pd.Timestamp(window[1])
    first, last = index[0].normalize(), index[-1].normalize()
    in_window = trading_days(kind, w0, w1)
    span = max(len(trading_days(kind, first, last)), 1)
    lead = int((in_window < first).sum())
    trail = int((in_window > last).sum())
    cover = min(100.0, 100.0 * len(index) / max(expected * len(in_window) / span, 1.0))
    unit = "days" if kind == MarketDays.ALWAYS else "trading days"
    of_window = f"{cover:.1f}% of the requested window {w0.date()}..{w1.date()} is covered"
    out = []
    if lead > EDGE_TOLERANCE_DAYS:
        out.append(
            f"data starts {first.date()}, {lead} {unit} after the requested start "
            f"{w0.date()}: {of_window}"
        )
    if trail > EDGE_TOLERANCE_DAYS:
        out.append(
            f"data ends {last.date()}, {trail} {unit} before the requested end "
            f"{w1.date()}: {of_window}"
        )
    return round(cover, 3), out


def _outliers(logret: pd.Series) -> pd.Series:
    med = logret.median()
    mad = 1.4826 * (logret - med).abs().median()  # MAD scaled to sigma for normal data
    big = np.expm1(logret.abs()) > OUTLIER_MIN_MOVE
    if not mad > 0:
        return big
    return big & ((logret - med).abs() > OUTLIER_MADS * mad)


def _splits(close: pd.Series, intraday: bool) -> list[SuspectedSplit]:
    prev = close.shift(1)
    ratio_up = close / prev
    found = []
    for ts, r in ratio_up[(ratio_up - 1).abs() > SPLIT_MIN_MOVE].items():
        if not (np.isfinite(r) and r > 0):
            continue
        ratio = max(r, 1 / r)
        nearest = min(SPLIT_RATIOS, key=lambda s: abs(ratio / s - 1))
        if abs(ratio / nearest - 1) <= SPLIT_RATIO_TOL:
            found.append(
                SuspectedSplit(
                    date=_iso(ts, intraday),
                    pct_change=round((r - 1) * 100, 3),
                    ratio=round(ratio, 4),
                    nearest_split_ratio=nearest,
                )
            )
    return found


def _listed(dates: list[str]) -> str:
    more = f" (+{len(dates) - 3} more)" if len(dates) > 3 else ""
    return ", ".join(dates[:3]) + more


def assess_quality(
    bars: pd.DataFrame, timeframe: str = "1d", *, window: tuple[date, date] | None = None
) -> QualityReport:
    """Describe coverage, gaps, broken bars, outliers and split-like jumps of ``bars``;
    with ``window`` (the requested [start, end]) also how much of it the data covers."""
    n = len(bars)
    if n == 0:
        return QualityReport(
            timeframe=timeframe,
            n_bars=0,
            start=None,
            end=None,
            expected_bars=0,
            coverage_pct=0.0,
            n_gaps=0,
            issues=["no bars"],
        )
    index = pd.DatetimeIndex(bars.index)
    intraday = timeframe != "1d" or _is_intraday(index)
    kind = market_days(index)
    expected = max(_expected_bars(index, intraday, kind), 1)
    coverage = min(100.0, 100.0 * n / expected)
    window_cover, edge_warnings = (
        _window(index, kind, window, expected) if window is not None else (None, [])
    )

    gaps = _gaps(index, intraday, kind)
    viol = _ohlc_violations(bars)
    viol_dates = [_iso(t, intraday) for t in index[viol.to_numpy()]]
    close = bars["close"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logret = np.log(close.where(close > 0)).diff().dropna()
    outliers = [_iso(t, intraday) for t in logret.index[_outliers(logret).to_numpy()]]
    splits = _splits(close, intraday)
    zero_vol = int((bars["volume"].fillna(0) <= 0).sum())

    issues = []
    if coverage < LOW_COVERAGE_PCT:
        issues.append(f"coverage {coverage:.1f}% ({n} of ~{expected} expected bars)")
    if gaps:
        widest = max(gaps, key=lambda g: g.calendar_days)
        issues.append(
            f"{len(gaps)} gap(s) in the series; widest {widest.calendar_days:g} days "
            f"from {widest.from_} to {widest.to}"
        )
    if viol_dates:
        issues.append(f"{len(viol_dates)} OHLC violation(s) (e.g. {_listed(viol_dates)})")
    if outliers:
        issues.append(f"{len(outliers)} outlier bar(s) (e.g. {_listed(outliers)})")
    if splits:
        issues.append(
            f"{len(splits)} suspected unadjusted split(s) "
            f"(e.g. {_listed([f'{s.date} ({s.pct_change:+.1f}%)' for s in splits])})"
        )
    if zero_vol:
        issues.append(f"{zero_vol} bar(s) with zero volume: volume-based indicators unreliable")

    return QualityReport(
        timeframe=timeframe,
        n_bars=n,
        start=_iso(index[0], intraday),
        end=_iso(index[-1], intraday),
        expected_bars=expected,
        coverage_pct=round(coverage, 3),
        n_gaps=len(gaps),
        gaps=gaps,
        ohlc_violations=len(viol_dates),
        ohlc_violation_dates=viol_dates[:MAX_LISTED],
        outlier_bars=outliers,
        suspected_splits=splits,
        zero_volume_bars=zero_vol,
        issues=issues,
        calendar=kind.value,
        window_start=window[0].isoformat() if window is not None else None,
        window_end=window[1].isoformat() if window is not None else None,
        window_coverage_pct=window_cover,
        coverage_warnings=edge_warnings,
    )


def bars_sha256(bars: pd.DataFrame) -> str:
    """sha256 of a canonical text form: identical data hashes identically whatever its source.

    Timestamps are ISO (date only when every bar is at midnight, tz converted to
    UTC), OHLCV are written with 6 decimals (the corpus precision), so float64
    round-trips through CSV/parquet/yfinance do not change the hash.
    """
    frame = bars[OHLCV].astype("float64")
    index = pd.DatetimeIndex(frame.index)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    fmt = "%Y-%m-%dT%H:%M:%S" if _is_intraday(index) else "%Y-%m-%d"
    values = frame.to_numpy() + 0.0  # turns -0.0 into 0.0
    lines = ["date,open,high,low,close,volume"]
    stamps = index.strftime(fmt)
    lines.extend(
        stamp + "," + ",".join("nan" if math.isnan(v) else f"{v:.6f}" for v in row)
        for stamp, row in zip(stamps, values.tolist(), strict=True)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
