from __future__ import annotations

import numpy as np
import pytest
from gate_builders import iso_dates, make_result

from backtest.contracts import JobStatus
from backtest.lookahead import LookaheadReport
from gate.contracts import CLEAN_FLOOR as PROGRESS_FLOOR
from gate.contracts import Veto
from gate.criteria import parse_criteria
from gate.evaluate import best_evaluation, evaluate_variants, lookahead_veto
from gate.ledger import TrialLedger
from gate.stats import deflated_sharpe_ratio

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria(None)
N = 500
DATES = iso_dates(N)


def _strong(seed: int) -> np.ndarray:
    # Daily mean 0.2% / sd 1%: annual Sharpe ~3.2, drawdowns well under 20%.
    return np.random.default_rng(seed).normal(0.002, 0.01, N)


def _pnls(n: int, win: float = 0.6) -> list[float]:
    k = int(n * win)
    return [200.0] * k + [-100.0] * (n - k)


def _jobs(vid: str, rets_by_symbol: dict[str, np.ndarray], n_trades: int = 40) -> list:
    return [
        make_result(
            vid, r, symbol=s, dates=DATES, trade_pnls=_pnls(n_trades // 2), bars_in_market=N // 2
        )
        for s, r in rets_by_symbol.items()
    ]


@pytest.fixture
def scenario():
    results = []
    results += _jobs("good", {"A": _strong(1), "B": _strong(2)})
    results += [
        make_result("broken", [], symbol=s, status=JobStatus.ERROR, error="NameError: x")
        for s in "AB"
    ]
    results += _jobs("mostly_broken", {"A": _strong(3)}) + [
        make_result("mostly_broken", [], symbol=s, status=JobStatus.TIMEOUT) for s in "BC"
    ]
    results += _jobs("few_trades", {"A": _strong(4), "B": _strong(5)}, n_trades=10)
    results += _jobs("peeker", {"A": _strong(6), "B": _strong(7)})
    results += [
        make_result("flat", np.zeros(N), symbol=s, dates=DATES, trade_pnls=_pnls(20)) for s in "AB"
    ]
    variants = [
        (v, "momentum", f"sha-{v}")
        for v in ("good", "broken", "mostly_broken", "few_trades", "peeker", "flat", "missing")
    ]
    return variants, results


def test_vetoes_and_pass(scenario) -> None:
    variants, results = scenario
    ledger = TrialLedger()
    # The gate asks for the lookahead check of each variant about to pass, and judges it.
    checked: list[str] = []

    def check(e):
        checked.append(e.variant_id)
        if e.variant_id == "peeker":
            return LookaheadReport(biased=True, mismatches=["cut 2019-03-01: 3 orders differ"]), "A"
        return LookaheadReport(biased=False, n_cuts=20), "A"

    evaluated = evaluate_variants(variants, results, CRITERIA, ledger, lookahead=check)
    ev = {e.variant_id: e for e in evaluated}
    assert checked == ["good", "peeker"]  # only those that pass everything else
    good = ev["good"]
    assert good.vetoes == [] and all(good.criteria_met.values())
    assert good.score >= CRITERIA.score_threshold and good.dsr is not None and good.dsr >= 0.95
    assert good.passed and good.n_jobs == 2 and good.n_errors == 0
    assert any("every job failed" in v for v in ev["broken"].vetoes)
    assert ev["broken"].metrics is None and "NameError" in ev["broken"].errors[0]
    assert any("error rate 67%" in v for v in ev["mostly_broken"].vetoes)
    assert any("too few trades: 10 < 30" in v for v in ev["few_trades"].vetoes)
    assert ev["peeker"].vetoes == ["lookahead detected on A: cut 2019-03-01: 3 orders differ"]
    assert ev["peeker"].veto_kinds == [Veto.LOOKAHEAD]
    assert any("Sharpe undefined" in v for v in ev["flat"].vetoes)
    assert any("no backtest results" in v for v in ev["missing"].vetoes)
    for vid in ("broken", "mostly_broken", "few_trades", "peeker", "flat", "missing"):
        assert not ev[vid].passed and ev[vid].score == 0.0, vid
    assert best_evaluation(list(ev.values())).variant_id == "good"
    # The graded measure: untrusted figures (failed jobs, lookahead) rank below every clean
    # variant; too few trades and an undefined Sharpe are graded, not demoted.
    assert good.progress == pytest.approx(1.0)
    for vid in ("broken", "mostly_broken", "peeker", "missing"):
        assert ev[vid].progress < PROGRESS_FLOOR, vid
    for vid in ("few_trades", "flat"):
        assert PROGRESS_FLOOR <= ev[vid].progress < good.progress, vid


def test_trials_recorded_before_dsr(scenario) -> None:
    variants, results = scenario
    ledger = TrialLedger()
    ledger.record("older-trial", 0.01)
    evals = evaluate_variants(variants, results, CRITERIA, ledger)
    assert ledger.n_trials == 1 + len(variants)  # failed and missing variants count too
    good = next(e for e in evals if e.variant_id == "good")
    m = good.metrics
    expected = deflated_sharpe_ratio(
        m.sharpe_per_period,
        ledger.trial_sharpe_variance(),
        ledger.n_trials,
        m.n_obs,
        m.skew,
        m.kurtosis,
    )
    assert good.dsr == pytest.approx(expected)
    # Re-evaluating the same trials (even renamed) does not inflate the count.
    renamed = [(f"renamed-{v}", f, k) for v, f, k in variants]
    evaluate_variants(renamed, results, CRITERIA, ledger)
    assert ledger.n_trials == 1 + len(variants)


def test_many_trials_deflate_a_mediocre_variant() -> None:
    rng = np.random.default_rng(0)
    rets = rng.normal(0.0007, 0.01, N)  # annual Sharpe ~1.1: meets sharpe>=1 but weakly
    results = _jobs("meh", {"A": rets})
    ledger = TrialLedger()
    for i in range(200):
        ledger.record(f"old-{i}", float(rng.normal(0, 0.04)))
    (e,) = evaluate_variants(
        [("meh", "trend", "sha-meh")], results, parse_criteria("sharpe>=0.5,min_trades>=10"), ledger
    )
    assert e.dsr is not None and e.dsr < 0.5 and not e.passed


def test_run_pbo_needs_eight_variants() -> None:
    from gate.aggregate import portfolio_series
    from gate.evaluate import run_pbo

    rng = np.random.default_rng(5)
    results = [make_result(f"v{i}", rng.normal(0, 0.01, N), dates=DATES) for i in range(10)]
    series = {r.variant_id: portfolio_series([r]) for r in results}
    assert run_pbo(dict(list(series.items())[:7])) is None
    pbo = run_pbo(series)
    assert pbo is not None and 0.0 <= pbo <= 1.0
    edge = make_result("edge", rng.normal(0.004, 0.01, N), dates=DATES)
    assert run_pbo(series | {"edge": portfolio_series([edge])}) < 0.1


def test_run_pbo_ranks_every_variant_of_the_run_whatever_the_order() -> None:
    from gate.aggregate import portfolio_series
    from gate.evaluate import run_pbo

    rng = np.random.default_rng(11)
    # Five noise variants per "iteration", three iterations: no iteration alone has 8.
    results = [
        make_result(f"i{i}-v{k}", rng.normal(0, 0.01, N), dates=DATES)
        for i in range(3)
        for k in range(5)
    ]
    series = {r.variant_id: portfolio_series([r]) for r in results}
    first = {k: v for k, v in series.items() if k.startswith("i0-")}
    assert run_pbo(first) is None
    pbo = run_pbo(series)
    assert pbo is not None and 0.0 <= pbo <= 1.0
    assert run_pbo(dict(reversed(list(series.items())))) == pbo  # a resume reloads in any order
    assert run_pbo(series | {"never-ran": {}}) == pbo  # variants without returns do not count
    edge = make_result("i3-edge", rng.normal(0.004, 0.01, N), dates=DATES)
    assert run_pbo(series | {"i3-edge": portfolio_series([edge])}) < 0.1


def _market(seed: int = 42) -> np.ndarray:
    # A bull market: annual Sharpe ~2.4 from drift alone.
    return np.random.default_rng(seed).normal(0.0015, 0.01, N)


def _exposure(market: np.ndarray) -> np.ndarray:
    """Always ~90% invested, no timing: the market's returns plus tracking noise."""
    return 0.9 * market + np.random.default_rng(5).normal(0.0, 0.002, N)


def test_a_market_exposure_passes_against_cash_but_not_against_its_benchmark() -> None:
    market = _market()
    bench = dict(zip(DATES, market, strict=True))
    exposure = _jobs("exposure", {"A": _exposure(market)}, n_trades=80)
    rng = np.random.default_rng(9)
    # Timing that adds its own return on top of a little exposure.
    timed = _jobs("timed", {"A": 0.2 * market + rng.normal(0.0015, 0.006, N)}, n_trades=80)
    variants = [("exposure", "trend", "k-exposure"), ("timed", "trend", "k-timed")]

    cash = evaluate_variants(variants, exposure + timed, CRITERIA, TrialLedger())
    assert [e.passed for e in cash] == [True, True]
    assert cash[0].alpha.benchmark == "cash" and cash[0].alpha.beta is None

    rel = evaluate_variants(
        variants,
        exposure + timed,
        CRITERIA,
        TrialLedger(),
        benchmark=bench,
        benchmark_name="buy-and-hold",
    )
    exp, tim = rel
    assert exp.alpha.beta == pytest.approx(0.9, abs=0.02)
    assert exp.alpha.deflated_alpha < 0.5 and not exp.passed
    assert exp.dsr > CRITERIA.dsr_threshold  # the old test alone would have passed it
    assert tim.alpha.deflated_alpha >= 0.95 and tim.passed


def test_the_reality_check_gates_a_pass_when_given() -> None:
    market = _market()
    bench = dict(zip(DATES, market, strict=True))
    rng = np.random.default_rng(9)
    timed = _jobs("timed", {"A": 0.2 * market + rng.normal(0.0015, 0.006, N)}, n_trades=80)
    args = ([("timed", "trend", "k")], timed, CRITERIA)
    kw = {"benchmark": bench, "benchmark_name": "buy-and-hold"}
    assert evaluate_variants(*args, TrialLedger(), spa_pvalue=0.01, **kw)[0].passed
    failed = evaluate_variants(*args, TrialLedger(), spa_pvalue=0.2, **kw)[0]
    assert not failed.passed and failed.spa_pvalue == 0.2


def test_alpha_sharpes_go_into_the_ledger() -> None:
    market = _market()
    bench = dict(zip(DATES, market, strict=True))
    ledger = TrialLedger()
    evaluate_variants(
        [("exposure", "trend", "k")],
        _jobs("exposure", {"A": _exposure(market)}),
        CRITERIA,
        ledger,
        benchmark=bench,
        benchmark_name="buy-and-hold",
    )
    assert abs(ledger.alpha_trials["k"]) < 0.1  # per period: noise around zero
    assert ledger.trials["k"] > 0.1


def test_one_integrity_error_vetoes_a_strong_variant() -> None:
    """A job whose fill log failed the trusted books discredits the variant's code: even one of
    five is a veto (not an error rate), and the failure analysis calls it broken code."""
    from gate.contracts import Hint, Veto
    from gate.failure import analyse_failure

    results = _jobs("tamperer", {s: _strong(i) for i, s in enumerate("ABCD")})
    results.append(
        make_result(
            "tamperer",
            [],
            symbol="E",
            status=JobStatus.INTEGRITY_ERROR,
            error="IntegrityError: a cash change no fill explains",
        )
    )
    criteria = parse_criteria("sharpe>=1")
    (ev,) = evaluate_variants([("tamperer", "momentum", "sha")], results, criteria, TrialLedger())
    assert Veto.INTEGRITY in ev.veto_kinds and not ev.passed
    assert "E/fold0: IntegrityError: a cash change" in ev.vetoes[0]
    assert ev.score == 0.0
    analysis = analyse_failure(
        [ev],
        criteria=criteria,
        history=[],
        research_confidence=0.8,
        regime="trending-up",
        families=["momentum"],
    )
    assert Hint.EXCEPTIONS in analysis.hints


@pytest.mark.parametrize(
    "report, kind, sentence",
    [
        (dict(biased=False), None, None),
        (
            dict(biased=True, mismatches=["a", "b", "c"]),
            Veto.LOOKAHEAD,
            "lookahead detected on AAPL: a; b",
        ),
        (
            dict(biased=False, checked=False, error="the full run failed"),
            Veto.LOOKAHEAD_UNCHECKED,
            "lookahead check could not run: the full run failed",
        ),
        (
            dict(biased=True, integrity="fill 3 not at the open"),
            Veto.INTEGRITY,
            "integrity error in the lookahead check on AAPL: fill 3 not at the open",
        ),
    ],
)
def test_lookahead_veto_of_each_report_kind(report, kind, sentence) -> None:
    veto = lookahead_veto(LookaheadReport(**report), "AAPL")
    assert veto == (None if kind is None else (kind, sentence))
