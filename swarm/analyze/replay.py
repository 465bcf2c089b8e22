"""The decision pipeline over many dates: the trusted side of the ``decision_pipeline`` family.

For each ticker and each rebalance date (the last bar of each week) inside the windows a run
backtests, :func:`swarm.analyze.pipeline.decide` runs on the bars cut at that date; the
decisions become the literal table the generated strategy replays
(``strategies.decision_family``).

What is cached, and why it is honest: a decision is stored under ``decision_key`` of its
*core* config, the parameters that shape the analysts, the debate and the judge (debate
rounds, conviction floor). Risk % and the horizon only size and time the trade: the
deterministic risk engine re-sizes a cached decision with them (:func:`apply_sizing`, the
same checks and formula as the graph's), so TUNE can move them without one new analyst or
debate call, while every distinct parameter set is still its own trial in the ledger.

The account is the replay's own: every ticker's decisions are sized in date order against one
book (``swarm.analyze.book.ReplayBook``) of the positions the earlier decisions opened and not
yet closed, so the engine's limits on positions, exposure, daily loss and margin bite. The
book is rebuilt from the cached core decisions on every build: deterministic, never cached.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from backtest.data import OHLCV, bars_sha256
from strategies.decision_family import DecisionRow, DecisionTable, date_key, pipeline_parameters
from strategies.spec import StrategySpec
from swarm.analyze import risk as risk_rules
from swarm.analyze.book import ReplayBook
from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    Decision,
    RiskEngineResult,
    RiskLimits,
    Status,
)
from swarm.analyze.nodes import Brain, settle
from swarm.analyze.pipeline import (
    MIN_HISTORY_BARS,
    DecisionCache,
    InsufficientHistoryError,
    cut_at,
    decide,
    decision_key,
)
from swarm.errors import UserInputError

STATS_FILE = "decision_pipeline.json"
BUDGET_WORDS = "budget exhausted"  # what the LLM client answers once the budget is spent


class BudgetExhaustedError(RuntimeError):
    """The LLM token budget ran out while the pipeline was deciding: stop, keep what is done."""


def default_decision_cache_dir() -> Path:
    """``<user cache dir>/swarm-lab/decisions``: shared by runs, never in the source tree."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("swarm-lab")) / "decisions"


# --------------------------------------------------------------------------- pure pieces


def core_config(params: Mapping[str, Any]) -> AnalysisConfig:
    """The config the analysts, debate and judge see: what a cached decision depends on."""
    return AnalysisConfig(
        debate_rounds=int(params["debate_rounds"]),
        conviction_floor=float(params["conviction_floor"]),
    )


def sized_config(core: AnalysisConfig, params: Mapping[str, Any], capital: float) -> AnalysisConfig:
    """``core`` plus what only sizes and times the trade (``risk_pct`` is a fraction here)."""
    return AnalysisConfig.model_validate(
        core.model_dump()
        | {
            "risk_pct": float(params["risk_pct"]) * 100.0,
            "capital": float(capital),
            "horizon_days": int(params["horizon_bars"]),
        }
    )


def apply_sizing(decision: Decision, cfg: AnalysisConfig) -> Decision:
    """``decision`` re-sized by the deterministic risk engine under ``cfg``: the same checks,
    formula and settlement as the graph's risk-engine and finalize nodes."""
    risk = decision.risk.model_copy(update={"capital": cfg.capital, "risk_pct": cfg.risk_pct})
    judge, thesis = risk.judge, decision.trader
    if decision.status == Status.DEGRADED or judge is None or thesis is None:
        return decision.model_copy(update={"config": cfg, "risk": risk})
    thesis = thesis.model_copy(update={"horizon_days": cfg.horizon_days})
    engine = (
        RiskEngineResult() if judge.action == Action.HOLD else risk_rules.risk_engine(thesis, cfg)
    )
    action, status, reason = settle(judge, engine, thesis)
    risk = risk.model_copy(
        update=dict(
            checks={c.name.value: c.passed for c in engine.checks},
            check_details=engine.checks,
            size=engine.size,
            notional=engine.notional,
            risk_amount=engine.risk_amount,
            approved=engine.approved,
            rejected_by=engine.failed,
        )
    )
    return decision.model_copy(
        update=dict(
            config=cfg, risk=risk, trader=thesis, action=action, status=status, reason=reason
        )
    )


def rebalance_dates(
    index: pd.DatetimeIndex, windows: Iterable[tuple[date, date]]
) -> list[pd.Timestamp]:
    """The last bar of each calendar week inside any of ``windows`` (inclusive)."""
    idx = pd.DatetimeIndex(index).sort_values()
    keep = pd.Series(False, index=idx)
    for start, end in windows:
        hi = pd.Timestamp(end) + pd.Timedelta(days=1)
        keep |= (idx >= pd.Timestamp(start)) & (idx < hi)
    inside = idx[keep.to_numpy()]
    if inside.empty:
        return []
    weeks = pd.Series(inside, index=inside.to_period("W"))
    return [pd.Timestamp(t) for t in weeks.groupby(level=0).last()]


