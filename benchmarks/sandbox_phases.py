"""Per-phase timings of one sandboxed batch: where a batch child's per-job cost goes.

    .venv/bin/python benchmarks/sandbox_phases.py [--rounds 5] [--root OTHER_CHECKOUT]

One batch = the 8 jobs of one family in ``backtest_throughput`` (4 symbols x 2 folds), run
``--rounds`` times with ``run_sandboxed_batch``. The job processes' ``_run_job`` and
``_write_line`` are wrapped (before the batch child forks) to write ``time.monotonic()``
stamps to their stderr, which the parent keeps (a larger tail), and the parent stamps each
result line it reads. Printed: median / min / max over rounds of each phase's mean per job:

* start -> job 0 reads its job: the batch child's fork and confinement, job 0's fork (per
  batch);
* job read -> run done, and the engine's own ``duration_s``;
* run done -> line written: the JSON line;
* line written -> next job reads its job: the critical path between two jobs (the parent
  reads and checks the line and sends the next job; the batch child lets it go; it reads
  and unpickles its window);
* last line -> batch returns: the parent books the last claim, kills and reaps (per batch);
* wall per job - engine: the sandbox's share per job.

``--root`` measures another checkout (``git worktree add`` or ``git archive | tar -x``) with
the same script, for A/B runs interleaved in the same conditions. Relative figures only on
a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def stamp(tag: str) -> None:
    """A phase's time, to the process's stderr (a job process's reaches the parent)."""
    os.write(2, f"\nP {tag} {time.monotonic():.6f}\n".encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--root", type=Path, default=HERE.parent)
    args = ap.parse_args()
    root = args.root.resolve()
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    import backtest_throughput as tp

    from backtest.engine import run_job
    from backtest.sandbox import DEFAULT_POLICY, run_sandboxed_batch, warm_worker
    from backtest.sandbox import child as sc
    from backtest.sandbox import process as sp

    assert Path(sc.__file__).resolve().is_relative_to(root), sc.__file__
    tp.DATA = HERE.parent.parent / "shared" / "data" / "ohlcv" / "daily"
    sp.OUTPUT_TAIL_BYTES = 1 << 16

    run_one, write_line = sc._run_job, sc._write_line

    def timed_run(job, trace, nonce, run_one=run_one):  # defaults, not cells: the child clears them
        stamp("read")
        out = run_one(job, trace, nonce)
        stamp("ran")
        return out

    def timed_write(payload, write_line=write_line):
        write_line(payload)
        stamp("wrote")

    sc._run_job, sc._write_line = timed_run, timed_write
    lines: list[float] = []
    outputs: list[bytes] = []
    claim, spawn = sp.check_line, sp._spawn

    def seen(*a, claim=claim):
        lines.append(time.monotonic())
        return claim(*a)

    def keep(*a, spawn=spawn, **kw):
        child = spawn(*a, **kw)
        outputs.append(child.output)
        return child

    sp.check_line, sp._spawn = seen, keep
    jobs = tp.make_jobs()
    batch = [j for j in jobs if j.code == jobs[0].code]
    n = len(batch)
    warm_worker()
    for job in batch:
        run_job(job)
    rows = []
    for _ in range(args.rounds):
        lines.clear()
        outputs.clear()
        t0 = time.monotonic()
        outs = run_sandboxed_batch(batch, DEFAULT_POLICY)
        t1 = time.monotonic()
        bad = [o.result.error for o in outs if o.result.status.value != "ok"]
        if bad or len(outputs) != 1:
            raise SystemExit(f"a job failed or the batch needed {len(outputs)} children: {bad}")
        rows.append(_phases(outputs[0], outs, lines, t0, t1, n))
    print(f"root: {root}, {args.rounds} rounds of {n} jobs, load avg {os.getloadavg()[0]:.2f}")
    for key in rows[0]:
        ms = sorted(1000 * row[key] for row in rows)
        print(
            f"{key:32s} median {statistics.median(ms):7.2f} ms   min {ms[0]:7.2f}   "
            f"max {ms[-1]:7.2f}"
        )


def _phases(output: bytes, outs, lines: list[float], t0: float, t1: float, n: int) -> dict:
    """One round's phase times (seconds) from the child's P-stamps and the batch's clock."""
    ev: dict[str, list[float]] = {}
    for line in output.decode().splitlines():
        if line.startswith("P "):
            _, tag, at = line.split()
            ev.setdefault(tag, []).append(float(at))
    wrote = len(ev["wrote"])  # the last job may be killed before its stamp
    engine = statistics.mean(o.result.duration_s for o in outs)
    return {
        "start -> job 0 reads its job": ev["read"][0] - t0,
        "job read -> run done": statistics.mean(ev["ran"][i] - ev["read"][i] for i in range(n)),
        "  (engine duration_s)": engine,
        "run done -> line written": statistics.mean(
            ev["wrote"][i] - ev["ran"][i] for i in range(wrote)
        ),
        "line written -> next job reads": statistics.mean(
            ev["read"][i + 1] - ev["wrote"][i] for i in range(min(n - 1, wrote))
        ),
        "last line -> batch returns": t1 - lines[-1],
        "wall per job": (t1 - t0) / n,
        "wall per job - engine": (t1 - t0) / n - engine,
    }


if __name__ == "__main__":
    main()
