"""Issue 27 (B): the screen's parameter-sensitivity heatmap, read back from a run folder."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import numpy as np
import pytest

from experiments.charts import SENSITIVITY_CHART, draw_sensitivity
from experiments.charts import main as charts_main
from experiments.records import ScreenedTrial, ScreenRecord, append_record
from experiments.runfolder import RunFolder, screen_file
from experiments.sensitivity import (
    best_spec_of,
    heatmap_of,
    median_grid,
    parameter_spread,
    pick_batch,
    sensitive_pair,
)
from strategies.spec import StrategySpec

pytestmark = pytest.mark.unit
PNG = b"\x89PNG"


def _figure(p: dict[str, float]) -> float:
    """roc_period moves the Sharpe most, stop_pct less, hold not at all."""
    return 1.0 - 0.1 * abs(p["roc_period"] - 12) - 0.02 * abs(p["stop_pct"] - 5)


def _trials() -> list[tuple[dict[str, float], float]]:
    grid = [
        {"roc_period": r, "stop_pct": s, "hold": h}
        for r in (8.0, 10.0, 12.0, 14.0)
        for s in (3.0, 5.0, 7.0)
        for h in (10.0, 20.0)
    ]
    return [(p, _figure(p)) for p in grid]


def test_the_pair_is_the_two_parameters_whose_median_moves_most() -> None:
    spread = parameter_spread(_trials())
    assert spread["roc_period"] > spread["stop_pct"] > spread["hold"] == pytest.approx(0.0)
    assert sensitive_pair(_trials()) == ("roc_period", "stop_pct")


@pytest.mark.parametrize(
    ("trials", "pair"),
    [
        ([], None),
        ([({"a": 1.0, "b": 2.0}, 0.5)], None),  # nothing moves
        ([({"a": 1.0, "b": 2.0}, 0.5), ({"a": 2.0, "b": 2.0}, 0.7)], None),  # one moves
        ([({"a": 1.0, "b": 1.0}, 0.5), ({"a": 2.0, "b": 2.0}, 0.5)], ("a", "b")),  # tie: names
    ],
)
def test_fewer_than_two_moving_parameters_have_no_pair(trials, pair) -> None:
    assert sensitive_pair(trials) == pair


def test_median_grid_leaves_empty_cells_nan() -> None:
    trials = [
        ({"a": 1.0, "b": 1.0}, 0.1),
        ({"a": 1.0, "b": 1.0}, 0.5),
        ({"a": 1.0, "b": 1.0}, 0.3),
        ({"a": 2.0, "b": 3.0}, -0.4),
    ]
    xs, ys, grid = median_grid(trials, "a", "b")
    assert (xs, ys) == ([1.0, 2.0], [1.0, 3.0])
    assert grid[0, 0] == pytest.approx(0.3) and grid[1, 1] == pytest.approx(-0.4)
    assert math.isnan(grid[0, 1]) and math.isnan(grid[1, 0])


SPEC = {
    "name": "momentum-roc",
    "family": "momentum",
    "approach": "buy strength",
    "entry": "roc_momentum",
}


def _spec(params: dict[str, float]) -> StrategySpec:
    return StrategySpec.model_validate({**SPEC, "parameters": params})


def _record(iteration: int, parent_id: str, sets: list[dict[str, float]], confirmed: int = 2):
    ranked = sorted(sets, key=lambda p: -_figure(p))
    keys = [_spec(p).trial_key() for p in ranked]
    return ScreenRecord(
        run_id="run",
        iteration=iteration,
        route="TUNE",
        parent_id=parent_id,
        n_sets=len(sets),
        n_symbols=1,
        n_folds=2,
        series_file=screen_file(iteration),
        confirmed=keys[:confirmed],
        trials=[
            ScreenedTrial(trial_key=k, parameters=p, sharpe=_figure(p), n_trades=40)
            for k, p in zip(keys, ranked, strict=True)
        ]
        + [ScreenedTrial(trial_key="broken", parameters={"roc_period": 99.0}, error="boom")],
        recorded_at=datetime.now(UTC).isoformat(),
    )


def test_the_batch_that_screened_the_best_variant_is_drawn_with_it_marked() -> None:
    sets = [p for p, _ in _trials()]
    first = _record(2, "i01-v01-momentum-a", sets).model_dump(mode="json")
    second = _record(3, "i02-v01-trend-b", sets[:6]).model_dump(mode="json")
    best = _spec({"roc_period": 10.0, "stop_pct": 7.0, "hold": 20.0}).trial_key()
    assert pick_batch([first, second], best) == (first, best)
    # not screened: the last batch around the best's family, marked at its top set
    families = {"i01-v01-momentum-a": "momentum", "i02-v01-trend-b": "trend"}
    picked = pick_batch([first, second], "other", best_family="momentum", families=families)
    assert picked == (first, first["confirmed"][0])
    assert pick_batch([first, second], None) == (second, second["confirmed"][0])
    assert pick_batch([{"kind": "variant"}], best) is None

    hm = heatmap_of(first, best, best=True)
    assert (hm.x_name, hm.y_name) == ("roc_period", "stop_pct")
    assert hm.chosen == (10.0, 7.0) and hm.chosen_label == "best variant"
    assert hm.grid.shape == (3, 4) and np.nanmax(hm.grid) == pytest.approx(1.0)
    assert "Screen i02" in hm.title and "24 sets" in hm.title  # the broken set left out


def test_a_run_folder_with_a_screen_gets_the_chart_and_the_cli_redraws_it(tmp_path, capsys):
    from backtest.screen import Sweep, write_batch

    run = RunFolder(tmp_path / "run")
    sets = [p for p, _ in _trials()]
    record = _record(2, "i01-v01-momentum-a", sets)
    append_record(run.tracker, record)
    write_batch(  # the series file beside it, as the screen writes it (not read by the chart)
        run.path(screen_file(2)),
        Sweep(sets=[], dates=["2014-01-02"], returns=np.zeros((0, 1)), n_symbols=1, n_folds=2),
    )
    best = {**SPEC, "parameters": {"roc_period": 12.0, "stop_pct": 5.0, "hold": 10.0}}
    (run.root / "variants.json").write_text(json.dumps({"i02-v03-x": {"spec": best}}))
    (run.root / "verdict.json").write_text(json.dumps({"best_variant": "i02-v03-x"}))
    assert best_spec_of(run.root) == best

    assert draw_sensitivity(run.root, best) == SENSITIVITY_CHART
    chart = run.root / SENSITIVITY_CHART
    assert chart.read_bytes().startswith(PNG)
    chart.unlink()
    assert charts_main([str(run.root)]) == 0
    assert chart.read_bytes().startswith(PNG)
    assert capsys.readouterr().out.strip().endswith(SENSITIVITY_CHART)


def test_a_run_without_screens_draws_nothing(tmp_path, capsys):
    run = RunFolder(tmp_path / "run")
    assert draw_sensitivity(run.root, None) is None
    assert charts_main([str(run.root)]) == 0
    assert "no sensitivity chart" in capsys.readouterr().err
    assert not (run.root / SENSITIVITY_CHART).exists()
    assert charts_main([str(tmp_path / "nowhere")]) == 2
