"""Sentiment momentum, a family discovered in ``swarm/families/``: ``--families
sentiment_momentum`` validates, its code carries the readings known by the window's end
(scored with the research swarm's scorer; no text), a ticker or window without items proposes
nothing and says so, and a develop run proposes, backtests and gates it (issue 26, item 6)."""

from __future__ import annotations

import ast
import json
import random
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from backtest.splits import TimeSplit
from experiments.runfolder import holdout_code_file
from strategies.family_api import FamilyPlugin, ProposalContext
from strategies.sentiment_momentum import CLASS_NAME, KIND, momentum_spec
from swarm.develop import build_parser, config_from_args
from swarm.errors import UserInputError
from swarm.families import registry
from swarm.research.news import score_headline
from swarm.run import execute, prepare

HEADER = "date_utc,created_at_utc,ticker,tweet_id,user_id,followers,text\n"


def _days(code: str) -> dict[str, tuple[tuple[int, int, float], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DAYS":
            return ast.literal_eval(node.value)
    raise AssertionError("no DAYS table in the code")


def _alt(tmp_path: Path) -> Path:
    """Tweets for AAPL on every weekday of 2015-03 .. 2015-07 (two a day), one late on the
    in-sample end (after the close: the next session), and none for MSFT."""
    (tmp_path / "social").mkdir()
    (tmp_path / "news").mkdir()
    lines = []
    rng = random.Random(0)
    words = ["great", "bad", "strong buy", "terrible miss", "beats", "flat day"]
    for i, day in enumerate(_weekdays(date(2015, 3, 2), date(2015, 7, 31))):
        for k in range(2):
            text = f"$AAPL {rng.choice(words)} {i} {k}"
            lines.append(f"{day},{day} 1{k}:00:00,AAPL,{i}{k},1,10,{text}")
    lines.append("2015-06-30,2015-06-30 20:30:00,AAPL,999,1,10,$AAPL late great news")
    (tmp_path / "social" / "stocknet_tweets_2014_2016.csv").write_text(
        HEADER + "\n".join(lines) + "\n"
    )
    return tmp_path


def _weekdays(start: date, end: date) -> list[date]:
    return [d.date() for d in pd.bdate_range(start, end)]


def _run(root: Path, symbols: list[str]) -> SimpleNamespace:
    written: dict[str, str] = {}
    return SimpleNamespace(
        config=SimpleNamespace(alt_data=root, data_dir=None),
        symbols=symbols,
        run=SimpleNamespace(write_text=lambda rel, text: written.__setitem__(rel, text)),
        split=TimeSplit(
            insample_start=date(2015, 1, 2),
            insample_end=date(2015, 6, 30),
            holdout_start=date(2015, 7, 1),
            holdout_end=date(2015, 12, 31),
        ),
        folds=[SimpleNamespace(warmup_start=date(2015, 1, 2), start=date(2015, 4, 1))],
        written=written,
    )


def _ctx(run: SimpleNamespace, route: str = "INITIAL") -> ProposalContext:
    return ProposalContext(
        route=route,
        rng=random.Random(0),
        seen=set(),
        families=[KIND],
        n_symbols=len(run.symbols),
        run=run,
    )


@pytest.mark.unit
def test_the_plugin_is_discovered_and_families_validates():
    plugin = registry().for_kind(KIND)
    assert isinstance(plugin, FamilyPlugin) and KIND in registry().known()
    assert (plugin.scope, plugin.self_proposing, plugin.repairable) == ("symbol", True, False)
    assert not plugin.screens(momentum_spec())
    assert plugin.slots([KIND], 6, 2) == 6
    assert plugin.slots([KIND, "momentum"], 6, 2) == 3
    assert plugin.slots(["momentum"], 6, 2) == 0
    from swarm.develop_config import _families

    assert _families("sentiment-momentum,momentum", []) == [KIND, "momentum"]


@pytest.mark.unit
def test_the_search_code_stops_at_the_in_sample_end_the_holdout_code_does_not(tmp_path):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["AAPL", "MSFT"])
    spec = momentum_spec()
    code = plugin.code(run, spec)
    days = _days(code)
    assert days["MSFT"] == () and max(d for d, _, _ in days["AAPL"]) == 20150630
    assert "late great" not in code and "$AAPL" not in code  # tones only, no text
    june_30 = [row for row in days["AAPL"] if row[0] == 20150630]
    assert june_30[0][1] == 2  # the 20:30 UTC tweet (after the close) is July 1st's
    # The tone is the research swarm's scorer, averaged over the session's items.
    variant = {"variant_id": "i01-v01", "spec": spec.model_dump(mode="json"), "code": code}
    held = plugin.holdout_variant(run, variant)
    assert run.written == {holdout_code_file("i01-v01"): held["code"]}
    later = _days(held["code"])["AAPL"]
    july_1 = [row for row in later if row[0] == 20150701]
    assert july_1 and july_1[0][1] == 3 and max(d for d, _, _ in later) == 20150731
    assert score_headline("$AAPL late great news") > 0


@pytest.mark.unit
def test_no_coverage_proposes_nothing_and_says_so(tmp_path, capsys):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["MSFT"])
    assert plugin.propose(_ctx(run), 3) == []
    err = capsys.readouterr().err
    assert f"{KIND}: no tweet or headline coverage for MSFT" in err and "proposes nothing" in err
    code = plugin.code(run, momentum_spec())  # asked anyway: a flat strategy, no crash
    assert _days(code) == {"MSFT": ()}
    late = _run(tmp_path, ["AAPL"])  # a window after the corpus ends
    late.split = TimeSplit(
        insample_start=date(2017, 1, 3),
        insample_end=date(2017, 12, 29),
        holdout_start=date(2018, 1, 2),
        holdout_end=date(2018, 6, 29),
    )
    late.folds = [SimpleNamespace(warmup_start=date(2017, 1, 3), start=date(2017, 6, 1))]
    assert plugin.propose(_ctx(late), 3) == []
    assert "no tweet or headline coverage for AAPL" in capsys.readouterr().err


