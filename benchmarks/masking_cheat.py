"""Calibrate the mask with a model that knows the answers (issue 29, item 3).

Runs ``swarm.develop --families decision_pipeline`` N times against the cheating server
(``swarm.llm.cheat_server``: it answers every desk role with the sign of the next 10 trading
days' real return whenever a prompt gives away the ticker and the day), one ticker and a
three-year window per run, and prints one row per run and the SUCCESS count.

    .venv/bin/python benchmarks/masking_cheat.py --runs 20            # masked: expect 0 SUCCESS
    .venv/bin/python benchmarks/masking_cheat.py --runs 2 --no-mask   # the cheat shows: SUCCESS

Each run is its own process (a fresh develop run, caches in a temporary folder); the server
runs in this one. Not a test: a figure for docs/llm.md (its masking table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swarm.llm.cheat_server import serve  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "ohlcv" / "daily"
TICKERS = ("NVDA", "AAPL", "MSFT", "AMZN", "GOOG", "AMD", "NFLX", "ADBE", "INTC", "CRM")
WINDOWS = (("2016-01-01", "2018-12-31"), ("2013-01-01", "2015-12-31"))


def plan(n: int) -> list[tuple[str, str, str]]:
    """(ticker, start, end) for run i: every ticker on one window, then the next window."""
    return [
        (TICKERS[i % len(TICKERS)], *WINDOWS[(i // len(TICKERS)) % len(WINDOWS)]) for i in range(n)
    ]


def develop_argv(
    ticker: str, start: str, end: str, *, url: str, data_dir: Path, tmp: Path, masked: bool
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "swarm.develop",
        "--directive",
        f"agents decide on {ticker}",
        "--families",
        "decision_pipeline",
        "--tickers",
        ticker,
        "--data-dir",
        str(data_dir),
        "--start",
        start,
        "--end",
        end,
        "--variants",
        "1",
        "--max-iterations",
        "1",
        "--workers",
        "1",
        "--offline",
        "--quiet",
        "--memory-dir",
        "off",
        "--decision-cache",
        str(tmp / "decisions"),
        "--llm-cache",
        str(tmp / "llm-cache"),
        "--out",
        str(tmp / "runs"),
        "--llm",
        "openai-compatible:cheat",
        "--llm-base-url",
        url,
        "--llm-structured",
        "function_calling",
        "--mask" if masked else "--no-mask",
    ]


def summarise(run: Path) -> dict[str, object]:
    """What a run's verdict says: the route, whether the gate passed its variant (the
    contamination route overrides a pass, so both are shown), alpha and the leak audit."""
    verdict = json.loads((run / "verdict.json").read_text(encoding="utf-8"))
    alpha = verdict.get("best_alpha") or {}
    leaks = (verdict.get("llm_masking") or {}).get("leaks") or {}
    records = (run / "experiments.jsonl").read_text(encoding="utf-8").splitlines()
    passed = any(
        r.get("kind") == "backtest" and r.get("gate_passed")
        for r in map(json.loads, filter(None, records))
    )
    return {
        "verdict": verdict["verdict"],
        "gate_passed": passed or verdict["verdict"] == "SUCCESS",
        "alpha_pct": alpha.get("alpha_annual_pct"),
        "alpha_t": alpha.get("t_stat"),
        "leaked": f"{leaks.get('leaked', 0)}/{leaks.get('audited', 0)}",
        "reason": str(verdict.get("reason", ""))[:70],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--no-mask", action="store_true", help="unmasked: the cheat should win")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    args = p.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    masked = not args.no_mask
    successes = 0
    print(
        "| # | ticker | window | verdict | gate passed | alpha %/yr | HAC t | leaked/audited "
        "| s |\n|---|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    with serve(args.data_dir) as url:
        for i, (ticker, start, end) in enumerate(plan(args.runs), 1):
            with tempfile.TemporaryDirectory(prefix="cheat-") as tmp:
                t0 = time.monotonic()
                argv_i = develop_argv(
                    ticker,
                    start,
                    end,
                    url=url,
                    data_dir=args.data_dir,
                    tmp=Path(tmp),
                    masked=masked,
                )
                proc = subprocess.run(argv_i, cwd=REPO, env=env, capture_output=True, text=True)
                secs = time.monotonic() - t0
                if proc.returncode != 0:
                    print(
                        f"| {i} | {ticker} | {start[:4]}-{end[:4]} | exit {proc.returncode}: "
                        f"{proc.stderr.strip()[-200:]} |",
                        flush=True,
                    )
                    continue
                s = summarise(Path(proc.stdout.strip().splitlines()[-1]))
            successes += s["verdict"] == "SUCCESS"
            a, t = s["alpha_pct"], s["alpha_t"]
            print(
                f"| {i} | {ticker} | {start[:4]}-{end[:4]} | {s['verdict']} | "
                f"{'yes' if s['gate_passed'] else 'no'} | "
                f"{'' if a is None else f'{a:+.1f}'} | {'' if t is None else f'{t:+.2f}'} | "
                f"{s['leaked']} | {secs:.0f} |",
                flush=True,
            )
    state = "masked" if masked else "unmasked"
    print(f"\n{state}: {successes} SUCCESS in {args.runs} runs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