def prefix_sha256(bars: pd.DataFrame, days: Sequence[pd.Timestamp]) -> dict[pd.Timestamp, str]:
    """``bars_sha256(cut_at(bars, day))`` for each day, in one pass over the bars.

    sha256 streams, so each prefix's digest is a copy of the running hash: the same text
    ``bars_sha256`` writes, line by line. Intraday frames take the direct route (the
    timestamp format depends on the prefix there)."""
    frame = bars[OHLCV].astype("float64")
    index = pd.DatetimeIndex(frame.index)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    if bool((index != index.normalize()).any()):
        return {d: bars_sha256(cut_at(bars, d)) for d in days}
    ends = {d: len(cut_at(bars, d)) for d in days}  # rows in each prefix
    want: dict[int, list[pd.Timestamp]] = {}
    for d, n in ends.items():
        want.setdefault(n, []).append(d)
    out = {
        d: hashlib.sha256(b"date,open,high,low,close,volume").hexdigest() for d in want.get(0, [])
    }
    h = hashlib.sha256(b"date,open,high,low,close,volume")
    values = (frame.to_numpy() + 0.0).tolist()  # + 0.0 turns -0.0 into 0.0, as bars_sha256
    for i, (stamp, row) in enumerate(zip(index.strftime("%Y-%m-%d"), values, strict=True), 1):
        cells = ",".join("nan" if math.isnan(v) else f"{v:.6f}" for v in row)
        h.update(f"\n{stamp},{cells}".encode())
        for d in want.get(i, ()):
            out[d] = h.hexdigest()
    return out


def decision_row(decision: Decision) -> DecisionRow | None:
    """The replay's row for a decision that trades; None for a HOLD, DEGRADED or REJECTED."""
    if decision.action == Action.HOLD or decision.trader is None or decision.risk.size < 1:
        return None
    t = decision.trader
    return DecisionRow(
        1 if decision.action == Action.BUY else -1, t.stop, t.target, decision.risk.size
    )


# --------------------------------------------------------------------------- the replayer


class ReplayStats(BaseModel):
    """What the pipeline cost: surfaced as a progress line and ``decision_pipeline.json``."""

    brain: str = "rules"
    pipeline_calls: int = 0  # decide() ran: analysts, debate, trader, risk team, judge
    cache_hits: int = 0  # decisions read from the on-disk cache
    memo_hits: int = 0  # decisions reused inside this run (another variant, same core config)
    too_little_history: int = 0  # dates before the indicators are defined: no decision
    decisions: int = 0
    trades: int = 0  # decisions that trade (BUY/SELL approved by the risk engine)
    # check -> trades the judge wanted and that check refused (the book's checks among them)
    rejected: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    llm_live_calls: int = 0
    budget_exhausted: bool = False
    # Why the winner's holdout has no decisions of its own (the budget ran out there), for
    # the verdict's reason; None when it has them or the run never reached the holdout.
    holdout_note: str | None = None
    cache_dir: str | None = None
    variants: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def per_second(self) -> float:
        """Pipeline calls per second of the replay (0 before any time has passed)."""
        return self.pipeline_calls / self.seconds if self.seconds > 0 else 0.0


