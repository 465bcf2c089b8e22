"""A tear sheet per run: ``tearsheet.html`` beside ``report.md``, one file readable offline.

The best variant against the run's benchmark. QuantStats draws the standard pages (rolling
Sharpe and beta, monthly and yearly returns, underwater curve, worst drawdown periods, return
distribution) as inline SVG; the lab adds what QuantStats cannot know: exposure and turnover
per window and fold, and the trade list with entry and exit dates and prices.

The inputs are ``tearsheet.json`` (finalize writes it: each window's strategy and benchmark
returns, the traced trades). A run written before that file existed still gets a sheet from
``backtests/<best>/`` (the in-sample folds), without benchmark or trades, and says so.

    python -m experiments.tearsheet RUN_DIR
"""

from __future__ import annotations

import html
import json
import logging
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

TEARSHEET = "tearsheet.html"
INPUTS = "tearsheet.json"  # what finalize hands the sheet (windows, trades)

# Tags that would make the file fetch something when opened; QuantStats adds a favicon link.
_EXTERNAL_TAG = re.compile(r"<link\b[^>]*\bhref=[\"']https?://[^>]*>\s*", re.IGNORECASE)


class TearsheetError(Exception):
    """A folder the tear sheet cannot be drawn from; the message says what is missing."""


def write_tearsheet(run_dir: Path | str) -> Path:
    """Write ``tearsheet.html`` in ``run_dir`` and return its path."""
    root = Path(run_dir)
    verdict = _read_json(root / "verdict.json", root)
    best = verdict.get("best_variant")
    if not best:
        raise TearsheetError(f"{root}: verdict.json names no best variant: nothing to draw")
    inputs = _inputs(root, best)
    strategy, benchmark = _tracks(inputs["windows"])
    if strategy.empty:
        raise TearsheetError(f"{root}: the returns of {best} are empty")
    bench_name = (verdict.get("benchmark") or {}).get("name") or "benchmark"
    page = _quantstats_html(
        strategy,
        benchmark,
        title=f"{root.name}: {best}",
        benchmark_title=bench_name,
        periods_per_year=int(inputs.get("periods_per_year") or 252),
    )
    extra = _lab_sections(root, best, verdict, inputs)
    page = _EXTERNAL_TAG.sub("", page)
    page = page.replace("</body>", extra + "\n</body>", 1) if "</body>" in page else page + extra
    target = root / TEARSHEET
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(target)
    return target


def tearsheet_inputs(
    windows: dict[str, tuple[pd.Series, pd.Series]],
    *,
    variant_id: str,
    benchmark: str,
    trades: list[dict[str, Any]] | None,
    periods_per_year: int = 252,
) -> dict[str, Any]:
    """The JSON finalize writes as ``tearsheet.json``: per window, the dates and both tracks."""
    out = {}
    for name, (strat, bench) in windows.items():
        bench = bench.reindex(strat.index)
        out[name] = {
            "dates": [d.date().isoformat() for d in pd.to_datetime(strat.index)],
            "strategy": [float(x) for x in strat.to_numpy()],
            "benchmark": [None if pd.isna(x) else float(x) for x in bench.to_numpy()],
        }
    return {
        "variant_id": variant_id,
        "benchmark": benchmark,
        "periods_per_year": periods_per_year,
        "windows": out,
        "trades": trades,
    }


