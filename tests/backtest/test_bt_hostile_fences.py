"""Hostile payloads of issue 24: windows that hold no future, reads fenced to the job, memory
bounded for real, nonces that isolate.

Each class runs with and without the static lint, through the CLI (``python -m backtest.run``,
its working directory a temporary folder holding a copy of the data CSV, a fake secret and a
fake ``runs/x/verdict.json``) and through the process pool's walk-forward path (several folds
of ``backtest.splits`` submitted together, batched into one child as the lab does). A payload
reports what it reached in its error; the lint may reject it first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO_ROOT, SHARED_DATA, read_real_bars
from hostile_paths import walk_forward_jobs
from test_bt_hostile import lib

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend, SerialBackend
from backtest.sandbox import SandboxPolicy, run_sandboxed, warm_worker
from backtest.splits import split_holdout, walk_forward_folds

pytestmark = pytest.mark.integration

START, END = "2012-01-01", "2016-12-31"
SECRET = "TOPSECRET-7f3a"
PARENT_PEAK_MB = 24  # the parent's tracemalloc peak while it runs a job (as in test_bt_hostile)
CLI_EXTRA_MB = 96  # the CLI's own RSS peak over an honest run's, for any payload
LINT = {"lint": False, "nolint": True}  # mode -> --skip-validation


def _strategy(body: str, methods: str = "") -> str:
    code = (
        "import backtrader as bt\n\n\nclass Hostile(bt.Strategy):\n    params = dict(n=1)\n\n"
        "    def next(self):\n" + textwrap.indent(textwrap.dedent(body).strip(), " " * 8) + "\n"
    )
    if methods:
        code += "\n" + textwrap.indent(textwrap.dedent(methods).strip(), " " * 4) + "\n"
    return code


# --- 4. windows that hold no future: the most rows of bars anything reachable holds
WINDOW = """
import sys
n = self.data.buflen()
seen = [0]
def rows(a):
    while a is not None:
        shape = getattr(a, "shape", ())
        seen.append(max(shape) if shape else 0)
        a = getattr(a, "base", None)
def frame(df):
    seen.append(len(df))
    rows(df.index.to_numpy())
    for c in df.columns:
        rows(df[c].to_numpy())
    for blk in df._mgr.blocks:
        rows(blk.values)
for d in self.datas + list(self.env.datas):
    frame(d.p.dataname)
    for line in d.lines:
        seen.append(len(line.array))
f = sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()):
        for obj in (v, getattr(v, "bars", None)):
            if isinstance(obj, dict):
                obj = list(obj.values())
            for o in obj if isinstance(obj, list) else [obj]:
                o = getattr(o, "bars", o)
                if hasattr(o, "_mgr") and hasattr(o, "columns"):
                    frame(o)
    f = f.f_back
raise RuntimeError("rows %d bars %d" % (max(seen), n))
"""

# The lint lets this one through: the finding's own primitive, no dunders, no frames.
WINDOW_BASE = """
n = self.data.buflen()
base = self.data.p.dataname["close"].to_numpy().base
m = 0 if base is None else max(base.shape)
raise RuntimeError("rows %d bars %d" % (max(m, len(self.data.p.dataname)), n))
"""


def _rows_within_window(error: str) -> bool:
    rows, bars = (int(x) for x in error.split("rows ")[1].split()[0:3:2])
    return rows <= bars


# --- 5. reads fenced to the job, no locks, errors capped
READS = """
import os
out = []
for path in PATHS:
    fd = libc.open(path.encode(), 0)
    out.append(rc(fd))
    if fd >= 0:
        buf = ctypes.create_string_buffer(64)
        libc.read(fd, buf, 63)
        out.append(buf.value.decode("latin-1"))
        libc.close(fd)
    try:
        with open(path) as fh:
            out.append("read:" + fh.read(64))
    except OSError as exc:
        out.append(type(exc).__name__)
fd = os.open(bt.__file__, os.O_RDONLY)  # readable: the installation
flock = ctypes.create_string_buffer(32)  # struct flock: F_RDLCK (0) over the whole file
out.append("locks " + " ".join(rc(x) for x in (libc.flock(fd, 1), libc.fcntl(fd, 6, flock),
                                             libc.fcntl(fd, 37, flock), libc.fcntl(fd, 5, flock))))
