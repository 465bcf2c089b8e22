"""A value/quality cross-section: specs, proposals, the statement snapshots and the source.

Every ``rebalance_bars`` bars the strategy ranks the universe's symbols on what their latest
annual statement says at that bar: value (earnings, free-cash-flow and book yield at the
bar's close) and quality (operating margin, gross margin, return on equity), blends the two
ranks with ``value_weight`` and holds the ``top_n`` best equally weighted (long/short: short
the ``top_n`` worst as well). A symbol whose latest statement is older than ``max_age_days``
(period end to the bar) or that has none is not ranked: it is held in cash, never guessed.

The sandboxed child reads no file, so the trusted side embeds the snapshots: ticker ->
((first tradable yyyymmdd, period end yyyymmdd, EPS, FCF/share, book/share, operating margin,
gross margin, ROE), ...). A statement is known at ``altdata.corpus``'s rule (the first NYSE
session after period end + 90 days, at its open); its first tradable day is the first session
whose close is at or after that. Per-share figures are put on the price's split basis
(``altdata.fundamentals.split_factor``): a price times an as-reported share count is wrong by
every split in between. ``snapshots`` cuts the table at a day exactly as
``AltTable.as_of_day`` does: the search's code carries the statements known by the in-sample
end only, the holdout's through the holdout end.

Pure: nothing here imports ``swarm``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any, NamedTuple

import pandas as pd

from altdata.fundamentals import CORPUS_PRICE_BASIS, split_factor
from altdata.pit import KNOWN_AT, TICKER, AltTable
from strategies.earnings_drift import date_key, first_tradable
from strategies.family_api import Proposal
from strategies.param_grid import grid_proposals, nearest, new_spec, settled
from strategies.spec import ParamValue, StrategySpec

KIND = "value_quality"
CLASS_NAME = "ValueQuality"
APPROACH = (
    "Value/quality cross-section: rank the universe on earnings, free-cash-flow and book yield "
    "and on margins and return on equity from the statements known at the bar, and hold the best."
)
GROSS = 0.95  # of the account's value across the positions

GRID: dict[str, tuple[float, ...]] = {
    "value_weight": (0.0, 0.25, 0.5, 0.75, 1.0),
    "top_n": (1, 2, 3, 4, 5),
    "rebalance_bars": (5, 10, 21, 63),
    "max_age_days": (455, 550, 730),
}
INT_PARAMS = frozenset({"top_n", "rebalance_bars", "max_age_days"})
DEFAULTS: dict[str, ParamValue] = {
    "value_weight": 0.5,
    "top_n": 2,
    "rebalance_bars": 21,
    "max_age_days": 550,
}
IDEAS: tuple[tuple[dict[str, ParamValue], bool, str], ...] = (
    ({}, False, "defaults: half value, half quality, top 2"),
    ({"value_weight": 1.0}, False, "pure value"),
    ({"value_weight": 0.0}, False, "pure quality"),
    ({}, True, "long/short"),
    ({"top_n": 3, "rebalance_bars": 63}, False, "top 3, quarterly rebalance"),
    ({"value_weight": 0.75, "top_n": 1}, False, "mostly value, the single best"),
    ({"value_weight": 0.25, "rebalance_bars": 10}, True, "mostly quality, long/short, 10 bars"),
    ({"max_age_days": 455}, False, "fresh statements only"),
)


class Snapshot(NamedTuple):
    """One annual statement as the strategy reads it (per-share figures on the price basis;
    None where the statement cannot give the figure)."""

    day: int  # yyyymmdd of the first bar that may decide on it
    period_end: int  # yyyymmdd
    eps: float | None
    fcf_ps: float | None
    book_ps: float | None
    op_margin: float | None
    gross_margin: float | None
    roe: float | None


SnapshotTable = dict[str, tuple[Snapshot, ...]]


# --------------------------------------------------------------------------- the snapshots


def _num(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _ratio(a: float | None, b: float | None, *, positive_b: bool = False) -> float | None:
    if a is None or b is None or b == 0 or (positive_b and b <= 0):
        return None
    return round(a / b, 10)


def snapshot(row: Mapping[str, Any], ticker: str, price_basis: str) -> Snapshot | None:
    """One statement row as a snapshot; None when it gives no share count (no per-share
    figure can be put on the price basis, and no margin without revenue either)."""
    income, eps_reported = _num(row.get("net_income")), _num(row.get("earnings_per_share"))
    shares = _ratio(income, eps_reported)
    if shares is None or shares <= 0:
        shares = _num(row.get("estimated_shares_outstanding"))
    revenue = _num(row.get("total_revenue"))
    if shares is None or shares <= 0 or revenue is None or revenue <= 0:
        return None
    shares *= split_factor(ticker, row["period_end"], price_basis)
    ocf, capex = _num(row.get("net_cash_flow_operating")), _num(row.get("capital_expenditures"))
    fcf = None if ocf is None or capex is None else ocf + capex  # capex is an outflow (< 0)
    equity = _num(row.get("total_equity"))
    return Snapshot(
        day=date_key(first_tradable(row[KNOWN_AT])),
        period_end=date_key(pd.Timestamp(str(row["period_end"])[:10]).date()),
        eps=_ratio(income, shares),
        fcf_ps=_ratio(fcf, shares),
        book_ps=_ratio(equity, shares),
        op_margin=_ratio(_num(row.get("operating_income")), revenue),
        gross_margin=_ratio(_num(row.get("gross_profit")), revenue),
        roe=_ratio(income, equity, positive_b=True),
    )


def snapshots(
    table: AltTable,
    tickers: Iterable[str],
    *,
    through: date,
    price_basis: str = CORPUS_PRICE_BASIS,
) -> SnapshotTable:
    """Each ticker's statements known by the close of ``through`` (``AltTable.as_of_day``:
    the trusted side's cut), as snapshots in the order they became tradable. A restatement
    is a row of its own, tradable when it was known."""
    known = table.as_of_day(through)
    out: SnapshotTable = {}
    for ticker in tickers:
        rows = known[known[TICKER] == ticker]
        found = [snapshot(row, ticker, price_basis) for row in rows.to_dict("records")]
        out[ticker] = tuple(sorted(s for s in found if s is not None))
    return out


def covered(table: SnapshotTable) -> list[str]:
    """The tickers with at least one snapshot (the others are never ranked)."""
    return sorted(t for t, rows in table.items() if rows)


# --------------------------------------------------------------------------- specs


def snap(name: str, value: ParamValue) -> ParamValue:
    """``value`` moved to the nearest grid point of ``name`` (ties: the lower one)."""
    best = nearest(GRID[name], value)
    return int(best) if name in INT_PARAMS else float(best)


def reconcile(spec: StrategySpec) -> StrategySpec:
    """Exactly the parameters the code reads, snapped to the grid; no blocks; portfolio scope."""
    params = {k: snap(k, spec.parameters.get(k, d)) for k, d in DEFAULTS.items()}
    return settled(spec, KIND, params).model_copy(update={"scope": "portfolio"})


def vq_spec(
    parameters: dict[str, ParamValue] | None = None, *, long_short: bool = False
) -> StrategySpec:
    """A value/quality spec with ``parameters``, reconciled and named."""
    return named(reconcile(new_spec(KIND, APPROACH, parameters, long_short=long_short)))


def named(spec: StrategySpec) -> StrategySpec:
    """Named by its side and every parameter, so two specs never share a name."""
    p = spec.parameters
    side = "ls" if spec.long_short else "long"
    name = (
        f"{KIND}-{side} | value {float(p['value_weight']):g}, top {p['top_n']}, "
        f"every {p['rebalance_bars']} bars, statements <= {p['max_age_days']} days"
    )
    return spec.model_copy(update={"name": name})


# --------------------------------------------------------------------------- proposals


def effective(spec: StrategySpec, n_ranked: int) -> StrategySpec:
    """``spec`` as it trades when at most ``n_ranked`` symbols can be ranked: ``top_n`` beyond
    what the code can hold (``n_ranked - 1`` long only, ``n_ranked // 2`` long/short) buys
    the same book as that cap does."""
    p = dict(spec.parameters)
    cap = max(1, n_ranked // 2 if spec.long_short else n_ranked - 1)
    p["top_n"] = min(int(p["top_n"]), cap)
    return spec.model_copy(update={"parameters": p})


def propose(
    *,
    route: str,
    n: int,
    rng: random.Random,
    seen: set[str],
    best: tuple[str, StrategySpec] | None,
    n_ranked: int | None = None,
    tried: Iterable[StrategySpec] = (),
) -> list[Proposal]:
    """Up to ``n`` fresh specs (no trial key in ``seen``), deterministic for ``rng``.

    INITIAL and RESEARCH (or no own best yet): the listed ideas, then random grid points.
    TUNE and FIX: grid steps around the best. REFINE: the other side first, then grid steps.
    With ``n_ranked`` (the symbols the search's snapshots cover), a spec that would hold the
    same book as one of ``tried``, the best or another proposal (a ``top_n`` past the cap)
    is not proposed: the gate would count a trial that cannot differ."""
    return grid_proposals(
        route=route,
        n=n,
        rng=rng,
        seen=seen,
        best=best,
        grid=GRID,
        snap=snap,
        ideas=IDEAS,
        make=lambda params, long_short: vq_spec(params, long_short=long_short),
        settle=lambda spec: named(reconcile(spec)),
        trades_as=None if n_ranked is None else (lambda s: effective(s, n_ranked).trial_key()),
        tried=list(tried),
    )


# --------------------------------------------------------------------------- the source


def _literal(value: float | None) -> str:
    return "None" if value is None else repr(float(value))


def _table(table: SnapshotTable) -> list[str]:
    lines = ["SNAPSHOTS = {"]
    for ticker in sorted(table):
        name = '"' + ticker.replace("\\", "").replace('"', "") + '"'
        rows = table[ticker]
        if not rows:
            lines.append(f"    {name}: (),")
            continue
        lines.append(f"    {name}: (")
        for s in rows:
            figures = ", ".join(_literal(v) for v in s[2:])
            lines.append(f"        ({int(s.day)}, {int(s.period_end)}, {figures}),")
        lines.append("    ),")
    lines.append("}")
    return lines


_CLASS = '''


class {class_name}(bt.Strategy):
    """{title}

    Family: value_quality (portfolio, {side}). Statements embedded for {tickers}.
    Every rebalance_bars bars each feed with a statement known at the bar (its day in
    SNAPSHOTS reached) and no older than max_age_days gets two ranks among those feeds:
    value (earnings, free-cash-flow and book yield at the bar's close) and quality
    (operating margin, gross margin, return on equity), each the mean of its measures'
    percentile ranks. The score blends them (value_weight on value); the top_n best are held
    with equal weights (long/short: the top_n worst shorted too). A feed that cannot be
    ranked is held in cash. Orders are target-percent market orders: a rebalance on a bar's
    close fills at the next bar's open; reductions are sent before additions.
    """

    params = (
        ("value_weight", {value_weight!r}),
        ("top_n", {top_n}),
        ("rebalance_bars", {rebalance_bars}),
        ("max_age_days", {max_age_days}),
        ("allow_short", {allow_short}),
        ("gross", {gross!r}),
    )

    def __init__(self):
        self.traded = list(self.datas)
        self.rows = [self._rows(d) for d in self.traded]
        self.cursor = [0 for d in self.traded]
        self.latest = [None for d in self.traded]

    def _rows(self, d):
        if d._name in SNAPSHOTS:
            return SNAPSHOTS[d._name]
        source = d.p.dataname
        if isinstance(source, str):  # a CSV path under plain backtrader: its stem is the ticker
            stem = source.replace("\\\\", "/").split("/")[-1].split(".")[0].upper()
            return SNAPSHOTS.get(stem, ())
        return ()

    def _known(self, i, today):
        """The feed's latest statement known at the bar, as (period end, figures...): the
        latest period end; a restatement of it, known later, replaces it."""
        rows = self.rows[i]
        while self.cursor[i] < len(rows):
            row = rows[self.cursor[i]]
            day, period_end, *figures = row
            if day > today:
                break
            self.cursor[i] += 1
            if self.latest[i] is None or period_end >= self.latest[i][0]:
                self.latest[i] = (period_end, *figures)
        return self.latest[i]

    @staticmethod
    def _age_days(today, period_end):
        """Calendar days from a yyyymmdd period end to a yyyymmdd bar (exact, by ordinal)."""
        def ordinal(key):
            y, m, d = key // 10000, key // 100 % 100, key % 100
            a = (14 - m) // 12
            yy, mm = y + 4800 - a, m + 12 * a - 3
            return d + (153 * mm + 2) // 5 + 365 * yy + yy // 4 - yy // 100 + yy // 400
        return ordinal(today) - ordinal(period_end)

    @staticmethod
    def _ranks(values):
        """Percentile rank of each present value among the present ones (ties averaged):
        index -> 0 (lowest) .. 1 (highest)."""
        present = [(v, i) for i, v in values.items() if v is not None]
        if len(present) < 2:
            return {{}}
        out = {{}}
        for v, i in present:
            below = sum(1 for w, _ in present if w < v)
            same = sum(1 for w, _ in present if w == v) - 1
            out[i] = (below + 0.5 * same) / (len(present) - 1)
        return out

    def scores(self, today):
        """Blended value/quality score of each rankable feed (by position in self.traded)."""
        measures = {{k: {{}} for k in ("ey", "fy", "by", "om", "gm", "roe")}}
        for i, d in enumerate(self.traded):
            row = self._known(i, today)
            price = d.close[0]
            if row is None or not price > 0:
                continue
            period_end, eps, fcf, book, om, gm, roe = row
            if self._age_days(today, period_end) > self.p.max_age_days:
                continue  # stale: the statement no longer says what the company is
            measures["ey"][i] = None if eps is None else eps / price
            measures["fy"][i] = None if fcf is None else fcf / price
            measures["by"][i] = None if book is None else book / price
            measures["om"][i], measures["gm"][i], measures["roe"][i] = om, gm, roe
        ranks = {{k: self._ranks(v) for k, v in measures.items()}}
        rankable = set(measures["ey"])
        out = {{}}
        for i in rankable:
            value = [ranks[k][i] for k in ("ey", "fy", "by") if i in ranks[k]]
            quality = [ranks[k][i] for k in ("om", "gm", "roe") if i in ranks[k]]
            if not value and not quality:
                continue
            v = sum(value) / len(value) if value else 0.5
            q = sum(quality) / len(quality) if quality else 0.5
            out[i] = self.p.value_weight * v + (1.0 - self.p.value_weight) * q
        return out

    def targets(self, today):
        """Target weight of each feed: the rebalance's decision (empty: all cash)."""
        scored = sorted(((s, i) for i, s in self.scores(today).items()), reverse=True)
        if len(scored) < 2:
            return {{}}  # nothing to rank against: cash
        shorts = self.p.allow_short
        n = max(1, min(self.p.top_n, len(scored) // 2 if shorts else len(scored) - 1))
        weights = {{}}
        budget = self.p.gross / 2.0 if shorts else self.p.gross
        for rank, (score, i) in enumerate(scored):
            if rank < n:
                weights[i] = budget / n
            elif shorts and rank >= len(scored) - n:
                weights[i] = -budget / n
        return weights

    def next(self):
        day = self.datas[0].datetime.date(0)
        today = day.year * 10000 + day.month * 100 + day.day
        for i in range(len(self.traded)):
            self._known(i, today)  # every statement reached is read, rebalance or not
        if len(self) % self.p.rebalance_bars:
            return
        weights = self.targets(today)
        value = self.broker.getvalue()
        if not value > 0:
            return
        now = []
        for d in self.traded:
            now.append(self.getposition(d).size * d.close[0] / value)
        for i, d in enumerate(self.traded):
            if weights.get(i, 0.0) < now[i]:
                self.order_target_percent(data=d, target=weights.get(i, 0.0))
        for i, d in enumerate(self.traded):
            if weights.get(i, 0.0) > now[i]:
                self.order_target_percent(data=d, target=weights.get(i, 0.0))
'''


def render(spec: StrategySpec, table: SnapshotTable) -> str:
    """The complete module for ``spec`` trading on ``table``'s statements; passes
    ``validate_code``."""
    if spec.family.value != KIND:
        raise ValueError(f"spec {spec.name!r} is not a {KIND} spec")
    p = reconcile(spec).parameters
    title = "".join(ch if ch.isprintable() else " " for ch in spec.name)
    title = title.replace("\\", "/").replace('"', "'")
    body = _CLASS.format(
        class_name=CLASS_NAME,
        title=title,
        side="long and short" if spec.long_short else "long only",
        tickers=", ".join(covered(table)) or "no ticker",
        value_weight=float(p["value_weight"]),
        top_n=int(p["top_n"]),
        rebalance_bars=int(p["rebalance_bars"]),
        max_age_days=int(p["max_age_days"]),
        allow_short=bool(spec.long_short),
        gross=GROSS,
    )
    head = [
        f'"""Generated Backtrader strategy: {title} (trial {spec.trial_key()})."""',
        "",
        "import backtrader as bt",
        "",
        "# ticker -> ((first tradable yyyymmdd, period end yyyymmdd, EPS, FCF/share, book/share,",
        "#   operating margin, gross margin, ROE), ...): per-share figures on the prices' split",
        "# basis, computed on the trusted side from the statements known by the window's end.",
        *_table(table),
    ]
    return "\n".join(head) + body
