"""The regime filter's index files in a run: hashed into the manifest and the job's data hash,
a clear job error when missing, offered to the LLM and to REFINE only when present."""

from __future__ import annotations

import hashlib
import random
import shutil
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from strategies.codegen import render
from strategies.families import default_spec, reconcile, with_regime_filter
from strategies.mutate import refine
from strategies.regime import (
    INDEX_REGIME,
    VIX_REGIME,
    available_filters,
    index_symbols,
    needed_series,
)
from strategies.spec import Family
from swarm.errors import UserInputError


def _folder(tmp_path: Path, daily_dir: Path, symbols: tuple[str, ...]) -> Path:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for s in symbols:
        shutil.copy(daily_dir / f"{s}.csv", data / f"{s}.csv")
    return data


def _config(data: Path, **kw):
    from swarm.config import RunConfig

    return RunConfig(
        directive="momentum",
        tickers=["AAPL"],
        universe_source="cli",
        preferred_families=["momentum"],
        start=date(2010, 1, 1),
        end=date(2014, 12, 31),
        data_dir=data,
        source="csv",
        offline=True,
        n_folds=2,
        **kw,
    )


def _ctx(data, pieces, config, **kw):
    return SimpleNamespace(
        data=data,
        symbols=list(data),
        memo=pieces["memo"],
        config=config,
        split=pieces["split"],
        **kw,
    )


REGIME_CODE = render(with_regime_filter(default_spec(Family.TREND)))  # reads index:SPY
VIX_CODE = render(
    reconcile(default_spec(Family.MOMENTUM).model_copy(update={"filters": [VIX_REGIME]}))
)
PLAIN_CODE = render(default_spec(Family.TREND))


@pytest.mark.integration
def test_a_changed_spy_csv_shows_in_the_manifest_and_the_job_s_data_hash(tmp_path, daily_dir):
    """Regression: the manifest and the records hashed only the traded files, so a changed
    SPY.csv left a regime variant's run looking identical."""
    from swarm.nodes.backtest import data_sha256
    from swarm.run import _check_same_data, _load

    data_dir = _folder(tmp_path, daily_dir, ("AAPL", "SPY", "QQQ"))
    config = _config(data_dir)
    data, pieces, summary = _load(config)
    assert sorted(summary["indices"]) == ["QQQ", "SPY"]  # no VIX.csv: not offered, not hashed
    spy = summary["indices"]["SPY"]
    assert spy["path"] == str(data_dir / "SPY.csv") and spy["source"] == "csv"
    ctx = _ctx(data, pieces, config)
    traded = data["AAPL"].sha256
    assert data_sha256(ctx, "AAPL", PLAIN_CODE) == data_sha256(ctx, "AAPL") == traded
    with_spy = data_sha256(ctx, "AAPL", REGIME_CODE)
    assert with_spy != traded
    expected = f"AAPL:{traded},index:SPY:{spy['sha256']}"
    assert with_spy == hashlib.sha256(expected.encode()).hexdigest()
    # A code reading a series the run lacks still hashes (as missing), never raises.
    assert data_sha256(ctx, "AAPL", VIX_CODE) not in (traded, with_spy)

    # One close of SPY changes: the manifest's entry, the job's hash and --resume see it.
    path = data_dir / "SPY.csv"
    lines = path.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("2012-06-01"))
    row = lines[i].split(",")
    row[4] = f"{float(row[4]) + 0.01:.6f}"  # the close, inside the run's window
    lines[i] = ",".join(row)
    path.write_text("\n".join(lines) + "\n")
    data2, pieces2, summary2 = _load(config)
    assert summary2["indices"]["SPY"]["sha256"] != spy["sha256"]
    assert summary2["indices"]["QQQ"] == summary["indices"]["QQQ"]
    assert summary2["symbols"] == summary["symbols"]
    assert data_sha256(_ctx(data2, pieces2, config), "AAPL", REGIME_CODE) != with_spy
    with pytest.raises(UserInputError, match="index series changed.*SPY"):
        _check_same_data(summary, summary2)
    _check_same_data(summary2, summary2)
    _check_same_data({k: v for k, v in summary.items() if k != "indices"}, summary2)  # old run


@pytest.mark.integration
def test_a_run_asking_for_the_filter_without_the_files_is_refused(tmp_path, daily_dir):
    from swarm.run import _load

    data_dir = _folder(tmp_path, daily_dir, ("AAPL", "SPY"))
    config = _config(data_dir, families=[INDEX_REGIME])
    with pytest.raises(UserInputError, match="regime filter needs the index QQQ"):
        _load(config)
    _, _, summary = _load(_config(data_dir))  # not asked for: SPY alone is recorded
    assert list(summary["indices"]) == ["SPY"]