raise RuntimeError("reads " + " ".join(out) + " " + "x" * 2000)
"""

# --- 6. memory no rlimit counts; a trace of two million empty tuples
MEMFD = """
fd = libc.syscall(319, b"x", 0)
out = ["memfd", rc(fd)]
out.append(rc(libc.ftruncate(fd, ctypes.c_long(3 << 30))) if fd >= 0 else "-")
out += ["shm", rc(libc.open(b"/dev/shm/bt-fences", 0o102, 0o600))]
raise RuntimeError(" ".join(out))
"""
TUPLES = """
import json, os, sys
f = sys._getframe()
while f is not None and "nonce" not in f.f_locals:
    f = f.f_back
nonce, job = f.f_locals["nonce"], f.f_locals["job"]
log = {"fills": [], "values": "", "orders_rejected": 0}
line = {"job_id": job.job_id, "nonce": nonce, "status": "ok", "error": None, "duration_s": 0.1,
        "log": log, "trace": {"orders": [[]] * 2_000_000, "lines": {}, "n_bars": 1}}
os.write(3, json.dumps(line).encode() + b"\\n")
os._exit(0)
"""

# --- 7. nonces that isolate: what a job keeps or leaves running reaches no later job
NONCES = """
import math, os, sys, threading, json
f = sys._getframe()
while f is not None and "nonce" not in f.f_locals:
    f = f.f_back
seen = getattr(math, "seen_nonces", [])
seen.append(f.f_locals["nonce"])
math.seen_nonces = seen
def steal():
    try:
        head = os.read(4, 46)
    except OSError as exc:
        return
    line = {"job_id": "?", "nonce": head[:32].decode(), "status": "error", "error": "stolen"}
    os.write(3, json.dumps(line).encode() + b"\\n")
threading.Thread(target=steal, daemon=True).start()
raise RuntimeError("nonces seen %d" % len(set(seen)))
"""


# A job's process signals every nearby pid (the next job's process waits, forked, beside it)
# with libc's kill, past the Python guards: none may be reached.
SIBLINGS = """
me = os.getpid()
hit = [p for p in range(me - 8, me + 9) if p != me and libc.kill(p, 19) == 0]
for p in hit:
    libc.kill(p, 18)
raise RuntimeError("signalled %d" % len(hit))
"""


# A job leaves its window's last close in a file of its working (temp) directory, after
# counting what the previous jobs of its batch left there: none may be found.
LEFTOVERS = """
import os
seen = [n for n in os.listdir(".") if n.startswith("left-")]
with open("left-%d" % os.getpid(), "w") as fh:
    fh.write(str(self.data.close[0]))
os.makedirs("left-dir-%d/deeper" % os.getpid(), exist_ok=True)
raise RuntimeError("files seen %d" % len(seen))
"""


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    warm_worker()
    return read_real_bars("AAPL", START, END)


def _data_csv(folder: Path) -> None:
    src = pd.read_csv(SHARED_DATA / "ohlcv" / "daily" / "AAPL.csv")
    src[(src["date"] >= START) & (src["date"] <= END)].to_csv(folder / "AAPL.csv", index=False)


@pytest.fixture()
def cwd(tmp_path: Path) -> Path:
    """The CLI's working directory: the data CSV, a secret, another run's verdict."""
    _data_csv(tmp_path)
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "verdict.json").write_text(json.dumps({"secret": SECRET}))
    tmp_path.chmod(0o755)
    return tmp_path


def _cli(code: str, cwd: Path, *, nolint: bool, lookahead: bool = False) -> tuple[dict, int]:
    """The CLI's JSON report and its own RSS peak (MB, ``RUSAGE_SELF``: the parent alone)."""
    strategy = cwd / "strategy.py"
    strategy.write_text(code)
    argv = [
        "backtest.run",
        str(strategy),
        "--data-dir",
        str(cwd),
        "--tickers",
        "AAPL",
        "--start",
        "2014-01-01",
        "--end",
        "2015-12-31",
        "--timeout",
        "20",
    ]
    argv += ["--skip-validation"] * nolint + ["--check-lookahead", "--cuts", "3"] * lookahead
    wrapper = (
        "import resource, runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    runpy.run_module('backtest.run', run_name='__main__', alter_sys=True)\n"
        "finally:\n"
        "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    sys.stderr.write('PEAK_KB %d\\n' % peak)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", wrapper],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    peak = int(proc.stderr.split("PEAK_KB ")[1].split()[0]) >> 10
    return json.loads(proc.stdout.strip().splitlines()[-1]), peak


