"""The report as a pure function of episode records: intervals only where the sample allows one,
failures that are not the agent's counted apart, score parts, and replay links that open the right
episode."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness import report
from service_incident.harness.records import EpisodeRecord, Failure


def record(
    name: str,
    score: float,
    *,
    agent: str = "a",
    task: str = "easy",
    failure: Failure | None = None,
    breakdown: dict[str, float] | None = None,
    replayable: bool = True,
    prompt_tokens: int = 0,
) -> EpisodeRecord:
    reset = ServiceIncidentEnvironment().reset(task_id="easy", seed=1) if replayable else None
    return EpisodeRecord(
        name=name,
        task=task,
        incident=name,
        seed=1,
        agent=agent,
        score=score,
        success=score >= 0.5,
        graded=failure is None,
        breakdown=breakdown,
        failure=failure,
        error=None if failure is None else f"{failure} went wrong",
        reset=reset,
        prompt_tokens=prompt_tokens,
    )


def links(text: str) -> dict[str, dict[str, list[str]]]:
    """The report's replay links: label -> query."""
    found = {}
    for line in text.split("## Replay")[1].splitlines():
        if line.startswith("- ["):
            label, rest = line[3:].split("](", 1)
            url = rest.split(")", 1)[0]
            assert url.startswith("/web/?") and "://" not in url  # relative to the server that serves them
            found[label] = parse_qs(urlsplit(url).query)
    return found


def test_confidence_intervals_use_student_t_and_only_where_the_sample_allows() -> None:
    assert report.t975(1) == pytest.approx(12.706)
    assert report.t975(4) == pytest.approx(2.776, abs=1e-3)
    assert report.t975(30) == pytest.approx(2.042, abs=1e-3)
    few = report.summarize([record(str(i), s) for i, s in enumerate((0.01, 0.95))])
    assert few.ci is None and few.cell == "0.480"
    scores = [0.2, 0.4, 0.6] * 3 + [0.4]
    enough = report.summarize([record(str(i), s) for i, s in enumerate(scores)])
    assert enough.n == report.MIN_INTERVAL_N == 10
    assert enough.ci == pytest.approx(report.t975(9) * 0.1633 / 10**0.5, rel=1e-3)
    assert enough.cell == f"0.400 ± {enough.ci:.3f}"
    [gap] = report.gaps({"few": few, "enough": enough})
    assert not gap.clear and "too few episodes to tell" in gap.verdict
    text = report.markdown([record(str(i), s) for i, s in enumerate((0.01, 0.95))])
    assert "| a | 2 | 0.480 | " in text and "shown only for 10 episodes or more" in text
    assert "(no interval: n < 10)" in report.summary_text([record("x", 0.5)])


def test_failures_that_are_not_the_agents_stay_out_of_its_mean_and_are_listed() -> None:
    records = [
        record("e1", 0.9),
        record("e2", 0.5),
        record("e3", 0.01, failure="agent"),
        record("e4", 0.01, failure="environment", replayable=False),
        record("e5", 0.01, failure="model"),
        record("e6", 0.01, failure="model"),
    ]
    summary = report.summarize(records)
    assert (summary.n, summary.failed, summary.apart) == (3, 1, {"environment": 1, "model": 2})
    assert summary.mean == pytest.approx((0.9 + 0.5 + 0.01) / 3)
    text = report.markdown(records)
    assert "| a | 3 | 0.470 | 67% |" in text and "| 1 | 1 environment, 2 model |" in text
    not_counted = text.split("## Not counted")[1].split("##")[0]
    assert "- a, environment: 1 episode(s): environment went wrong" in not_counted
    assert "- a, model: 2 episode(s): model went wrong" in not_counted
    assert "not counted: 1 environment, 2 model" in report.summary_text(records)
    assert "## Not counted" not in report.markdown(records[:3])


def test_mean_score_by_part_per_agent_and_suite() -> None:
    records = [
        record("t1", 0.8, breakdown={"root_cause": 0.5, "severity": 0.2}),
        record("t2", 0.6, breakdown={"root_cause": 0.3, "severity": 0.0}),
        record("r1", 0.7, task="rca_01", breakdown={"root_cause": 0.4, "remediation": 0.2}),
        record("x", 0.01, failure="environment"),
        record("t1", 0.2, agent="b", breakdown={"root_cause": 0.0, "severity": 0.1}),
    ]
    parts = report.markdown(records).split("## Score parts")[1].split("##")[0]
    assert "| agent | suite | graded | root_cause | severity | remediation |" in parts
    assert "| a | triage | 2 | 0.400 | 0.100 | - |" in parts
    assert "| a | rca | 1 | 0.400 | - | 0.200 |" in parts
    assert "| b | triage | 1 | 0.000 | 0.100 | - |" in parts


def test_replay_links_open_each_agents_own_episode() -> None:
    # Two agents played the same incidents; an episode without observations is not replayable and
    # the page does not number it.
    records = [
        record("easy/1", 0.3, agent="random"),
        record("easy/2", 0.9, agent="random", failure="environment", replayable=False),
        record("easy/2", 0.2, agent="random"),
        record("easy/1", 0.8, agent="expert"),
        record("easy/2", 0.7, agent="expert"),
        record("easy/3", 0.9, agent="expert"),
    ]
    found = links(report.markdown(records, episodes_file="run.jsonl"))
    assert found == {
        "random · easy/2": {"replay": ["/results/run.jsonl"], "episode": ["1"]},
        "random · easy/1": {"replay": ["/results/run.jsonl"], "episode": ["0"]},
        "expert · easy/2": {"replay": ["/results/run.jsonl"], "episode": ["3"]},
        "expert · easy/1": {"replay": ["/results/run.jsonl"], "episode": ["2"]},
        "expert · easy/3": {"replay": ["/results/run.jsonl"], "episode": ["easy/3"]},  # its name is unique
    }
    replayable = [r for r in records if r.reset is not None]
    for label, query in found.items():
        agent, name = label.split(" · ")
        key = query["episode"][0]
        opened = replayable[int(key)] if key.isdigit() else next(r for r in replayable if r.name == key)
        assert (opened.agent, opened.name) == (agent, name)


def test_prompt_tokens_per_episode() -> None:
    records = [record("1", 0.5, prompt_tokens=1200), record("2", 0.5, prompt_tokens=1800)]
    assert report.summarize(records).prompt_tokens == 1500
    assert "| a | 2 | 0.500 | 100% | 0.0 | 1500 |" in report.markdown(records)
