"""``decide``: one grounded decision for a ticker and a date, as a pure, cacheable function.

Given the same bars up to the date, config, brain, headlines and recalled reviews, it returns
the same :class:`Decision`: nothing after the date is read (the bars are cut here, headlines
are filtered by date), and nothing volatile (clock, paths) enters it. A replay over many
dates (the backtestable family) calls it once per rebalance date through
:class:`DecisionCache`, keyed by :func:`decision_key`.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from backtest.data import bars_sha256
from swarm.analyze.analysts import RULES_ANALYSTS, AnalystBrain
from swarm.analyze.contracts import AnalysisConfig, AnalystRole, Decision, Recalled
from swarm.errors import UserInputError
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.news import NewsItem

if TYPE_CHECKING:
    from altdata.corpus import AltData

# What the desk cannot work without at the date: ATR for the stop, the slowest indicators
# the market analyst reads (SMA_50, MACD, ADX) and the 60-bar forecast band.
REQUIRED_KEYS = (
    "ATR_14",
    "RSI_14",
    "SMA_50",
    "MACD_12_26_9",
    "ADX_14",
    "EMA_20",
    "FORECAST_MID_60_10",
)
MIN_HISTORY_BARS = 61
# The desk's rules enter every decision key: a change that makes the same inputs decide
# differently bumps it, so the on-disk cache never replays a decision made under older rules
# (2: issue 28, the forecast barred from the risk path and seed 002's opposition; 3: issue 28
# item 5, rebuttals that rebut and risk rounds that react).
RULES_VERSION = 3


class InsufficientHistoryError(UserInputError):
    """The date leaves too few bars before it for the indicators."""


def cut_at(bars: pd.DataFrame, date: str | pd.Timestamp) -> pd.DataFrame:
    """The bars up to and including ``date`` (the end of that day for intraday bars)."""
    end = pd.Timestamp(date).normalize() + pd.Timedelta(days=1) - pd.Timedelta(1)
    return bars.loc[bars.index <= end]


def check_history(bundle: FeatureBundle, atr_period: int = 14) -> None:
    """Raise InsufficientHistoryError when the bars up to the date leave a required feature
    undefined."""
    keys = tuple(dict.fromkeys((*REQUIRED_KEYS, f"ATR_{atr_period}")))
    missing = [k for k in keys if k not in bundle.snapshot(keys)]
    if missing:
        raise InsufficientHistoryError(
            f"--date: {bundle.as_of} leaves {bundle.n_bars} bars of {bundle.symbol}, too few for "
            f"{', '.join(missing)} (need at least {MIN_HISTORY_BARS}); pick a later date"
        )


def decision_key(
    ticker: str,
    date: str,
    bars: pd.DataFrame,
    config: AnalysisConfig,
    brain_name: str,
    *,
    news: Sequence[NewsItem] = (),
    recalled: Sequence[Recalled] = (),
    bars_sha: str | None = None,
) -> str:
    """sha256 of everything a decision depends on; bars and headlines only up to the date.

    ``bars_sha``: ``bars_sha256`` of the bars cut at the date, when the caller has it (a
    replay over many dates hashes the prefixes incrementally instead of once per date)."""
    day = pd.Timestamp(date).date()
    if bars_sha is None:
        cut = cut_at(bars, date)
        bars_sha = bars_sha256(cut) if len(cut) else ""
    payload = {
        "ticker": ticker.upper(),
        "date": str(day),
        "bars": bars_sha,
        "config": config.model_dump(mode="json"),
        "brain": brain_name,
        "news": sorted(
            f"{n.date}|{n.ticker}|{n.headline}"
            for n in news
            if n.date <= day and n.ticker in (None, ticker.upper())
        ),
        "recalled": sorted(r.id for r in recalled),
        "rules": RULES_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def decide(
    ticker: str,
    date: str | pd.Timestamp,
    bars: pd.DataFrame,
    config: AnalysisConfig,
    brain=None,
    *,
    news: Sequence[NewsItem] = (),
    recalled: Sequence[Recalled] = (),
    analysts: Mapping[AnalystRole, AnalystBrain] | None = None,
    data_info: Mapping[str, str | int] | None = None,
    alt: AltData | None = None,
    in_process: bool = False,
) -> Decision:
    """Run the analysis graph on ``bars`` cut at ``date``. Raises InsufficientHistoryError
    when the indicators are not defined yet at the date. ``alt``: point-in-time alternative
    data for the fundamentals and sentiment analysts (rows known by the date's close).
    ``in_process``: call the graph's nodes in its order in this thread (the same decision,
    for replays of many dates with the rules brain; an LLM brain always runs the graph)."""
    from swarm.analyze.graph import build_analyze_graph, run_in_process
    from swarm.analyze.nodes import AnalysisInputs, Brain

    ticker = ticker.upper()
    cut = cut_at(bars, date)
    if cut.empty:
        raise UserInputError(
            f"--date: {pd.Timestamp(date).date()} is before the first bar of "
            f"{ticker}; pick a date inside the data"
        )
    bundle = compute_features(ticker, cut)
    check_history(bundle, config.atr_period)
    rctx = ResearchContext(
        news_items=list(news),
        alt=alt,
        news_window_days=config.news_window_days,
        analyst_window_days=config.sentiment_window_days,
        offline=True,
    )
    info = dict(data_info or {})
    sha = info.pop("sha256", None) or bars_sha256(cut)  # a replay passes the one it has
    data = {
        "first_bar": str(cut.index[0].date()),
        "last_bar": bundle.as_of,
        "n_bars": len(cut),
        "sha256": sha,
        **info,
    }
    brain = brain or Brain()
    masked_client = None
    if brain.llm is not None:
        brain, masked_client = _masked_brain(brain, ticker, cut, bundle)
    inputs = AnalysisInputs(
        ticker=ticker,
        bundle=bundle,
        rctx=rctx,
        config=config,
        brain=brain,
        recalled=list(recalled),
        analysts=analysts or RULES_ANALYSTS,
        data=data,
    )
    # A root run in an empty context: called inside a develop-graph node (the replay), the
    # graph would otherwise run as its subgraph and checkpoint every step into the run's
    # database (a 168-decision replay wrote 1,860 checkpoints, 42 MB).
    if in_process and brain.llm is None:
        out = run_in_process(inputs)
    else:
        out = contextvars.Context().run(build_analyze_graph().invoke, {}, context=inputs)
    decision = out["decision"]
    if brain.masking is None:
        return decision  # the rules brain: nothing about masking enters its decision
    masking = dict(brain.masking)
    if masked_client is not None:
        masking["leaks"] = masked_client.leaks.summary()
    return decision.model_copy(update={"masking": masking})


def _masked_brain(brain, ticker: str, cut: pd.DataFrame, bundle: FeatureBundle):
    """(the brain the graph runs with, its MaskedClient or None). The policy is decided per
    decision: the data the model sees starts at the rebasing window's first bar."""
    from dataclasses import replace

    from swarm.llm.cutoff import policy_for
    from swarm.llm.mask import WINDOW_BARS, context_for
    from swarm.llm.masked import MaskedClient

    base = brain.llm.base if isinstance(brain.llm, MaskedClient) else brain.llm
    policy = policy_for(base.settings, cut.index[-WINDOW_BARS:][0].date())
    if not policy.masked:
        return replace(brain, llm=base, masking=policy.summary()), None
    # Inside a develop run the run's masked client knows the corpus's names and sectors.
    known = brain.llm.ctx.known if isinstance(brain.llm, MaskedClient) else brain.known
    ctx = context_for(
        [ticker], bundle.as_of, bars=cut, evidence=bundle.snapshot(bundle.keys), known=known
    )
    client = MaskedClient(base, ctx)
    return replace(brain, llm=client, masking=policy.summary()), client


class DecisionCache:
    """Decisions on disk by :func:`decision_key`: a rerun, or TUNE moving an unrelated
    parameter, replays them for free. One JSON file per key, written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Decision | None:
        """The cached decision for ``key``, or None (a missing or damaged entry counts as a miss)."""
        path = self._path(key)
        if not path.exists():
            self.misses += 1
            return None
        try:
            found = Decision.model_validate_json(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None  # a damaged entry is a miss
        self.hits += 1
        return found

    def put(self, key: str, decision: Decision) -> None:
        """Store ``decision`` under ``key`` atomically (a temp file, then a rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(decision.model_dump_json())
        tmp.replace(path)