class DecisionReplayer:
    """Decisions for many (ticker, date) pairs, through the on-disk cache and a run memo."""

    def __init__(
        self,
        *,
        cache: DecisionCache | None,
        brain: Brain | None = None,
        news: Sequence = (),
        limits: RiskLimits | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits or RiskLimits()
        self.brain = brain or Brain()
        self.news = list(news)
        self.stats = ReplayStats(
            brain=self.brain.name, cache_dir=str(cache.root) if cache else None
        )
        self._memo: dict[tuple[str, str, str, str], Decision | None] = {}

    def core_decision(
        self, ticker: str, bars: pd.DataFrame, day: pd.Timestamp, cfg: AnalysisConfig, sha: str
    ) -> Decision | None:
        """The core decision at ``day`` (None: too little history); ``sha``: the bars' up to
        ``day`` (``prefix_sha256``)."""
        memo_key = (ticker, str(day.date()), cfg.model_dump_json(), sha)
        if len(cut_at(bars, day)) < MIN_HISTORY_BARS:  # known without asking the desk
            self.stats.too_little_history += 1
            return None
        if memo_key in self._memo:
            self.stats.memo_hits += 1
            return self._memo[memo_key]
        key = decision_key(
            ticker, str(day.date()), bars, cfg, self.brain.cache_name, news=self.news, bars_sha=sha
        )
        found = self.cache.get(key) if self.cache is not None else None
        if found is not None:
            self.stats.cache_hits += 1
        else:
            found = self._decide(ticker, bars, day, cfg, key, sha)
        self._memo[memo_key] = found
        return found

    def _decide(self, ticker, bars, day, cfg, key, sha) -> Decision | None:
        llm = self.brain.llm
        if llm is not None and llm.exhausted:
            self.stats.budget_exhausted = True
            raise BudgetExhaustedError(_budget_message(llm, self.stats))
        started, live = time.perf_counter(), llm.n_live_calls if llm is not None else 0
        try:
            decision = decide(
                ticker,
                day,
                bars,
                cfg,
                self.brain,
                news=self.news,
                data_info={"sha256": sha},
                in_process=True,  # the rules brain without LangGraph's per-step cost
            )
        except (InsufficientHistoryError, UserInputError):
            self.stats.too_little_history += 1
            return None
        finally:
            self.stats.pipeline_calls += 1
            self.stats.seconds += time.perf_counter() - started
            if llm is not None:
                self.stats.llm_live_calls += llm.n_live_calls - live
        if any(
            BUDGET_WORDS in str(e.get("reasons", e.get("error", ""))) for e in decision.llm_events
        ):
            # Part of this decision fell back for lack of budget: neither cached nor used.
            self.stats.budget_exhausted = True
            raise BudgetExhaustedError(_budget_message(llm, self.stats))
        if self.cache is not None:
            self.cache.put(key, decision)
        return decision

    def sized_decisions(
        self,
        spec: StrategySpec,
        bars: Mapping[str, pd.DataFrame],
        windows: Sequence[tuple[date, date]],
        *,
        capital: float,
    ) -> dict[str, dict[pd.Timestamp, Decision]]:
        """ticker -> rebalance date -> the decision sized for ``spec``, for every rebalance
        date of ``windows`` with enough history. Only ``bars`` are read: a caller that must
        not look past a date hands in bars cut there. The decisions share one
        :class:`~swarm.analyze.book.ReplayBook` in date order, so the engine's position,
        exposure, daily-loss and margin checks see what the earlier ones left open."""
        params = pipeline_parameters(spec)
        core = core_config(params)
        sized = sized_config(core, params, capital)
        sized = sized.model_copy(update={"limits": self.limits})
        before = self.stats.model_copy()
        cores: list[tuple[pd.Timestamp, str, Decision]] = []
        for ticker, frame in bars.items():
            days = rebalance_dates(frame.index, windows)
            shas = prefix_sha256(frame, days)
            for day in days:
                decision = self.core_decision(ticker, frame, day, core, shas[day])
                if decision is not None:
                    cores.append((day, ticker, decision))
        # One account for every ticker, in date order (tickers by name within a day), so a
        # decision is sized and checked against the positions the earlier ones left open.
        book = ReplayBook(capital=sized.capital, short_margin=sized.limits.short_margin, bars=bars)
        out: dict[str, dict[pd.Timestamp, Decision]] = {ticker: {} for ticker in bars}
        trades, rejected = 0, Counter[str]()
        for day, ticker, decision in sorted(cores, key=lambda c: (c[0], c[1])):
            self.stats.decisions += 1
            cfg = sized.model_copy(update={"portfolio": book.portfolio(day)})
            out[ticker][day] = resized = apply_sizing(decision, cfg)
            book.record(ticker, day, resized)
            trades += decision_row(resized) is not None
            rejected.update(c.value for c in resized.risk.rejected_by)
        self.stats.trades += trades
        for name, n in rejected.items():
            self.stats.rejected[name] = self.stats.rejected.get(name, 0) + n
        self.stats.variants.append(
            {
                "spec": spec.name,
                "trial_key": spec.trial_key(),
                "pipeline_calls": self.stats.pipeline_calls - before.pipeline_calls,
                "cache_hits": self.stats.cache_hits - before.cache_hits,
                "memo_hits": self.stats.memo_hits - before.memo_hits,
                "decisions": self.stats.decisions - before.decisions,
                "trades": trades,
                "rejected": dict(sorted(rejected.items())),
            }
        )
        return out

    def table(
        self,
        spec: StrategySpec,
        bars: Mapping[str, pd.DataFrame],
        windows: Sequence[tuple[date, date]],
        *,
        capital: float,
    ) -> DecisionTable:
        """ticker -> yyyymmdd -> row, for every rebalance date of ``windows``."""
        return to_table(self.sized_decisions(spec, bars, windows, capital=capital))


def to_table(decisions: Mapping[str, Mapping[pd.Timestamp, Decision]]) -> DecisionTable:
    """The replay's table of sized decisions: only those that trade."""
    table: DecisionTable = {}
    for ticker, by_day in decisions.items():
        rows = ((date_key(day), decision_row(d)) for day, d in by_day.items())
        table[ticker] = {key: row for key, row in rows if row is not None}
    return table


def _budget_message(llm: Any, stats: ReplayStats) -> str:
    used = getattr(llm, "tokens_used", "?")
    limit = getattr(getattr(llm, "settings", None), "max_tokens", "?")
    return (
        f"decision pipeline: LLM token budget exhausted ({used} of {limit} tokens) after "
        f"{stats.pipeline_calls} pipeline calls; stopping cleanly (the decisions made so "
        "far are cached: a rerun with a larger --max-llm-tokens continues from them)"
    )
