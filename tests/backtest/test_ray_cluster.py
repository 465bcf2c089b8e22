"""A real Ray cluster: a head and a second node started with ``ray start`` on 127.0.0.1, each
with its own CPU count and temp dir, token-authenticated as Ray documents. Develop and
``backtest.run`` runs against it (``--executor ray --ray-address``) equal the process pool's
job for job; nothing of Ray listens off loopback (nor does the local instance that
``--executor ray`` starts); a node lost mid-run and a killed driver resumed lose and duplicate
no record. Only the processes the fixture started are stopped: they carry a tag of their own
in their environment, which Ray's daemons and workers inherit."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bt_strategy_sources as src
import pytest
from conftest import numba_cache_dir

# One cluster for the module: under xdist, its tests go to one worker (--dist loadgroup).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("ray_cluster")]
ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

TAG = "SWARM_LAB_RAY_TEST_CLUSTER"
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}
START_TIMEOUT = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    tag: str
    root: Path

    def pids(self) -> list[int]:
        """Every live process this cluster's fixture started (its tag in their environment)."""
        return [p.pid for p in _tagged(self.tag)]

    def raylet_of(self, node: str) -> psutil.Process:
        """The raylet of the node whose temp dir is ``root/node``."""
        for p in _tagged(self.tag):
            cmd = " ".join(_cmdline(p))
            if "raylet/raylet" in cmd and str(self.root / node) in cmd:
                return p
        raise AssertionError(f"no raylet for node {node}")


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _kill(tag: str) -> None:
    """SIGKILL every process carrying ``tag``, by id, until none is left."""
    for _ in range(20):
        procs = _tagged(tag)
        if not procs:
            return
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(procs, timeout=5)


