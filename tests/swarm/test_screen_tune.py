"""TUNE through the screen in the develop loop, and ``--no-screen``.

Small in-process runs on the real corpus (one symbol, so the best so far is a catalogue spec
and the tuning slots go through the screen). The screen's sets are trials in the ledger, one
``screen`` record lists them, their series are in ``screens/``, the verdict carries the
effective count; ``--no-screen`` never touches the screen, and measuring the effective count
changes nothing when the DSR deflates by the raw count.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.check import check_run
from experiments.tracker import read_records, strip_volatile
from swarm.develop import build_parser, config_from_args
from swarm.errors import UserInputError
from swarm.run import execute, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _args(daily_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--directive",
        "momentum alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2013-01-01",
        "--end",
        "2018-12-31",
        "--variants",
        "3",
        "--folds",
        "2",
        "--max-iterations",
        "3",
        "--workers",
        "1",
        "--seed",
        "2",
        "--criteria",
        "sharpe>=0.8,min_trades>=10,dsr>=0.5",
        "--criteria-replace",
        "--ledger-dir",  # the runs of a test compare: none counts another's trials
        "off",
        "--offline",
        "--memory-dir",
        "off",
        "--out",
        str(out),
        *extra,
    ]


def _run(argv: list[str]) -> Path:
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    return prepared.run.root


def _verdict(run: Path) -> dict:
    return json.loads((run / "verdict.json").read_text())


def _records(run: Path) -> list[dict]:
    return strip_volatile(list(read_records(run / "experiments.jsonl")))


@pytest.fixture(scope="module")
def screened(tmp_path_factory, daily_dir) -> Path:
    return _run(_args(daily_dir, tmp_path_factory.mktemp("screen"), "--screen-size", "40"))


def test_screened_sets_are_trials_and_the_best_are_confirmed(screened):
    screens = [r for r in read_records(screened / "experiments.jsonl") if r["kind"] == "screen"]
    assert screens, "the run never tuned through the screen"
    problem, summary = check_run(screened)
    assert problem is None and "screen" in summary
    variants = json.loads((screened / "variants.json").read_text())
    confirmed_ids = {vid for vid, v in variants.items() if " | screen " in v["spec"]["name"]}
    assert confirmed_ids
    for rec in screens:
        assert rec["n_sets"] == len(rec["trials"]) <= 40 and rec["n_folds"] == 2
        assert (screened / rec["series_file"]).is_file()
        sharpes = [t["sharpe"] for t in rec["trials"] if t["sharpe"] is not None]
        # The confirmed set is the screen's best (the trade floor met first).
        top = rec["trials"][0]
        assert rec["confirmed"][0] == top["trial_key"]
        eligible = [
            t["sharpe"]
            for t in rec["trials"]
            if t["sharpe"] is not None and t["n_trades"] >= rec["min_trades"]
        ]
        assert top["sharpe"] == max(eligible or sharpes)
    # Every screened set counts; Backtrader confirmed the set with the screen's Sharpe.
    v = _verdict(screened)
    n_screened = len({t["trial_key"] for rec in screens for t in rec["trials"]})
    assert v["n_trials"] >= n_screened + 3
    assert 1 <= v["n_trials_effective"] <= v["n_trials"]
    assert v["deflated_by"] == "effective"
    by_key = {t["trial_key"]: t for rec in screens for t in rec["trials"]}
    for vid in confirmed_ids:
        in_sample = variants[vid]["in_sample"]
        key = next(
            r["trial_key"]
            for r in read_records(screened / "experiments.jsonl")
            if r["kind"] == "backtest" and r["variant_id"] == vid
        )
        assert in_sample["metrics"]["sharpe"] == pytest.approx(by_key[key]["sharpe"], rel=1e-9)
        assert in_sample["metrics"]["n_trades"] == by_key[key]["n_trades"]
    report = (screened / "report.md").read_text()
    assert "Effective trials" in report
    # Issue 27: the screen's sensitivity heatmap is drawn and shown; the criteria line says
    # the run's rules replaced the defaults.
    assert (screened / "charts" / "sensitivity.png").read_bytes().startswith(b"\x89PNG")
    assert "![sensitivity](charts/sensitivity.png)" in report
    assert "yours `sharpe>=0.8`, `min_trades>=10`, `dsr>=0.5` in place of" in report


def test_no_screen_never_screens_and_raw_deflation_ignores_the_effective_count(
    tmp_path, daily_dir, monkeypatch
):
    import swarm.nodes.gate as gate_node
    import swarm.nodes.screen_tuner as strategy_node

    # No figures in either run: the test compares records, variants and verdicts, and
    # figures are drawn from them after they are written.
    argv = _args(daily_dir, tmp_path / "a", "--no-screen", "--deflate-by", "raw", "--no-figures")

    def refuse(*a, **k):
        raise AssertionError("--no-screen must not screen")

    monkeypatch.setattr(strategy_node, "neighbourhood", refuse)
    plain = _run(argv)
    assert not (plain / "screens").exists()
    # The same run with the effective count never measured: everything but the count agrees.
    from gate.ledger import EffectiveTrials

    monkeypatch.setattr(
        gate_node,
        "measure_effective",
        lambda *a, **k: EffectiveTrials(n=10**6, threshold=0.2, cluster_sharpes=[1.0, -1.0]),
    )
    unmeasured = _run(
        _args(daily_dir, tmp_path / "b", "--no-screen", "--deflate-by", "raw", "--no-figures")
    )
    va, vb = _verdict(plain), _verdict(unmeasured)
    assert va["n_trials_effective"] <= va["n_trials"] == vb["n_trials"] == vb["n_trials_effective"]
    drop = {"n_trials_effective"}
    assert {k: x for k, x in va.items() if k not in drop} == {
        k: x for k, x in vb.items() if k not in drop
    }
    volatile = {"run_id", "record_id", "recorded_at"}
    ra = [{k: x for k, x in r.items() if k not in volatile} for r in _records(plain)]
    rb = [{k: x for k, x in r.items() if k not in volatile} for r in _records(unmeasured)]
    assert ra == rb
    assert json.loads((plain / "variants.json").read_text()) == json.loads(
        (unmeasured / "variants.json").read_text()
    )


def test_screen_options_are_checked():
    parser = build_parser()
    base = ["--directive", "x", "--tickers", "AAPL"]
    with pytest.raises(UserInputError, match="--screen-size"):
        config_from_args(parser.parse_args([*base, "--screen-size", "-1"]))
    with pytest.raises(UserInputError, match="--deflate-by"):
        config_from_args(parser.parse_args([*base, "--deflate-by", "some"]))
    config, _ = config_from_args(parser.parse_args([*base, "--no-screen"]))
    assert config.screen_size == 0 and config.deflate_by == "effective"