@pytest.mark.integration
def test_a_variant_reading_a_missing_index_is_a_job_error_naming_the_file(tmp_path, daily_dir):
    """Regression: the job failed with a bare ``KeyError 'index:VIX'`` inside the backtest."""
    from backtest.contracts import JobStatus
    from experiments.runfolder import RunFolder, code_file
    from swarm.nodes.backtest import backtest, load_results
    from swarm.run import _load
    from swarm.state import BacktestTask

    data_dir = _folder(tmp_path, daily_dir, ("AAPL", "SPY", "QQQ"))
    config = _config(data_dir)
    data, pieces, _ = _load(config)

    class NoExecutor:
        def submit(self, job):
            raise AssertionError("a job missing its index feed must not be run")

    run = RunFolder.create(tmp_path / "runs", "r")
    ctx = _ctx(
        data,
        pieces,
        config,
        run=run,
        folds=pieces["folds"],
        executor=NoExecutor(),
        progress=SimpleNamespace(tick=lambda: None),
        periods_per_year=252,
        insample_bars=lambda s: data[s].bars,
    )
    run.write_text(code_file("v"), VIX_CODE)
    sha = hashlib.sha256(VIX_CODE.encode()).hexdigest()
    task = BacktestTask(iteration=1, variant_id="v", code_sha256=sha, symbol="AAPL", fold=0)
    out = backtest(task, SimpleNamespace(context=ctx))
    (result,) = load_results(ctx, out["results"])
    assert result.status == JobStatus.ERROR
    assert 'getdatabyname("index:VIX")' in result.error and "VIX.csv" in result.error
    assert str(data_dir) in result.error and "add the file" in result.error
    assert "KeyError" not in result.error


@pytest.mark.unit
def test_the_llm_catalogue_lists_a_regime_filter_only_with_its_files() -> None:
    from swarm.nodes.strategy_brief import catalogue_text

    assert needed_series([VIX_REGIME]) == ["VIX"]
    assert needed_series([INDEX_REGIME, VIX_REGIME]) == ["SPY", "QQQ", "VIX"]
    assert available_filters(["SPY"]) == ()  # the tuner moves regime_index to QQQ
    assert available_filters(["SPY", "QQQ"]) == (INDEX_REGIME,)
    assert available_filters(["VIX", "QQQ", "SPY"]) == (INDEX_REGIME, VIX_REGIME)
    bare = catalogue_text()
    assert "index_regime(" not in bare and "vix_regime(" not in bare and "trend_sma(" in bare
    some = catalogue_text(available_filters(["SPY", "QQQ"]))
    assert "index_regime(regime_index=0" in some and "vix_regime(" not in some


@pytest.mark.unit
@pytest.mark.parametrize("hint", ["market_exposure", "regime_mismatch"])
def test_refine_adds_the_index_filter_first_for_market_hints_when_the_data_has_it(hint) -> None:
    spec = default_spec(Family.MOMENTUM)
    refined = refine(
        spec, failure_hint=hint, rng=random.Random(0), seen=set(), regime_filters=(INDEX_REGIME,)
    )
    assert refined.filters[-1] == INDEX_REGIME and f"+{INDEX_REGIME}" in refined.name
    assert {"regime_index", "regime_ma"} <= set(refined.parameters)
    assert index_symbols(render(refined)) == ["SPY"]
    # Without the files it is never added, whatever the hint.
    for h in (hint, "deep_drawdown", "no_edge"):
        seen: set[str] = set()
        for _ in range(8):
            other = refine(spec, failure_hint=h, rng=random.Random(0), seen=seen)
            assert INDEX_REGIME not in other.filters
            seen.add(other.trial_key())
    # Tried already: the next move of the hint's own order.
    again = refine(
        spec,
        failure_hint=hint,
        rng=random.Random(0),
        seen={refined.trial_key()},
        regime_filters=(INDEX_REGIME, VIX_REGIME),
    )
    assert again.filters[-1] == VIX_REGIME
    # Other hints keep their order.
    drawdown = refine(
        spec,
        failure_hint="deep_drawdown",
        rng=random.Random(0),
        seen=set(),
        regime_filters=(INDEX_REGIME,),
    )
    assert INDEX_REGIME not in drawdown.filters


@pytest.mark.unit
def test_the_refine_route_passes_the_run_s_regime_filters_through() -> None:
    from gate.contracts import FailureAnalysis, FailureType, Hint, VariantEvaluation
    from swarm.agents.strategy_dev import propose

    spec = default_spec(Family.MOMENTUM)
    ev = VariantEvaluation(
        variant_id="v", family="momentum", trial_key=spec.trial_key(), metrics=None, score=0.1
    )
    failure = FailureAnalysis(
        failure_type=FailureType.DESIGN_FLAW,
        root_cause="beta",
        confidence=0.5,
        hints=[Hint.MARKET_EXPOSURE],
    )

    def refined(regime_filters):
        out = propose(
            route="REFINE",
            n=1,
            rng=random.Random(0),
            seen=set(),
            families=["momentum"],
            suggested=None,
            best=None,
            last=[(ev, spec)],
            failure=failure,
            min_trades=10,
            regime_filters=regime_filters,
        )
        return out[0].spec

    assert INDEX_REGIME in refined((INDEX_REGIME,)).filters
    assert INDEX_REGIME not in refined(()).filters
