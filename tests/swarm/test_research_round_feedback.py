"""A RESEARCH round in a real run: the research record shows what this run's gate found."""

from __future__ import annotations

import json

import pytest
from lab_runs import reference_args, shared_run

from experiments.tracker import read_records
from swarm.research.feedback import rerank, run_outcomes

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_research_round_reorders_families_by_this_runs_verdicts(tmp_path_factory, daily_dir):
    run_dir, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    records = list(read_records(run_dir / "experiments.jsonl"))
    gates = [r["decision"] for r in records if r.get("kind") == "gate"]
    routes = [g["decision"] for g in gates]
    assert "RESEARCH" in routes, routes  # the reference run goes back to research once
    # The last research round ran after the gate decisions before the first RESEARCH route.
    before = gates[: routes.index("RESEARCH") + 1]
    synthesis = json.loads((run_dir / "research" / "synthesis.json").read_text())
    assert synthesis["run_feedback"], synthesis
    tracks = run_outcomes(before)
    assert set(tracks) <= set(synthesis["recommended_families"]) | {"volatility"}
    tried = [f for f in synthesis["recommended_families"] if f in tracks]
    # closest to passing first: passes, then the best's graded progress, then its fuzzy score
    keys = [(tracks[f].n_passed, tracks[f].best_progress, tracks[f].best_score) for f in tried]
    assert keys == sorted(keys, reverse=True)
    md = (run_dir / "research" / "research.md").read_text()
    assert "## This run's gate so far" in md
    assert rerank([], tracks) == ([], [])


def test_research_round_starts_from_revised_parameters(tmp_path_factory, daily_dir):
    run_dir, _ = shared_run(tmp_path_factory, "reference", reference_args(daily_dir))
    brief = json.loads((run_dir / "research" / "data_brief.json").read_text())
    suggested = brief["suggested"]
    assert "revised in round 2, after the gate" in suggested["reasoning"], suggested
    assert "revised in round 2" in (run_dir / "research" / "data_brief.md").read_text()
    # The RESEARCH iteration's fresh ideas are seeded with the revised lookback.
    variants = json.loads((run_dir / "variants.json").read_text())  # by variant id
    research = [v for v in variants.values() if v["route"] == "RESEARCH"]
    assert research, [v["route"] for v in variants.values()]
    from strategies.families import LOOKBACK_PARAM

    seeded = [
        v["spec"]["parameters"].get(LOOKBACK_PARAM.get(v["spec"]["entry"], ""))
        for v in research
        if LOOKBACK_PARAM.get(v["spec"]["entry"]) in v["spec"]["parameters"]
    ]
    assert suggested["lookback"] in seeded, (suggested["lookback"], seeded)