@pytest.mark.unit
def test_a_partly_covered_universe_proposes_tweets_only_and_names_the_gaps(tmp_path, capsys):
    plugin = registry().for_kind(KIND)
    run = _run(_alt(tmp_path), ["AAPL", "MSFT"])
    props = plugin.propose(_ctx(run), 4)
    assert len(props) == 4 and all(p.spec.parameters["source"] in (1, 3) for p in props)
    err = capsys.readouterr().err
    assert "tweets: MSFT" in err and "news: AAPL, MSFT" in err and "stay flat" in err
    again = plugin.propose(_ctx(run), 4)  # said once per run
    assert [p.spec for p in again] == [p.spec for p in props]
    assert capsys.readouterr().err == ""


@pytest.mark.unit
def test_without_tweets_or_headlines_the_error_names_the_flag_and_files(tmp_path, shared_data):
    run = _run(tmp_path, ["AAPL"])
    with pytest.raises(UserInputError, match="--alt-data.*stocknet_tweets_2014_2016.csv"):
        registry().for_kind(KIND).code(run, momentum_spec())
    argv = [
        "--directive",
        "alpha in tech",
        "--tickers",
        "AAPL",
        "--data-dir",
        str(shared_data / "ohlcv" / "daily"),
        "--start",
        "2014-01-01",
        "--end",
        "2016-12-31",
        "--offline",
        "--families",
        KIND,
    ]
    config, _ = config_from_args(build_parser().parse_args(argv))  # the corpus: found
    assert KIND in config.families
    empty = tmp_path / "alt"
    empty.mkdir()
    with pytest.raises(
        UserInputError, match=f"--families {KIND}: no tweets or headlines.*--alt-data"
    ):
        config_from_args(build_parser().parse_args([*argv, "--alt-data", str(empty)]))


@pytest.mark.e2e
@pytest.mark.slow
def test_sentiment_momentum_is_proposed_backtested_and_gated(daily_dir, tmp_path):
    argv = [
        "--directive",
        "sentiment momentum in tech",
        "--tickers",
        "AAPL,MSFT",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2013-01-01",
        "--end",
        "2016-12-31",
        "--variants",
        "3",
        "--folds",
        "2",
        "--max-iterations",
        "2",
        "--workers",
        "1",
        "--seed",
        "3",
        "--criteria",
        "sharpe>=0.1,min_trades>=2",
        "--criteria-replace",
        "--offline",
        "--memory-dir",
        "off",
        "--families",
        KIND,
        "--out",
        str(tmp_path),
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    run = prepared.run.root
    split = prepared.context_kwargs["split"]
    end_key = int(split.insample_end.strftime("%Y%m%d"))

    variants = json.loads((run / "variants.json").read_text())
    assert variants and all(v["spec"]["family"] == KIND for v in variants.values())
    traded = 0
    for v in variants.values():
        code = (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert f"class {CLASS_NAME}" in code
        table = _days(code)
        assert set(table) == {"AAPL", "MSFT"} and all(table.values())
        assert max(day for rows in table.values() for day, _, _ in rows) <= end_key
        traded += v["in_sample"]["metrics"]["n_trades"] > 0
    assert traded > 0
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    assert {r["symbol"] for r in records if r["kind"] == "backtest"} == {"AAPL", "MSFT"}
    assert any(r["kind"] == "gate" for r in records)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == len(variants)
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
