"""The calibration runner: interval maths, seeds, and a small end-to-end smoke run."""

from __future__ import annotations

import json

import pytest

from swarm.calibrate import (
    clopper_pearson_interval,
    main,
    rate_summary,
    universe_seed,
    wilson_interval,
)


@pytest.mark.unit
def test_intervals_match_published_values() -> None:
    # Wilson 95% for 0/20: (0, 0.1611); for 18/20: (0.6990, 0.9721).
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.16113, abs=1e-4)
    lo, hi = wilson_interval(18, 20)
    assert (lo, hi) == pytest.approx((0.69897, 0.97211), abs=1e-4)
    # Clopper-Pearson 95% for 0/20: upper = 1 - 0.025**(1/20) = 0.16843.
    lo, hi = clopper_pearson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 20), abs=1e-9)
    lo, hi = clopper_pearson_interval(20, 20)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 20), abs=1e-9)
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.unit
def test_rates_ignore_errored_runs_and_seeds_never_collide() -> None:
    recs = [
        {"kind": "null", "verdict": "ABANDON"},
        {"kind": "null", "verdict": "SUCCESS"},
        {"kind": "null", "verdict": "ERROR"},
        {"kind": "planted", "verdict": "SUCCESS"},
    ]
    s = rate_summary(recs, "null")
    assert (s["successes"], s["runs"], s["errors"], s["rate"]) == (1, 2, 1, 0.5)
    seeds = {
        universe_seed(b, k, i) for b in range(3) for k in ("null", "planted") for i in range(1, 51)
    }
    assert len(seeds) == 3 * 2 * 50


@pytest.mark.e2e
@pytest.mark.slow
def test_smoke_run_prints_rates_and_writes_summary(tmp_path, capsys) -> None:
    """2 no-edge + 2 planted runs of the full loop, kept small (2 symbols, 3 iterations);
    the pre-scenario kind names still work (null = null-zero, planted = planted-momentum-zero)."""
    code = main(
        [
            "--runs",
            "2",
            "--seed",
            "7",
            "--out",
            str(tmp_path),
            "--symbols",
            "2",
            "--years",
            "6",
            "--variants",
            "3",
            "--max-iterations",
            "3",
            "--quiet",
            "--kinds",
            "null,planted",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert sum(ln.startswith(("null-zero ", "planted-momentum-zero ")) for ln in lines) == 4
    assert any(ln.startswith("false-discovery rate: ") and "/2 SUCCESS" in ln for ln in lines)
    assert any(ln.startswith("power: ") and "Wilson" in ln for ln in lines)
    summary = json.loads((tmp_path / "calibration.json").read_text())
    assert summary["false_discovery"]["runs"] == 2 and summary["power"]["runs"] == 2
    assert {r["kind"] for r in summary["runs"]} == {"null-zero", "planted-momentum-zero"}
    assert list(summary["rates"]) == ["null-zero", "planted-momentum-zero"]
    for r in summary["runs"]:
        assert r["verdict"] in ("SUCCESS", "ABANDON")
        assert r["n_trials"] >= 1 and (tmp_path / "data" / f"{r['kind']}-{r['index']:03d}").is_dir()
        assert not list((tmp_path / "runs").rglob("checkpoint*"))
