"""Data-quality report and content hash of an OHLCV frame.

The report is descriptive, never corrective: it tells the researcher what is in
the data (coverage, gaps, broken bars, outliers, unadjusted splits) so that a
strategy's result can be judged against it. Thresholds are module constants so
the data brief can quote them.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

OHLCV = ["open", "high", "low", "close", "volume"]

DAILY_GAP_DAYS = 4  # Fri -> Tue over a long weekend is 4 days: not a gap
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

    @property
    def ok(self) -> bool:
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


def _gaps(index: pd.DatetimeIndex, intraday: bool) -> list[Gap]:
    if len(index) < 2:
        return []
    prev, nxt = index[:-1], index[1:]
    delta_days = (nxt - prev) / pd.Timedelta(days=1)
    if not intraday:
        mask = delta_days > DAILY_GAP_DAYS
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
            mask = (same_day & (hours > INTRADAY_GAP_HOURS)) | (delta_days > DAILY_GAP_DAYS)
    mask = np.asarray(mask)
    return [
        Gap(**{"from": _iso(a, intraday), "to": _iso(b, intraday), "calendar_days": round(d, 3)})
        for a, b, d in zip(prev[mask], nxt[mask], np.asarray(delta_days)[mask], strict=True)
    ]


def _expected_bars(index: pd.DatetimeIndex, intraday: bool) -> int:
    start, end = index[0], index[-1]
    bdays = len(pd.bdate_range(start.normalize(), end.normalize()))
    if not intraday:
        return bdays
    per_day = pd.Series(1, index=index).groupby(index.normalize()).size()
    if per_day.median() >= 20:
        return int((end - start) / pd.Timedelta(hours=1)) + 1
    return int(bdays * per_day.median())


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


def assess_quality(bars: pd.DataFrame, timeframe: str = "1d") -> QualityReport:
    """Describe coverage, gaps, broken bars, outliers and split-like jumps of ``bars``."""
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
    expected = max(_expected_bars(index, intraday), 1)
    coverage = min(100.0, 100.0 * n / expected)

    gaps = _gaps(index, intraday)
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