def _ray_cli(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "backtest.executors.ray_loopback", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # A short root: Ray's Unix sockets live under the temp dirs (108-byte path limit).
    root = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
    tag = secrets.token_hex(8)
    env = os.environ | {
        TAG: tag,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_DATA_HOME": str(root / "cache"),
    }
    port = _free_port()
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    try:
        _ray_cli(
            env,
            "start",
            "--head",
            "--port",
            str(port),
            "--num-cpus",
            "1",
            "--temp-dir",
            str(root / "head"),
            "--include-dashboard",
            "false",
            "--ray-client-server-port",
            str(_free_port()),
            *common,
        )
        _ray_cli(
            env,
            "start",
            "--address",
            f"127.0.0.1:{port}",
            "--num-cpus",
            "1",
            "--temp-dir",
            str(root / "node2"),
            *common,
        )
        yield Cluster(address=f"127.0.0.1:{port}", env=env, tag=tag, root=root)
    finally:
        _kill(tag)
        shutil.rmtree(root, ignore_errors=True)


def _listeners(pids: list[int]) -> list[tuple[str, str, int]]:
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    out.append((p.name(), c.laddr.ip, c.laddr.port))
        except psutil.Error:
            continue
    return out


def test_the_cluster_listens_on_loopback_only(cluster: Cluster) -> None:
    listeners = _listeners(cluster.pids())
    names = {name for name, _, _ in listeners}
    assert {"gcs_server", "raylet"} <= names, names  # both kinds of server were seen
    assert sum(name == "raylet" for name, _, _ in listeners) >= 2  # two nodes' raylets
    off = [entry for entry in listeners if entry[1] not in LOOPBACK]
    assert not off, f"Ray listens off loopback: {off}"


def test_the_cluster_has_two_nodes_with_their_own_cpus(cluster: Cluster) -> None:
    code = (
        "import ray, json\n"
        "from backtest.executors.ray_loopback import loopback_kept\n"
        "with loopback_kept():\n"
        f"    ray.init(address={cluster.address!r}, _node_ip_address='127.0.0.1',"
        " log_to_driver=False, configure_logging=False)\n"
        "print(json.dumps([n['Resources'].get('CPU') for n in ray.nodes() if n['Alive']]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(json.loads(done.stdout.strip().splitlines()[-1])) == [1.0, 1.0]


def test_the_local_instance_listens_on_loopback_only() -> None:
    code = (
        "import json, psutil\n"
        "from backtest.executors.ray import RayBackend\n"
        "b = RayBackend(workers=1)\n"
        "out = []\n"
        "for p in psutil.Process().children(recursive=True):\n"
        "    try:\n"
        "        out += [[p.name(), c.laddr.ip] for c in p.net_connections(kind='inet')"
        " if c.status == psutil.CONN_LISTEN]\n"
        "    except psutil.Error:\n"
        "        pass\n"
        "b.close()\n"
        "print(json.dumps(out))\n"
    )
    env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    listeners = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(name == "gcs_server" for name, _ in listeners), listeners
    assert all(ip in LOOPBACK for _, ip in listeners), listeners


# ---------------------------------------------------------------------------- runs


def _develop_argv(out: Path, daily_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "swarm.develop",
        "--directive",
        "momentum alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2015-01-01",
        "--end",
        "2018-12-31",
        "--variants",
        "2",
        "--max-iterations",
        "2",
        "--folds",
        "2",
        "--workers",
        "2",
        "--seed",
        "11",
        "--offline",
        "--memory-dir",
        "off",
        # What the cluster and the pool must agree on is the records: no figures or alt data
        # (the same for every run here) are needed for that.
        "--no-figures",
        "--alt-data",
        "off",
        "--out",
        str(out),
        *extra,
    ]


def _develop(
    out: Path, daily_dir: Path, env: dict[str, str], *extra: str, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    argv = _develop_argv(out, daily_dir, *extra)
    env = env | {"NUMBA_CACHE_DIR": numba_cache_dir()}  # compiled kernels shared by the runs
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]


def _backtests(run: Path) -> dict[tuple, tuple]:
    """Each backtest record's figures, keyed by what the job was; a duplicate fails here."""
    keys = Counter()
    out = {}
    for r in _records(run):
        if r.get("kind") != "backtest":
            continue
        key = (r["iteration"], r["variant_id"], r.get("symbol"), r.get("trial_key"))
        keys[key] += 1
        out[key] = (r["status"], r.get("fold_sharpes"), r.get("metrics"))
    dup = [k for k, n in keys.items() if n > 1]
    assert not dup, f"duplicated records: {dup[:5]}"
    return out


def _run_dir(done: subprocess.CompletedProcess[str]) -> Path:
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_dir(), done.stdout[-500:]
    return path


@pytest.fixture(scope="module")
def pool_run(tmp_path_factory: pytest.TempPathFactory, daily_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("pool")
    env = os.environ | {"XDG_CACHE_HOME": str(out / "cache"), "XDG_DATA_HOME": str(out / "cache")}
    return _run_dir(_develop(out, daily_dir, env, "--executor", "process"))


def test_develop_on_the_cluster_equals_the_process_pool(
    cluster: Cluster, pool_run: Path, tmp_path: Path, daily_dir: Path
) -> None:
    env = cluster.env | {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "cache"),
    }
    done = _develop(tmp_path, daily_dir, env, "--executor", "ray", "--ray-address", cluster.address)
    got = _backtests(_run_dir(done))
    want = _backtests(pool_run)
    assert got and got == want  # job for job: same jobs, same figures


def test_backtest_run_on_the_cluster_equals_the_process_pool(
    cluster: Cluster, tmp_path: Path, daily_dir: Path
) -> None:
    strategy = tmp_path / "sma_cross.py"
    strategy.write_text(src.SMA_CROSS)
    results = {}
    for executor in ("process", "ray"):
        argv = [
            sys.executable,
            "-m",
            "backtest.run",
            str(strategy),
            "--data-dir",
            str(daily_dir),
            "--tickers",
            "AAPL,MSFT,NVDA",
            "--start",
            "2015-01-01",
            "--end",
            "2019-12-31",
            "--executor",
            executor,
        ]
        if executor == "ray":
            argv += ["--ray-address", cluster.address]
        env = cluster.env | {
            "XDG_CACHE_HOME": str(tmp_path / executor),
            "XDG_DATA_HOME": str(tmp_path / executor),
        }
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        results[executor] = json.loads(done.stdout)
    assert results["ray"] == results["process"]


def test_a_killed_driver_resumes_against_the_same_cluster(
    cluster: Cluster, pool_run: Path, tmp_path: Path, daily_dir: Path
) -> None:
    env = cluster.env | {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "cache"),
    }
    proc = _develop_async(
        tmp_path, daily_dir, env, "--executor", "ray", "--ray-address", cluster.address
    )
    run = _wait_for_backtests(tmp_path, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and anything it forked, nothing of Ray
    proc.wait(timeout=60)
    argv = [sys.executable, "-m", "swarm.develop", "--resume", str(run)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert _run_dir(done) == run
    assert _backtests(run) == _backtests(pool_run)


def _develop_async(
    out: Path, daily_dir: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[str]:
    argv = _develop_argv(out, daily_dir, *extra)
    return subprocess.Popen(
        argv,
        env=env | {"NUMBA_CACHE_DIR": numba_cache_dir()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_backtests(out: Path, proc: subprocess.Popen, timeout: float = 600) -> Path:
    """The run folder once it holds its first backtest record (the run is mid-way)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        for run in out.iterdir():
            jsonl = run / "experiments.jsonl"
            if jsonl.exists() and b'"kind": "backtest"' in jsonl.read_bytes():
                return run
        time.sleep(0.2)
    raise AssertionError("no backtest record within the time allowed")


# Last: it takes the second node away from the module's cluster.
def test_a_node_lost_mid_run_loses_and_duplicates_nothing(
    cluster: Cluster, pool_run: Path, tmp_path: Path, daily_dir: Path
) -> None:
    env = cluster.env | {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "cache"),
    }
    node2 = cluster.raylet_of("node2")
    argv_extra = ("--executor", "ray", "--ray-address", cluster.address)
    proc = _develop_async(tmp_path, daily_dir, env, *argv_extra)
    _wait_for_backtests(tmp_path, proc)
    node2.kill()  # the second node's raylet: its tasks are retried on the head
    out, err = proc.communicate(timeout=900)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert _backtests(_run_dir(done)) == _backtests(pool_run)