@pytest.fixture(scope="module")
def honest_peak_mb(tmp_path_factory: pytest.TempPathFactory) -> int:
    folder = tmp_path_factory.mktemp("honest")
    _data_csv(folder)
    _, peak = _cli(_strategy("pass"), folder, nolint=False, lookahead=True)
    return peak


def _folds(bars: pd.DataFrame) -> list[Fold]:
    split = split_holdout(pd.DatetimeIndex(bars.index), 0.2)
    return walk_forward_folds(pd.DatetimeIndex(bars.index), split, n_folds=3, warmup_bars=100)


def _walk_forward(code: str, bars: pd.DataFrame, policy: SandboxPolicy, backend=None) -> list:
    """Every fold's result, the jobs submitted together (one batch child on the pool)."""
    jobs = walk_forward_jobs(code, bars, _folds(bars))
    with backend or ProcessPoolBackend(1, policy=policy) as pool:
        return pool.map(jobs)


def _policy(mode: str) -> SandboxPolicy:
    return SandboxPolicy(validate=not LINT[mode])


def _ran(res, mode: str) -> bool:
    """Whether the payload ran (the lint may reject it; without the lint it always runs)."""
    if res.status == JobStatus.REJECTED:
        assert mode == "lint", res.error
        return False
    return True


MODES = list(LINT)


@pytest.mark.parametrize("mode", MODES)
def test_windows_hold_no_future(mode: str, bars: pd.DataFrame, cwd: Path) -> None:
    """Nothing the strategy reaches (dataname, its blocks and index and their ``.base``, the
    feeds' lines, cerebro's datas, the stack's jobs and frames) holds a bar outside its
    window: through the CLI (serial), the pool's batch and the serial backend."""
    for body in (WINDOW, WINDOW_BASE):
        report, _ = _cli(_strategy(body), cwd, nolint=LINT[mode])
        if report["status"] != "rejected":
            assert "rows " in report["error"] and _rows_within_window(report["error"]), report
        policy = _policy(mode)
        for backend in (ProcessPoolBackend(2, policy=policy), SerialBackend(policy=policy)):
            for res in _walk_forward(_strategy(body), bars, policy, backend):
                if _ran(res, mode):
                    assert _rows_within_window(res.error), res.error


