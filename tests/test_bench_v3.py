"""The world's fairness instruments (bench/bench_world.py) run on a few incidents and measure what they
say: the oracle is a ceiling, herring harm is read from worlds without faults, the fitted players
answer with services of the incident."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_world
import outsider
from bench_measure import play

from service_incident import dataset
from service_incident.harness.agents import ExpertAgent


def test_the_oracle_scores_at_least_what_the_expert_scores(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.oracle_section(evaluation=3)
    out = capsys.readouterr().out
    assert "| tier | episodes | oracle score | oracle steps (mean) | expert score |" in out
    for tier, (best, expert) in results.items():
        assert len(best) == len(expert) == 3, tier
        assert all(b >= e for b, e in zip(best, expert, strict=True)), (tier, best, expert)
    case = bench_world.evaluation_cases("hard", 1)[0]
    last = bench_world.oracle(case)
    assert bench_world.declared(last) == case.roots
    # A root's fix applied and its fault seen: the only parts left are the steps taken.
    assert last.postmortem is not None and all(r.seen and r.fixed for r in last.postmortem.root_causes)
    assert last.step_count <= 2 * len(case.roots) + 1


def test_herring_harm_is_read_from_a_world_without_faults(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.harm_section(3)
    out = capsys.readouterr().out
    assert "| tier | graded user impact | critical page | warning not chronic | any of them" in out
    assert "| tier | kind | herrings |" in out
    assert all(0.0 <= v <= 1.0 for shares in results.values() for v in shares.values())
    incident = dataset.training_incident("expert", 2)
    calm = bench_world.without_faults(incident)
    assert calm.faults == [] and calm.distractions == incident.distractions
    steps = 6
    # The instrument can tell harm: the incident itself pages (every generated incident does); the same
    # world with neither faults nor herrings harms nobody.
    assert bench_world.harm(incident, 2, steps).any
    assert not bench_world.harm(bench_world.without_faults(incident, []), 2, steps).any


def test_the_pager_ranker_declares_services_of_the_incident(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.pager_section(train=8, holdout=2, evaluation=3)
    out = capsys.readouterr().out
    assert "| gradient-boosted exact roots | logistic (bench_measure) exact roots | rule: first paged on" in out
    assert set(results) == {"gen_easy", "gen_medium", "gen_hard", "gen_expert", "holdout_hard", "holdout_expert"}
    assert all(0.0 <= rate <= 1.0 for rates in results.values() for rate in rates)


def test_the_pagers_rule_of_thumb_names_the_first_paged_on_each_path() -> None:
    obs = bench_world.first_observation("gen_hard", 1)
    named = outsider.first_on_their_paths(obs)
    depends = {card.name: set(card.depends_on) for card in obs.topology}
    fresh = {a.service for a in obs.alerts if not outsider._minutes_before(obs, obs.clock, a.since) >= 60}
    assert named and named <= fresh
    # What it leaves out that was paged has something below it paged no later: the entry points here.
    callers = {dep for deps in depends.values() for dep in deps}
    assert {s for s in fresh - named if s not in callers} and all(depends[s] for s in fresh - named)


def test_the_outsider_plays_whole_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.outsider_section(train=6, holdout=1, evaluation=2)
    out = capsys.readouterr().out
    assert "| group | episodes | outsider score | outsider exact roots | expert score | expert exact roots |" in out
    for group, parts in results.items():
        assert all(0.01 <= s <= 0.99 for s in parts["outsider"] + parts["expert"]), group
        assert set(parts["outsider exact"]) <= {0.0, 1.0}
    # The expert's column is the expert's own play.
    case = bench_world.evaluation_cases("medium", 1)[0]
    env, obs = case.reset()
    assert results["gen_medium"]["expert"][0] == play(ExpertAgent(), env, obs).score


def test_log_templates_mask_ids_and_numbers_but_keep_status_codes() -> None:
    line = "2026-10-07T07:54:00Z auth-a13fc9-7795b auth-api[9053]: ERROR req=ab12cd34 status=503 upstream=db rt=41ms"
    assert outsider.template(line, ["auth", "db"]) == "ERROR req=# status=503 upstream=<svc> rt=#ms"


def test_feature_ratios_count_root_and_other_services(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.ratios_section(2)
    out = capsys.readouterr().out
    assert "| fact | roots | others | ratio | above 3 or below 1/3 |" in out
    for tier, tally in results.items():
        services = sum(len(dataset.training_incident(tier, seed).services) for seed in range(2))
        assert tally.roots + tally.others == services
        for name, (on_roots, on_others) in tally.shown.items():
            assert on_roots <= tally.roots and on_others <= tally.others, name
            ratio = tally.ratio(name)
            assert (
                math.isinf(ratio)
                if on_others == 0
                else ratio == pytest.approx(on_roots / tally.roots / (on_others / tally.others))
            )


def test_weak_root_margins_are_one_per_root(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.weak_section(2)
    out = capsys.readouterr().out
    assert "| tier | roots | margin q5 |" in out
    for tier, margins in results.items():
        assert len(margins) == sum(len(dataset.training_incident(tier, s).faults) for s in range(2))
    incident = dataset.training_incident("hard", 0)
    assert len(bench_world.margins(incident, 0)) == len({f.service for f in incident.faults})


@pytest.mark.slow
def test_the_ladder_puts_every_player_on_the_same_incidents(capsys: pytest.CaptureFixture[str]) -> None:
    results = bench_world.ladder_section(train=8, holdout=1, evaluation=2)
    out = capsys.readouterr().out
    assert "| group | episodes | random | symptom_chaser | structured | expert | fitted | outsider | oracle |" in out
    assert set(results) == {"gen_easy", "gen_medium", "gen_hard", "gen_expert", "holdout_hard", "holdout_expert"}
    for group, scores in results.items():
        assert {len(v) for v in scores.values()} == {1 if group.startswith("holdout") else 2}, group
        # The oracle knows the answers: no player beats it on an incident.
        assert all(o >= max(s[i] for s in scores.values()) for i, o in enumerate(scores["oracle"])), group
