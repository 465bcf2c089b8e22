"""What calibration prints and keeps: one line per run, the rates against their targets,
and the summary written to ``calibration.json``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from swarm.calibration.scenarios import DEFAULT_DIRECTIVE, SCENARIOS, scenario_for
from swarm.calibration.stats import rate_summary
from swarm.calibration.synthetic_universe import UniverseSpec

TARGET_FDR = 0.05
TARGET_POWER = 0.90


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def rate_line(label: str, what: str, s: dict[str, Any], target: str) -> str:
    """A scenario's SUCCESS rate with its Wilson and Clopper-Pearson 95% intervals, against the
    target."""
    wl, wh = s["wilson95"]
    cl, ch = s["clopper_pearson95"]
    return (
        f"{label}: {s['successes']}/{s['runs']} SUCCESS on {what} = {_pct(s['rate'])} "
        f"(95% CI Wilson {_pct(wl)}-{_pct(wh)}, Clopper-Pearson {_pct(cl)}-{_pct(ch)}); "
        f"target {target}"
    )


def _f(x: Any, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


_KIND_WIDTH = max(len(name) for name in SCENARIOS)


def _benchmark_part(r: dict[str, Any]) -> str:
    """The best variant against its benchmark, when the verdict had those figures."""
    alpha = r.get("best_alpha") or {}
    parts = []
    if alpha:
        parts.append(
            f"alpha {_f(alpha.get('alpha_annual_pct'), '.1f')}%/yr beta {_f(alpha.get('beta'))} "
            f"alpha t {_f(alpha.get('t_stat'))} deflated alpha "
            f"{_f(alpha.get('deflated_alpha'), '.3f')}"
        )
    if r.get("spa_pvalue") is not None:
        parts.append(f"SPA p {_f(r['spa_pvalue'], '.3f')}")
    return "  " + "  ".join(parts) if parts else ""


def run_line(r: dict[str, Any]) -> str:
    """One run in one line: verdict, iterations, trials, the best variant's figures and the
    universe's strength."""
    head = f"{r['kind']:<{_KIND_WIDTH}} #{r['index']:03d} seed {r['seed']:<7} {r['verdict']:<8}"
    if r["verdict"] == "ERROR":
        return f"{head} {r.get('error', '')} ({_secs(r)})"
    strength = r.get("strength") or {}
    kind = r.get("universe_kind")
    rule = {"reversion": "reversion", "earnings": "earnings", "earnings_null": "earnings"}.get(
        kind or "", "momentum"
    )
    trades = "-" if r.get("best_trades") is None else str(r["best_trades"])
    return (
        f"{head} iters {r['iterations']:>2}  trials {r['n_trials']:>3}"
        + (f" ({r['n_trials_effective']} eff)" if r.get("n_trials_effective") is not None else "")
        + "  "
        f"best sharpe {_f(r['best_sharpe']):>5} trades {trades:>4} score {_f(r['best_score'])} "
        f"DSR {_f(r['best_dsr'], '.3f')}  holdout sharpe {_f(r['holdout_sharpe']):>5}"
        f"{_benchmark_part(r)}  (universe: {rule} rule sharpe "
        f"{_f(strength.get(f'portfolio_{rule}_long_sharpe'))}, buy&hold "
        f"{_f(strength.get('portfolio_buy_hold_sharpe'))}; {_secs(r)})"
    )


def _target_line(label: str, what: str, s: dict[str, Any], *, null: bool) -> str:
    if null:
        ok = s["rate"] is not None and s["rate"] <= TARGET_FDR
        target = f"<= {TARGET_FDR:.0%}"
    else:
        ok = s["rate"] is not None and s["rate"] >= TARGET_POWER
        target = f">= {TARGET_POWER:.0%}"
    return rate_line(label, what, s, target) + (" -> met" if ok else " -> NOT met")


def _secs(r: dict[str, Any]) -> str:
    """The run's wall time ("?s" for a run recovered from its folder, not timed)."""
    return "?s" if r.get("seconds") is None else f"{r['seconds']:.0f}s"


def summarise(
    records: list[dict[str, Any]],
    args: argparse.Namespace,
    out: Path,
    seconds: float,
    universe: UniverseSpec,
) -> dict[str, Any]:
    """Per-scenario and pooled rates, the summary lines, and every run, for calibration.json.

    Null scenarios give false-discovery rates (target <= TARGET_FDR), planted ones power
    (target >= TARGET_POWER); the pooled lines appear once a side has two scenarios.
    """
    present = [n for n in SCENARIOS if any(r["kind"] == n for r in records)]
    scenarios = {n: scenario_for(n, args.drift) for n in present}
    rates = {n: rate_summary(records, n) for n in present}
    nulls = [n for n in present if scenarios[n].is_null]
    planted = [n for n in present if not scenarios[n].is_null]
    pooled_fdr = rate_summary(records, nulls) if nulls else None
    pooled_power = rate_summary(records, planted) if planted else None

    def what(n: str) -> str:
        return f"{n} ({scenarios[n].what})"

    lines = []
    for label, names, pooled, null in (
        ("false-discovery rate", nulls, pooled_fdr, True),
        ("power", planted, pooled_power, False),
    ):
        lines += [_target_line(label, what(n), rates[n], null=null) for n in names]
        if pooled is not None and len(names) > 1:
            side = "nulls" if null else "planted"
            lines.append(_target_line(label, f"all {side} (pooled)", pooled, null=null))
    lines.append(f"runtime: {seconds:.0f}s for {len(records)} runs")
    return {
        "created": datetime.now(UTC).isoformat(),
        "argv": sys.argv,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "directive": DEFAULT_DIRECTIVE,
        "universe": asdict(universe)
        | {"start": universe.start.isoformat(), "kind": None, "seed": None, "drift_annual": None},
        "scenarios": {
            n: {
                "universe_kind": sc.universe_kind,
                "drift_annual": sc.drift_annual,
                "null": sc.is_null,
                "edge": sc.edge,
                "families": list(sc.families),
            }
            for n, sc in scenarios.items()
        },
        "out": str(out),
        "seconds": round(seconds, 1),
        "rates": rates,
        "false_discovery": pooled_fdr,
        "power": pooled_power,
        "lines": lines,
        "runs": records,
    }