def test_windows_hold_no_future_on_ray(bars: pd.DataFrame) -> None:
    ray = pytest.importorskip("ray")
    from backtest.executors import RayBackend

    ray.init(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        policy = SandboxPolicy(validate=False)
        backend = RayBackend(address=None, workers=1, policy=policy)
        try:  # the worker holds the whole frame (shipped once), each child its window only
            for body in (WINDOW, WINDOW_BASE):
                jobs = walk_forward_jobs(_strategy(body), bars, _folds(bars))
                for res in backend.map(jobs):
                    assert _rows_within_window(res.error), res.error
            assert backend.bars.stats.frames == 1  # one symbol's bars for both payloads
        finally:
            backend.close()
    finally:
        ray.shutdown()


def _reads_code(cwd: Path) -> str:
    paths = [
        str(cwd / "secret.txt"),
        str(cwd / "AAPL.csv"),
        str(cwd / "runs/x/verdict.json"),
        str(REPO_ROOT / ".git" / "config"),
        str(REPO_ROOT / "backtest" / "engine.py"),
        str(REPO_ROOT / "pyproject.toml"),
        os.path.expanduser("~/.cache/swarm-lab"),
    ]
    return _strategy(lib(READS).replace("PATHS", repr(paths)))


def _assert_fenced(error: str) -> None:
    assert SECRET not in error and "[core]" not in error and "date,open" not in error, error
    assert len(error) <= 300, len(error)
    reads = error.split("reads ")[1].split(" locks ")[0].split()
    assert not any(t.startswith("read:") for t in reads), error
    assert [t for t in reads if not t.startswith("-1/")] == ["PermissionError"] * 7, error
    locks = error.split(" locks ")[1].split()[:4]
    assert locks == ["-1/1"] * 4, error


@pytest.mark.parametrize("mode", MODES)
def test_reads_are_fenced_to_the_job(mode: str, bars: pd.DataFrame, cwd: Path) -> None:
    """Not the project (``.git``), the cwd's data and secret, ``runs/`` or the cache; no
    lock on a readable file; the error capped."""
    code = _reads_code(cwd)
    report, _ = _cli(code, cwd, nolint=LINT[mode])
    if report["status"] != "rejected":
        _assert_fenced(report["error"])
    for res in _walk_forward(code, bars, _policy(mode)):
        if _ran(res, mode):
            _assert_fenced(res.error)


def _honest_job(code: str, bars: pd.DataFrame) -> BacktestJob:
    fold = _folds(bars)[0]
    return BacktestJob(
        job_id="h",
        variant_id="hostile",
        code=code,
        symbol="AAPL",
        bars=bars,
        fold=fold,
        timeout_s=20.0,
    )


@pytest.mark.parametrize("mode", MODES)
def test_memory_is_bounded(mode: str, bars: pd.DataFrame, cwd: Path, honest_peak_mb: int) -> None:
    """No memfd or /dev/shm; a trace of two million empty tuples is refused before it is
    parsed: the parent's own peak stays bounded (the CLI's RSS, the pool's tracemalloc)."""
    memfd = _strategy(lib(MEMFD))
    report, _ = _cli(memfd, cwd, nolint=LINT[mode])
    if report["status"] != "rejected":
        assert "memfd -1/1 - shm -1/" in report["error"], report
    for res in _walk_forward(memfd, bars, _policy(mode)):
        if _ran(res, mode):
            assert "memfd -1/1 - shm -1/" in res.error, res.error
    tuples = _strategy(TUPLES)
    report, peak = _cli(tuples, cwd, nolint=LINT[mode], lookahead=True)
    assert report["status"] in ("rejected", "integrity_error"), report
    assert peak <= honest_peak_mb + CLI_EXTRA_MB, (peak, honest_peak_mb)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = run_sandboxed(_honest_job(tuples, bars), _policy(mode), trace=True)
        parsed_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.result.status in (JobStatus.REJECTED, JobStatus.INTEGRITY_ERROR), out.result
    if out.result.status == JobStatus.INTEGRITY_ERROR:
        assert "JSON items" in out.result.error, out.result.error
    assert parsed_peak < PARENT_PEAK_MB << 20, parsed_peak >> 20


@pytest.mark.parametrize("mode", MODES)
def test_nonces_isolate_the_jobs_of_a_batch(mode: str, bars: pd.DataFrame, cwd: Path) -> None:
    """Each job of a batch sees its own nonce only: nothing it keeps (a module attribute) or
    leaves running (a thread reading the job pipe) reaches the next job."""
    code = _strategy(lib(NONCES))
    report, _ = _cli(code, cwd, nolint=LINT[mode])
    if report["status"] != "rejected":
        assert "nonces seen 1" in report["error"], report
    results = _walk_forward(code, bars, _policy(mode))
    assert len(results) == 3
    for res in results:
        if _ran(res, mode):
            assert res.status == JobStatus.ERROR and "nonces seen 1" in res.error, res.error
            assert "stolen" not in res.error


def test_the_cwd_is_not_a_read_root(cwd: Path) -> None:
    """``python -m`` puts the cwd on ``sys.path``: it must not become a read root."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    script = (
        "from backtest.sandbox.python_guards import read_roots; print('\\n'.join(read_roots()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    real_cwd, project = os.path.realpath(cwd), str(REPO_ROOT.resolve())
    for root in out:
        assert not (real_cwd + os.sep).startswith(root + os.sep), root
        assert not (project + os.sep).startswith(root + os.sep), root
        assert not (root + os.sep).startswith(real_cwd + os.sep), root
    assert out  # the installation stays readable


@pytest.mark.parametrize("mode", MODES)
def test_a_job_cannot_signal_the_next_jobs_waiting_process(
    mode: str, bars: pd.DataFrame, cwd: Path
) -> None:
    """Job k+1's process is forked while job k runs: job k reaches no process with a signal
    (not the waiting sibling, not the batch child), and every job still runs its own fold."""
    code = _strategy(lib(SIBLINGS))
    results = _walk_forward(code, bars, _policy(mode))
    assert len(results) == 3
    for res in results:
        if _ran(res, mode):
            assert res.status == JobStatus.ERROR and "signalled 0" in res.error, res.error


@pytest.mark.parametrize("mode", MODES)
def test_a_job_finds_no_file_another_job_left(mode: str, bars: pd.DataFrame, cwd: Path) -> None:
    """The temp dir is emptied between the jobs of a batch: a later fold finds nothing an
    earlier one wrote (its bars, its window's future for a fold that runs after it)."""
    code = _strategy(LEFTOVERS)
    results = _walk_forward(code, bars, _policy(mode))
    assert len(results) == 3
    for res in results:
        if _ran(res, mode):
            assert res.status == JobStatus.ERROR and "files seen 0" in res.error, res.error