def _read_json(path: Path, root: Path) -> Any:
    if not path.is_file():
        raise TearsheetError(
            f"{root}: no {path.name}: not a run folder (expected runs/<run_id>/ from swarm.develop)"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _inputs(root: Path, best: str) -> dict[str, Any]:
    path = root / INPUTS
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    folder = root / "backtests" / best
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise TearsheetError(
            f"{root}: no returns for {best}: neither {INPUTS} nor backtests/{best}/*.json"
        )
    # The equal-weight mean over symbols, as the gate aggregates a variant (one file a fold).
    parts = []
    for f in files:
        rec = json.loads(f.read_text(encoding="utf-8"))
        if rec.get("returns"):
            parts.append(pd.Series(rec["returns"], index=pd.to_datetime(rec["return_dates"])))
    if not parts:
        raise TearsheetError(f"{root}: backtests/{best}/ holds no return series")
    s = pd.concat(parts).groupby(level=0).mean().sort_index()
    window = {
        "dates": [d.date().isoformat() for d in s.index],
        "strategy": s.tolist(),
        "benchmark": [None] * len(s),
    }
    return {"variant_id": best, "windows": {"in-sample": window}, "trades": None}


def _tracks(windows: dict[str, Any]) -> tuple[pd.Series, pd.Series | None]:
    strat, bench = [], []
    for w in windows.values():
        idx = pd.to_datetime(w["dates"])
        strat.append(pd.Series(w["strategy"], index=idx, dtype=float))
        bench.append(pd.Series(w["benchmark"], index=idx, dtype=float))
    s = pd.concat(strat).sort_index()
    b = pd.concat(bench).sort_index()
    s = s[~s.index.duplicated()]
    b = b[~b.index.duplicated()]
    return s, (None if b.isna().all() else b.fillna(0.0))


def _quantstats_html(
    strategy: pd.Series,
    benchmark: pd.Series | None,
    *,
    title: str,
    benchmark_title: str,
    periods_per_year: int,
) -> str:
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    try:
        import quantstats as qs
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise TearsheetError("the tear sheet needs quantstats: pip install -e .") from exc
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        # QuantStats' own deprecation noise (pandas, seaborn, matplotlib) is not the run's.
        warnings.simplefilter("ignore")
        out = Path(tmp) / "qs.html"
        # The benchmark is always a return Series: a ticker string would make QuantStats
        # download it.
        qs.reports.html(
            strategy,
            benchmark=benchmark,
            output=str(out),
            title=title,
            benchmark_title=benchmark_title if benchmark is not None else None,
            periods_per_year=periods_per_year,
        )
        return out.read_text(encoding="utf-8")


def _lab_sections(root: Path, best: str, verdict: dict[str, Any], inputs: dict[str, Any]) -> str:
    parts = ['<div class="container" id="lab-sections" style="font-family:sans-serif">']
    windows = inputs["windows"]
    spans = ", ".join(
        f"{html.escape(n)} {w['dates'][0]} to {w['dates'][-1]}"
        for n, w in windows.items()
        if w["dates"]
    )
    parts.append(f"<h2>Run {html.escape(root.name)}</h2>")
    parts.append(
        f"<p>Best variant <code>{html.escape(best)}</code> "
        f"({html.escape(str(verdict.get('verdict', '')))}); windows: {spans}.</p>"
    )
    if all(v is None for w in windows.values() for v in w["benchmark"]):
        parts.append(f"<p>No benchmark series in this run folder ({INPUTS} missing).</p>")
    parts.append(_exposure_section(root, best, verdict))
    parts.append(_trades_section(inputs.get("trades")))
    parts.append("</div>")
    return "\n".join(parts)


def _exposure_section(root: Path, best: str, verdict: dict[str, Any]) -> str:
    keys = ("exposure_pct", "turnover_annual", "avg_holding_bars", "n_trades")
    rows = []
    for window, fig in (verdict.get("figures") or {}).items():
        for label, m in (("strategy", fig.get("metrics")), ("benchmark", fig.get("buy_and_hold"))):
            if m:
                rows.append([f"{window} {label}", *(m.get(k) for k in keys)])
    folder = root / "backtests" / best
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        m = json.loads(f.read_text(encoding="utf-8")).get("metrics") or {}
        rows.append([f"in-sample {f.stem}", *(m.get(k) for k in keys)])
    head = ["", "exposure %", "turnover / year", "avg holding bars", "trades"]
    return "<h3>Exposure and turnover</h3>" + _table(head, rows)


def _trades_section(trades: list[dict[str, Any]] | None) -> str:
    if trades is None:
        return "<h3>Trade list, in-sample folds</h3><p>Not recorded for this run.</p>"
    head = ["symbol", "entry date", "entry price", "exit date", "exit price", "size", "return %"]
    rows = []
    for t in trades:
        entry, exit_ = t["entry_price"], t.get("exit_price")
        ret = None
        if exit_ is not None and entry:
            ret = 100.0 * (exit_ / entry - 1.0) * (1 if t["size"] > 0 else -1)
        rows.append(
            [
                t["symbol"],
                t["entry_date"],
                entry,
                t.get("exit_date") or "open",
                exit_,
                t["size"],
                ret,
            ]
        )
    # Each fold is its own backtest: a trade open at a fold's end shows as open.
    return f"<h3>Trade list, in-sample folds ({len(rows)} trades)</h3>" + _table(head, rows)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    def cell(x: Any) -> str:
        if x is None:
            return "–"
        if isinstance(x, float):
            return f"{x:,.2f}"
        return html.escape(str(x))

    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f'<table class="lab-table"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def main(argv: list[str] | None = None) -> int:
    """CLI: write RUN_DIR's tearsheet.html and print its path; 2 with one line on bad input."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m experiments.tearsheet RUN_DIR", file=sys.stderr)
        return 2
    try:
        path = write_tearsheet(args[0])
    except TearsheetError as exc:
        print(f"experiments.tearsheet: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
