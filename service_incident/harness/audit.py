"""The oracle audit: no text an agent reads before the postmortem may judge what it shows.

`JUDGMENT` matches the words by which an environment would tell the agent what to think of a view
(abnormal, healthy, suspicious, the root cause, which upstreams are to blame) rather than showing
it, and a text that is nothing but a status verdict (a dashboard saying `down`). `judged`
searches every string of an observation — message, diagnostic, dashboard, pages, views, action
history, errors, metadata, and the keys of its maps — except the postmortem, the one channel
allowed to judge, once the episode is over. `audit` plays episodes and reports every match, and
every intermediate reward that is not 0 in final-reward mode.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from ..environment import ServiceIncidentEnvironment
from ..models import Observation
from .agents import Agent

# Matched from the start of a word, case-insensitively, so that stems cover their forms ("anomal":
# anomaly, anomalous) while the Kubernetes event reason `Unhealthy` and the event type `Normal`,
# which are what the cluster reports and not a verdict of the environment's, pass.
JUDGMENT_WORDS = (
    "abnormal",
    "anomal",
    "healthy",
    "is unhealthy",
    "looks unhealthy",
    "unhealthy service",
    "degraded",
    "suspicious",
    "suspect",
    "root cause",
    "culprit",
    "likely",
    "unlikely",
    "probably",
    "upstreams named",
    "to blame",
    "looks fine",
    "looks ok",
    "looks good",
    "nothing wrong",
    "something wrong",
    "is the problem",
    "red herring",
    "misleading",
    "distractor",
    "wasted",
    "changed nothing",
    "you should",
)
# A whole text that is one of these is a verdict on a service, as a status page of badges shows it.
STATUS_WORDS = ("ok", "up", "down", "unhealthy", "failing", "broken", "fine", "good", "bad")
JUDGMENT = re.compile(
    r"\b(?:"
    + "|".join(re.escape(word) for word in JUDGMENT_WORDS)
    + r")"
    + r"|^\W*(?:"
    + "|".join(re.escape(word) for word in STATUS_WORDS)
    + r")\W*$",
    re.IGNORECASE,
)
# Characters of context either side of a match in what `judged` reports.
_CONTEXT = 60


def texts(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a value of the schema (the keys of its maps included), with where it lies."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            yield from texts(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from texts(key, path)
            yield from texts(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from texts(item, f"{path}[{index}]")


def judged(observation: Observation) -> list[str]:
    """Where an observation's text judges, as `field: …excerpt…`; the postmortem is not searched."""
    found = []
    for path, text in texts(msgspec.structs.replace(observation, postmortem=None)):
        match = JUDGMENT.search(text)
        if match:
            found.append(f"{path}: {text[max(0, match.start() - _CONTEXT) : match.end() + _CONTEXT]}")
    return found


def audit(episodes: Iterable[tuple[str, int]], make_agent: Callable[[int], Agent]) -> tuple[int, list[str], int]:
    """Play (task, seed) episodes in final-reward mode: (steps, judging texts found, non-zero
    intermediate rewards)."""
    steps, found, paid = 0, [], 0
    for task_id, seed in episodes:
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id=task_id, seed=seed, reward_mode="final")
        agent = make_agent(seed)
        found += judged(obs)
        while not obs.done:
            obs = env.step(agent.act(obs))
            steps += 1
            found += judged(obs)
            paid += not obs.done and obs.reward != 0.0
    return steps, found, paid
