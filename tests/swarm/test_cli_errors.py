"""Bad input exits 2 with one line that names the argument, never a traceback, and no run folder."""

import subprocess
import sys

import pytest

from swarm.develop import main

pytestmark = pytest.mark.integration


def _run(capsys, tmp_path, *args):
    code = main([*args, "--out", str(tmp_path / "runs"), "--offline", "--quiet"])
    captured = capsys.readouterr()
    return code, captured.err.strip(), captured.out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--directive", "momentum", "--tickers", "ZZZZ"], "--tickers"),
        (
            [
                "--directive",
                "momentum",
                "--tickers",
                "AAPL",
                "--start",
                "2019-01-01",
                "--end",
                "2018-01-01",
            ],
            "--end",
        ),
        (
            [
                "--directive",
                "momentum",
                "--tickers",
                "AAPL",
                "--start",
                "1950-01-01",
                "--end",
                "1951-01-01",
            ],
            "1950",
        ),
        (["--directive", "   ", "--tickers", "AAPL"], "--directive"),
        (["--directive", "momentum", "--tickers", "AAPL", "--variants", "0"], "--variants"),
        (["--directive", "momentum", "--tickers", "AAPL", "--start", "2019-13-01"], "--start"),
        (["--directive", "momentum", "--tickers", "AAPL", "--criteria", "shrape>=1"], "--criteria"),
        (["--directive", "momentum", "--tickers", "AAPL", "--source", "bloomberg"], "--source"),
        (["--directive", "momentum", "--tickers", "AAPL", "--prices", "total"], "--prices"),
        (
            ["--directive", "momentum", "--tickers", "AAPL", "--criteria-replace"],
            "--criteria-replace",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, daily_dir, args, needle):
    code, err, out = _run(capsys, tmp_path, *args, "--data-dir", str(daily_dir))
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and needle in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "runs").exists()  # nothing half-made


def test_unreadable_csv_exits_2_naming_the_file(capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "AAPL.csv").write_text("this is not,a price file\n\x00\x01garbage\n")
    code, err, _ = _run(
        capsys,
        tmp_path,
        "--directive",
        "momentum",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(data),
        "--start",
        "2015-01-01",
        "--end",
        "2016-01-01",
    )
    assert code == 2
    assert len(err.splitlines()) == 1 and "AAPL.csv" in err


def test_missing_data_dir_exits_2(capsys, tmp_path):
    code, err, _ = _run(
        capsys, tmp_path, "--directive", "momentum", "--data-dir", str(tmp_path / "nope")
    )
    assert code == 2 and "--data-dir" in err


def test_real_process_prints_no_traceback(tmp_path, daily_dir):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "momentum",
            "--tickers",
            "NOPE",
            "--data-dir",
            str(daily_dir),
            "--offline",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --tickers"), done.stderr


def test_print_graph_is_mermaid_with_every_node(capsys):
    assert main(["--print-graph"]) == 0
    out = capsys.readouterr().out
    for node in (
        "data_extractor",
        "research_subagent",
        "synthesizer_technical",
        "synthesizer_fundamental",
        "synthesizer_sentiment",
        "leader",
        "strategy_dev",
        "backtest",
        "gate",
        "failure_analysis",
        "trajectory",
        "router",
        "holdout",
        "finalize",
    ):
        assert node in out
    assert out.lstrip().startswith("---") or "graph TD" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--benchmark", "ZZZZ"], "--benchmark: no data for ZZZZ"),
        # FB starts trading in 2012-05: no return on the universe's in-sample dates.
        (["--benchmark", "FB", "--start", "2008-01-01", "--end", "2012-12-31"], "--benchmark: FB"),
        (["--benchmark", "   "], "--benchmark: empty"),
        (["--benchmark", "S P Y"], "--benchmark: 'S P Y'"),
    ],
    ids=["unknown symbol", "no overlap", "empty", "not a symbol"],
)
def test_bad_benchmark_exits_2_with_one_line_and_no_run_folder(
    capsys, tmp_path, daily_dir, args, needle
):
    base = ["--directive", "momentum", "--tickers", "AAPL", "--data-dir", str(daily_dir)]
    if "--start" not in args:
        base += ["--start", "2015-01-01", "--end", "2019-12-31"]
    code, err, out = _run(capsys, tmp_path, *base, *args)
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and needle in err, err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("families", "missing"),
    [("index_regime", "SPY.csv"), ("momentum,vix_regime", "VIX.csv"), ("Index-Regime", "SPY.csv")],
)
def test_a_regime_filter_in_families_needs_its_index_file(
    capsys, tmp_path, daily_dir, families, missing
):
    """--families index_regime / vix_regime ask for the filter as the directive's phrases do:
    without its index file in --data-dir the run is refused before anything runs."""
    import shutil

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(daily_dir / "AAPL.csv", data / "AAPL.csv")
    code, err, out = _run(
        capsys,
        tmp_path,
        "--directive",
        "momentum",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(data),
        "--families",
        families,
    )
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"the regime filter needs {missing} in {data}" in err
    assert "out of --families" in err and out == ""
    assert not (tmp_path / "runs").exists()


def test_a_regime_filter_in_families_is_a_style_of_the_run(daily_dir):
    from swarm.develop import build_parser, config_from_args

    def config(families):
        args = build_parser().parse_args(
            [
                "--directive",
                "momentum",
                "--tickers",
                "AAPL",
                "--data-dir",
                str(daily_dir),
                "--offline",
                "--families",
                families,
            ]
        )
        return config_from_args(args)[0]

    both = config("momentum,index_regime,vix_regime")
    assert both.preferred_families == ["momentum", "index_regime", "vix_regime"]
    # index_regime stays a named family (the portfolio proposers read it there, as from the
    # directive); vix_regime is a style only.
    assert both.families == ["momentum", "index_regime"]
    assert config("index_regime").families == ["index_regime"]


def test_an_unknown_family_names_the_regime_filters_too(capsys, tmp_path, daily_dir):
    code, err, _ = _run(
        capsys,
        tmp_path,
        "--directive",
        "momentum",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(daily_dir),
        "--families",
        "regime",
    )
    assert code == 2 and "--families: 'regime' is not a family" in err
    assert "or a regime filter (index_regime, vix_regime)" in err
