"""Resume a run from its folder: rebuild its config, data and context (``prepare_resume``),
refusing data that changed since it started, and widen the universe again as its research
did (``restore_run_universe``) before ``swarm.run.execute`` continues from the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.runfolder import LAB_ROOT, RunFolder, git_state, source_digest
from gate.contracts import Criteria
from swarm.config import RunConfig
from swarm.context import RunContext
from swarm.errors import UserInputError
from swarm.progress import Progress
from swarm.run_prepare import MANIFEST_FILE, Prepared, context_kwargs, load_data, report_data
from swarm.state import STATE_SCHEMA


def check_state_schema(run_dir: Path, manifest: dict[str, Any]) -> None:
    """An unfinished run checkpointed by code with another state schema cannot continue: its
    checkpoint holds values of other types. A finished one is only reported, so it may."""
    schema = manifest.get("state_schema", 1)
    if schema == STATE_SCHEMA or (run_dir / "verdict.json").is_file():
        return
    raise UserInputError(
        f"--resume: {run_dir} was checkpointed by an older version of the lab (state schema "
        f"{schema}, this code reads {STATE_SCHEMA}) and cannot be continued; its results so far "
        "stay in the folder. Start it again without --resume (its arguments are the argv in "
        f"{run_dir / MANIFEST_FILE})"
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
        # A run started when --criteria replaced the defaults reports its criteria that way.
        recorded.setdefault("criteria_replace", True)
        config = RunConfig.model_validate(recorded)
    except (ValueError, KeyError) as exc:
        raise UserInputError(f"--resume: {manifest_path} is unreadable ({exc})") from None
    check_state_schema(run_dir, manifest)
    if workers is not None:
        config = config.model_copy(update={"workers": workers})

    progress = Progress(quiet=quiet)
    data, pieces, data_summary = load_data(config)
    report_data(progress, data, config)
    check_same_data(manifest["data"], data_summary)
    repo = LAB_ROOT
    git = git_state(repo)
    if git.get("sha") != (manifest.get("git") or {}).get("sha"):
        progress.stage(
            "resume",
            f"warning: the code is at git {str(git.get('sha'))[:10]}, the run started at "
            f"{str((manifest.get('git') or {}).get('sha'))[:10]}",
        )
    started = (manifest.get("source") or {}).get("sha256")  # None: a run from before it
    if started and started != source_digest(repo)["sha256"]:
        progress.stage(
            "resume",
            f"warning: the lab's source (sha256 {source_digest(repo)['sha256'][:12]}) is not "
            f"the source the run started with ({started[:12]}): its records may not agree",
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
    kwargs = context_kwargs(config, criteria, data, pieces, manifest["data"])
    return Prepared(
        config=config,
        criteria=criteria,
        run=run,
        progress=progress,
        context_kwargs=kwargs,
        resumed=True,
    )


def check_same_data(recorded: dict[str, Any], now: dict[str, Any]) -> None:
    """UserInputError unless the data, benchmark, indices, split and folds are those the run
    recorded."""
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


def restore_run_universe(ctx: RunContext, symbols: list[str] | None) -> None:
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
