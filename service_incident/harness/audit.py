"""The oracle audit: no message or diagnostic an agent reads may judge what it shows.

`JUDGMENT` matches the words by which an environment would tell the agent what to think of a view
(abnormal, healthy, suspicious, the root cause, which upstreams are to blame) rather than showing
it. `audit` plays episodes and reports every message and diagnostic that matches, and every
intermediate reward that is not 0 in final-reward mode.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..environment import ServiceIncidentEnvironment
from ..models import Observation
from .agents import Agent

JUDGMENT_WORDS = (
    "abnormal", "anomal", "healthy", "unhealthy service", "suspicious", "suspect", "root cause", "culprit",
    "likely", "probably", "upstreams named", "to blame", "looks fine", "looks ok", "looks good", "nothing wrong",
    "something wrong", "is the problem", "red herring", "you should",
)
JUDGMENT = re.compile("|".join(re.escape(word) for word in JUDGMENT_WORDS), re.IGNORECASE)


def judged(observation: Observation) -> list[str]:
    """The message and diagnostic of an observation, where they judge."""
    texts = [observation.message, observation.last_diagnostic or ""]
    if observation.done:
        # The episode's last message reports the score; the postmortem is the judging channel then.
        texts = [observation.last_diagnostic or ""]
    return [text for text in texts if JUDGMENT.search(text)]


def audit(
    episodes: Iterable[tuple[str, int]], make_agent: Callable[[int], Agent]
) -> tuple[int, list[str], int]:
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
