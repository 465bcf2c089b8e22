"""Prepare a run (validate data, split time, create the run folder) and execute the graph.

The graph runs with LangGraph's SQLite checkpointer, stored in the run folder
(``checkpoints.sqlite``, thread id = run id, ``durability="sync"``: a super-step's
checkpoint is committed before the next one starts), so an interrupted run — killed,
crashed, interrupted — continues from its last super-step with ``prepare_resume`` +
``execute``. Each finished task of a fan-out (a backtest, a research subagent) has its
writes saved as it finishes, so a resume re-runs only the tasks that had not finished.

A resume replays, at most, the super-step that was running. Its side effects and why a
replay is safe:

- files (research/, strategies/, backtests/, charts/, report, verdict, winner/): written
  atomically (tmp + rename) with deterministic content — a replay writes the same bytes;
- experiments.jsonl: appends carry a content ``record_id`` and the tracker skips ids already
  in the file (a torn last line is cut on open), so a replayed router or holdout step adds
  only the records the killed one had not written, in the same order;
- the sealed holdout: a kill during the holdout step re-runs the same winner on it; the
  result is the same and is still never fed back;
- research memory (swarm.memory): upserts with deterministic ids;
- progress lines on stderr: repeated, cosmetic.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from backtest.benchmark import BUY_AND_HOLD, CASH, Benchmark
from backtest.data import LoadedBars, load_bars, load_universe, periods_per_year
from backtest.errors import BacktestError
from backtest.executor import make_executor
from backtest.splits import holdout_fold, split_holdout, walk_forward_folds
from experiments.runfolder import RunFolder, build_manifest, git_state, new_run_id
from gate.contracts import Criteria, LoopCounters
from strategies.spec import Origin
from swarm.config import RunConfig
from swarm.context import RunContext
from swarm.errors import UserInputError
from swarm.progress import Progress
from swarm.regime_data import load_index_series
from swarm.state import checkpoint_allowlist

RECURSION_LIMIT = 1_000  # ~8 super-steps per iteration; far above any configured limit
CHECKPOINT_FILE = "checkpoints.sqlite"
MANIFEST_FILE = "manifest.json"
MIN_BENCHMARK_OVERLAP = 60  # in-sample returns a benchmark must share with the universe


@dataclass
class Prepared:
    config: RunConfig
    criteria: Criteria
    run: RunFolder
    context_kwargs: dict[str, Any]
    progress: Progress
    resumed: bool = False


@dataclass
class Outcome:
    """What ``execute`` did: the final state, and whether there was anything left to do."""

    state: dict[str, Any]
    already_finished: bool = False
    resumed_from_step: int | None = None  # the super-step a resume continued from
    checkpoints: dict[str, Any] = field(default_factory=dict)


def _offline_fetch(symbol: str, **_: Any) -> pd.DataFrame:
    raise ConnectionError("--offline: network disabled")


def _load(config: RunConfig) -> tuple[dict[str, LoadedBars], dict[str, Any], dict[str, Any]]:
    """Load the bars and split time: (data, context pieces, the manifest's data summary)."""
    try:
        data = load_universe(
            config.tickers,
            start=config.start,
            end=config.end,
            timeframe=config.timeframe,
            source=config.source,
            data_dir=config.data_dir,
            cache_dir=config.cache_dir,
            seed=config.seed,
            fetcher=_offline_fetch if config.offline else None,
            prices=config.prices,
        )
        calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
        split = split_holdout(calendar, holdout_frac=config.holdout_frac)
        folds = walk_forward_folds(
            calendar, split, n_folds=config.n_folds, warmup_bars=config.warmup_bars
        )
        hold = holdout_fold(calendar, split, warmup_bars=config.warmup_bars)
    except BacktestError as exc:
        raise UserInputError(str(exc)) from None
    benchmark, bench_summary = _load_benchmark(config, data, calendar, folds)
    # The index series a regime filter may read: loaded now so the manifest hashes them.
    indices = load_index_series(config, data)
    ppy = periods_per_year(pd.DataFrame(index=calendar), config.timeframe)
    data_summary = {
        "split": split.model_dump(mode="json"),
        "folds": [f.model_dump(mode="json") for f in folds],
        "holdout_fold": hold.model_dump(mode="json"),
        "periods_per_year": ppy,
        "symbols": {s: d.summary() for s, d in data.items()},
        "benchmark": bench_summary,
        "indices": {s: d.summary() for s, d in indices.items()},
    }
    pieces = {
        "split": split,
        "folds": folds,
        "holdout_fold": hold,
        "periods_per_year": ppy,
        "benchmark": benchmark,
        "cache": {"index_bars": indices},  # swarm.regime_data reads them from there
    }
    return data, pieces, data_summary


def _load_benchmark(
    config: RunConfig,
    data: dict[str, LoadedBars],
    calendar: pd.DatetimeIndex,
    folds: list,
) -> tuple[Benchmark, dict[str, Any]]:
    """The run's benchmark; a symbol is loaded like the universe and must share its dates."""
    name = config.benchmark
    if name == CASH:
        return Benchmark(name=CASH, calendar=calendar), {"name": CASH}
    if name == BUY_AND_HOLD:
        held = {s: d.bars for s, d in data.items()}
        return Benchmark(name=name, held=held, calendar=calendar), {
            "name": name,
            "symbols": sorted(held),
        }
    if name in data:
        loaded = data[name]
    else:
        try:
            loaded = load_bars(
                name, start=config.start, end=config.end, timeframe=config.timeframe,
                source=config.source, data_dir=config.data_dir, cache_dir=config.cache_dir,
                seed=config.seed, fetcher=_offline_fetch if config.offline else None,
                prices=config.prices,
            )  # fmt: skip
        except BacktestError as exc:
            raise UserInputError(
                "--benchmark: "
                + str(exc).removeprefix("--tickers: ")
                + "; or use --benchmark buy-and-hold / cash"
            ) from None
    benchmark = Benchmark(name=name, held={name: loaded.bars}, calendar=calendar)
    insample = benchmark.fold_returns(folds, costs=config.costs)
    if len(insample) < MIN_BENCHMARK_OVERLAP:
        raise UserInputError(
            f"--benchmark: {name} has {len(insample)} returns on the universe's in-sample "
            f"dates ({folds[0].start}..{folds[-1].end}); it needs at least "
            f"{MIN_BENCHMARK_OVERLAP}: pick a benchmark with data over the same period"
        )
    return benchmark, {"name": name, "data": loaded.summary()}


def _criteria_text(config: RunConfig, criteria: Criteria) -> str:
    return config.criteria_text or ",".join(
        [f"{c.metric}{c.op}{c.threshold:g}" for c in criteria.rules]
        + [
            f"min_trades>={criteria.min_trades}",
            f"dsr>={criteria.dsr_threshold:g}",
            f"deflated_alpha>={criteria.deflated_alpha_threshold:g}",
            f"spa_p<={criteria.spa_threshold:g}",
        ]
    )


def _news(config: RunConfig) -> list[Any]:
    if config.news_file is None:
        return []
    from swarm.research.news import load_news_csv

    return load_news_csv(config.news_file)


def _context_kwargs(config, criteria, data, pieces, data_summary) -> dict[str, Any]:
    cache = pieces["cache"] | {
        "data_summary": data_summary,
        "criteria_text": _criteria_text(config, criteria),
    }
    # Old manifests (before benchmarks) show what the run now compares with.
    data_summary.setdefault("benchmark", {"name": config.benchmark})
    return {"data": data, **pieces, "news_items": _news(config), "cache": cache}


def _report_data(progress: Progress, data: dict[str, LoadedBars]) -> None:
    for symbol, loaded in data.items():
        issues = "; ".join(loaded.quality.issues) or "no quality issues"
        progress.stage("data", f"{symbol}: {len(loaded.bars)} bars from {loaded.source_used}, "
                               f"coverage {loaded.quality.coverage_pct:.1f}%, {issues}")  # fmt: skip


def prepare(
    config: RunConfig,
    criteria: Criteria,
    *,
    argv: list[str],
    quiet: bool = False,
) -> Prepared:
    """Everything that can fail because of the user's input fails here, before the run folder exists."""
    progress = Progress(quiet=quiet)
    data, pieces, data_summary = _load(config)
    _report_data(progress, data)
    context_kwargs = _context_kwargs(config, criteria, data, pieces, data_summary)

    run = RunFolder.create(config.out, new_run_id(config.directive))
    run.write_json(
        MANIFEST_FILE,
        build_manifest(
            run_id=run.root.name,
            config=config.model_dump(mode="json") | {"criteria": criteria.model_dump(mode="json")},
            data=data_summary,
            seed=config.seed,
            argv=argv,
        ),
    )
    progress.stage("run", f"run folder {run.root}")
    return Prepared(
        config=config, criteria=criteria, run=run, progress=progress, context_kwargs=context_kwargs
    )


def prepare_resume(run_dir: Path, *, quiet: bool = False, workers: int | None = None) -> Prepared:
    """Rebuild a run's config, data and context from its folder, to continue it.

    The config comes from ``manifest.json``; the data is loaded again the same way and must
    hash to the manifest's sha256s (anything else would make the resumed half a different
    experiment). ``workers`` may differ: it changes speed, not results.
    """
    run_dir = Path(run_dir)
    manifest_path = run_dir / MANIFEST_FILE
    if not run_dir.is_dir():
        raise UserInputError(f"--resume: {run_dir} is not a folder; pass a run folder")
    if not manifest_path.is_file():
        raise UserInputError(
            f"--resume: {run_dir} has no {MANIFEST_FILE}; the run stopped before it started "
            "(or this is not a run folder): start it again without --resume"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        recorded = dict(manifest["config"])
        criteria = Criteria.model_validate(recorded.pop("criteria"))
        # A run started before the screen keeps tuning and deflating as it started.
        recorded.setdefault("screen_size", 0)
        recorded.setdefault("deflate_by", "raw")
        config = RunConfig.model_validate(recorded)
    except (ValueError, KeyError) as exc:
        raise UserInputError(f"--resume: {manifest_path} is unreadable ({exc})") from None
    if workers is not None:
        config = config.model_copy(update={"workers": workers})

    progress = Progress(quiet=quiet)
    data, pieces, data_summary = _load(config)
    _report_data(progress, data)
    _check_same_data(manifest["data"], data_summary)
    git = git_state(Path(__file__).resolve().parents[1])
    if git.get("sha") != (manifest.get("git") or {}).get("sha"):
        progress.stage(
            "resume",
            f"warning: the code is at git {str(git.get('sha'))[:10]}, the run started at "
            f"{str((manifest.get('git') or {}).get('sha'))[:10]}",
        )
    run = RunFolder(run_dir)
    # Half-written files of an interrupted atomic write (tmp + rename): never read, only litter.
    for stray in [
        *run_dir.rglob("*.tmp"),
        *run_dir.rglob("*.tmp.png"),
        *run_dir.rglob("*.tmp.npz"),
    ]:
        stray.unlink(missing_ok=True)
    if run.tracker.repaired_bytes:
        progress.stage(
            "resume",
            f"experiments.jsonl: cut a torn last line ({run.tracker.repaired_bytes} bytes)",
        )
    # The manifest's summary is the one the run's report must show.
    context_kwargs = _context_kwargs(config, criteria, data, pieces, manifest["data"])
    return Prepared(
        config=config,
        criteria=criteria,
        run=run,
        progress=progress,
        context_kwargs=context_kwargs,
        resumed=True,
    )


def _check_same_data(recorded: dict[str, Any], now: dict[str, Any]) -> None:
    if set(recorded["symbols"]) != set(now["symbols"]):
        raise UserInputError(
            f"--resume: the run used {sorted(recorded['symbols'])}, the data now loads "
            f"{sorted(now['symbols'])}"
        )
    changed = [
        f"{s} (recorded {r['sha256'][:12]}…, now {now['symbols'][s]['sha256'][:12]}…)"
        for s, r in sorted(recorded["symbols"].items())
        if r["sha256"] != now["symbols"][s]["sha256"]
    ]
    if changed:
        raise UserInputError(
            "--resume: the data changed since the run started: "
            + "; ".join(changed)
            + ". Restore the original data or start a new run"
        )
    before = ((recorded.get("benchmark") or {}).get("data") or {}).get("sha256")
    after = ((now.get("benchmark") or {}).get("data") or {}).get("sha256")
    if before != after and before is not None:
        raise UserInputError(
            f"--resume: the benchmark's data changed since the run started (recorded "
            f"{before[:12]}…, now {str(after)[:12]}…); restore it or start a new run"
        )
    if "indices" in recorded:  # runs from before the regime filter recorded none
        was = {s: d["sha256"] for s, d in recorded["indices"].items()}
        now_ = {s: d["sha256"] for s, d in now["indices"].items()}
        if was != now_:
            changed = sorted(s for s in was.keys() | now_.keys() if was.get(s) != now_.get(s))
            raise UserInputError(
                f"--resume: the index series changed since the run started ({', '.join(changed)}"
                f": recorded {sorted(was)}, now {sorted(now_)}, or their sha256s differ); "
                "restore them or start a new run"
            )
    for key in ("split", "folds", "holdout_fold"):
        if recorded.get(key) != now[key]:
            raise UserInputError(
                f"--resume: the {key.replace('_', ' ')} computed now differs from the run's "
                "manifest (the code changed?); start a new run"
            )


class _TimedLock:
    """The saver's lock, adding up how long the database was held: the time checkpointing
    really cost (the calls' own durations also count threads waiting for one another)."""

    def __init__(self, stats: dict[str, float]) -> None:
        self._lock = threading.Lock()
        self._stats = stats
        self._t0 = 0.0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._stats["db_s"] += time.perf_counter() - self._t0
        self._lock.release()


class TimedSqliteSaver(SqliteSaver):
    """``SqliteSaver`` that counts its writes and times the database: the cost of
    checkpointing, measured per run."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        # Restores the state's own models (swarm.state) and nothing else from msgpack.
        super().__init__(
            conn, serde=JsonPlusSerializer(allowed_msgpack_modules=checkpoint_allowlist())
        )
        self.stats = {"checkpoints": 0, "writes": 0, "db_s": 0.0}
        self.lock = _TimedLock(self.stats)  # SqliteSaver takes self.lock around every access

    def put(self, config, checkpoint, metadata, new_versions):
        self.stats["checkpoints"] += 1
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        self.stats["writes"] += 1
        return super().put_writes(config, writes, task_id, task_path)


@contextmanager
def checkpointer(run: RunFolder) -> Iterator[TimedSqliteSaver]:
    """The run's checkpointer, in the run folder. SqliteSaver serialises access with a lock."""
    conn = sqlite3.connect(str(run.path(CHECKPOINT_FILE)), check_same_thread=False)
    try:
        # WAL: a committed checkpoint survives a killed process, with fewer fsyncs.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        yield TimedSqliteSaver(conn)
    finally:
        conn.close()


def initial_state(ctx: RunContext) -> dict[str, Any]:
    return {
        "symbols": ctx.symbols,
        "n_folds": len(ctx.folds),
        "iteration": 1,
        "research_round": 0,
        "route": Origin.INITIAL,
        "counters": LoopCounters(),
        "all_variants": {},
        "history": [],
        "n_backtests": 0,
        "best": None,
        "feedback": [],
    }


def max_concurrency(cfg: RunConfig, ctx: RunContext) -> int:
    """Threads for LangGraph's task pool: one per task of the widest fan-out, plus room.

    A mapped backtest task only waits on the executor (processes do the work), so threads are
    cheap. LangGraph saves a finished task's writes (what lets a resume skip it) through the
    same pool: with fewer threads than tasks, those saves queue behind the tasks still waiting
    to start, and a kill would lose finished work.
    """
    widest = max(cfg.variants * len(ctx.symbols) * len(ctx.folds), 15)  # 15 research subagents
    return widest + 16


def make_llm_client(cfg: RunConfig, run: RunFolder):
    """None with ``--llm none``; else a client whose replay cache lives in the run (or --llm-cache)."""
    if not cfg.llm_settings.enabled:
        return None
    from swarm.llm.client import LLMClient

    cache_dir = cfg.llm_settings.cache_dir or run.path("llm_cache")
    return LLMClient(cfg.llm_settings, cache_dir=cache_dir)


def _restore_universe(ctx: RunContext, symbols: list[str] | None) -> None:
    """A resumed run whose research widened the universe (``--allow-universe-expansion``)
    loads the added symbols again, and its benchmark takes them again, before any node runs."""
    if not symbols or set(symbols) <= set(ctx.symbols):
        return
    from swarm.research.round_study import restore_universe

    try:
        added = restore_universe(ctx, list(symbols))
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    ctx.progress.stage("resume", f"universe widened by research again: {', '.join(added)}")


def execute(prepared: Prepared) -> Outcome:
    """Run the graph to its end, from the start or from the run's last checkpoint."""
    from swarm.graph import build_graph

    cfg = prepared.config
    run = prepared.run
    thread = {"configurable": {"thread_id": run.root.name}}
    executor_cm = make_executor(cfg.executor, workers=cfg.workers, address=cfg.ray_address)
    with executor_cm as executor, checkpointer(run) as saver:
        ctx = RunContext(
            config=cfg,
            run=run,
            criteria=prepared.criteria,
            executor=executor,
            progress=prepared.progress,
            llm=make_llm_client(cfg, run),
            **prepared.context_kwargs,
        )
        graph = build_graph(checkpointer=saver)
        snapshot = graph.get_state(thread)
        started = snapshot.created_at is not None
        if started and not snapshot.next:
            return Outcome(state=dict(snapshot.values), already_finished=True)
        step = (snapshot.metadata or {}).get("step") if started else None
        if started:
            _restore_universe(ctx, snapshot.values.get("symbols"))
            pending = [t for t in snapshot.tasks if t.result is None]
            done = len(snapshot.tasks) - len(pending)
            prepared.progress.stage(
                "resume",
                f"continuing after super-step {step} (iteration {snapshot.values.get('iteration')}"
                f"): next {', '.join(sorted(set(snapshot.next)))}"
                + (f"; {done} of {len(snapshot.tasks)} tasks already done" if done else ""),
            )
            n_backtests = sum(t.name == "backtest" for t in pending)
            if n_backtests:
                prepared.progress.start_batch(n_backtests)
        elif prepared.resumed:
            prepared.progress.stage("resume", "no checkpoint yet: starting from the beginning")
        state = graph.invoke(
            None if started else initial_state(ctx),
            config={
                **thread,
                "recursion_limit": RECURSION_LIMIT,
                "max_concurrency": max_concurrency(cfg, ctx),
            },
            context=ctx,
            durability="sync",  # each super-step is on disk before the next one starts
        )
        stats = dict(saver.stats)
    stats["sqlite_bytes"] = _db_bytes(run.path(CHECKPOINT_FILE))
    prepared.progress.stage(
        "checkpoint",
        f"{stats['checkpoints']} checkpoints, {stats['writes']} task writes; database busy "
        f"{stats['db_s'] * 1000:.0f} ms; {CHECKPOINT_FILE} {stats['sqlite_bytes'] / 1e6:.2f} MB",
    )
    return Outcome(state=state, resumed_from_step=step, checkpoints=stats)


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
