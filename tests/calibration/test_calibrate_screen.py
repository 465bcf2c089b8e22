"""``python -m swarm.calibrate`` passes ``--no-screen`` / ``--screen-size`` / ``--deflate-by``
on to every develop loop it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm.calibrate import _plan, build_parser, main, run_config
from swarm.cli_args import SCREEN_SIZE

pytestmark = pytest.mark.unit

META = {"symbols": ["SYNA", "SYNB"], "start": "2012-01-02", "end": "2019-12-31"}


def _config(argv: list[str]):
    specs = _plan(build_parser().parse_args(["--runs", "1", "--kinds", "null", *argv]), Path("o"))
    config, _ = run_config(specs[0], META, Path("d"))
    return config


def test_screen_options_reach_the_develop_config() -> None:
    assert _config([]).screen_size == SCREEN_SIZE
    assert _config([]).deflate_by == "effective"
    assert _config(["--no-screen"]).screen_size == 0
    assert _config(["--screen-size", "64", "--deflate-by", "raw"]).screen_size == 64
    assert _config(["--deflate-by", "raw"]).deflate_by == "raw"


def test_bad_screen_options_exit_2(capsys) -> None:
    assert main(["--runs", "1", "--screen-size", "-3"]) == 2
    assert "--screen-size" in capsys.readouterr().err


def test_calibration_runs_draw_no_figures_unless_asked() -> None:
    """Charts and tear sheets come after the verdict (~30 s a run): a calibration skips them."""
    assert _config([]).figures is False
    assert _config(["--figures"]).figures is True
