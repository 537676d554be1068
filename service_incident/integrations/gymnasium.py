"""A Gymnasium environment over the in-process environment: text observations, actions as JSON strings.

    import gymnasium as gym
    import service_incident.integrations.gymnasium  # registers ServiceIncident-v0

    env = gym.make("ServiceIncident-v0", task_id="gen_easy")
    observation, info = env.reset(seed=7)
    observation, reward, terminated, truncated, info = env.step('{"action": "inspect_logs", "target": "db"}')

The observation is the whole page as text (what `text.page` renders), so a memoryless policy has all it
needs; `info["revealed"]` is what the last action revealed, and `info["observation"]` the typed one.
An action is a JSON object as `parse_action` reads it (the legacy vocabularies included). A
string that is no valid action changes nothing in the world, earns 0 and is reported in
`info["error"]`, but uses a step of the budget: `truncated` is set once the budget's worth of steps
is used up without the episode ending, so invalid actions cannot run forever.

A `reset()` without a seed plays one drawn from the generator `reset(seed=...)` seeded, as
Gymnasium's convention has it; like a seed the server draws, it stays out of `info` until the
episode is over (with it, the public generator gives the incident and its labels). The held-out
tasks need the host's key, passed explicitly: `gym.make(ENV_ID, holdout_key=...)`.
"""

from __future__ import annotations

import hashlib
import string
from typing import Any

import gymnasium
import msgspec
from gymnasium import spaces

from service_incident.environment import MAX_SEED, ServiceIncidentEnvironment
from service_incident.models import InvalidAction, InvalidReset, Observation, ResetRequest, parse_action

from . import text
from .text import TextEpisode

ENV_ID = "ServiceIncident-v0"
# The longest page of a long expert episode is about 20k characters; the bound leaves room for more.
MAX_OBSERVATION_CHARS = 1 << 17
MAX_ACTION_CHARS = 4096
# Text spaces check every character against a charset: observations are kept to printable ASCII.
CHARSET = string.printable


def _ascii(value: str) -> str:
    return value.encode("ascii", "backslashreplace").decode("ascii")


class ServiceIncidentGymEnv(gymnasium.Env[str, str]):
    """Gymnasium's `Env` API over one `ServiceIncidentEnvironment`."""

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 (gymnasium.Env declares it an instance attribute)

    def __init__(
        self,
        task_id: str | None = None,
        incident_id: str | None = None,
        reward_mode: str = "final",
        render_mode: str | None = None,
        holdout_key: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.defaults = {"task_id": task_id, "incident_id": incident_id, "reward_mode": reward_mode}
        self.observation_space = spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self._episode = TextEpisode(ServiceIncidentEnvironment(holdout_key=holdout_key))
        self._steps = 0
        self._seed_drawn = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """`options` may name `task_id`, `incident_id` and `reward_mode` for this episode."""
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(MAX_SEED))
        # Gymnasium has no episode ids; one derived from the seed keeps the info of a reset reproducible
        # (a drawn seed's only as a hash, which does not give the seed back).
        episode_id = f"seed-{seed}" if seed is not None else f"episode-{_digest(episode_seed)}"
        try:
            fields = {**self.defaults, **(options or {}), "seed": episode_seed, "episode_id": episode_id}
            request = msgspec.convert(fields, ResetRequest)
            page = self._episode.reset(**msgspec.structs.asdict(request))
        except (msgspec.ValidationError, InvalidReset) as exc:
            raise ValueError(f"invalid reset options: {exc}") from None
        self._steps = 0
        self._seed_drawn = seed is None
        return self._page(), self._info(page)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._episode.observation is None:
            raise RuntimeError("call reset before step")
        self._steps += 1
        try:
            revealed, error = self._episode.step(parse_action(action)), None
        except InvalidAction as exc:
            revealed, error = "", str(exc)
        observation = self._episode.observation
        reward = float(observation.reward or 0.0) if error is None else 0.0
        truncated = not observation.done and self._steps >= observation.max_steps
        info = self._info(revealed, error or observation.last_action_error)
        return self._page(), reward, observation.done, truncated, info

    def render(self) -> str | None:
        return self._page() if self.render_mode == "ansi" and self._episode.observation is not None else None

    def close(self) -> None:
        self._episode.env.close()
        self._episode.observation = None

    def _page(self) -> str:
        observation = self._episode.observation
        assert observation is not None
        return _ascii(text.page(observation))[:MAX_OBSERVATION_CHARS]

    def _info(self, revealed: str, error: str | None = None) -> dict[str, Any]:
        observation = self._episode.observation
        assert observation is not None
        return {
            "revealed": revealed,
            "error": error,
            "observation": self._shown(observation),
            "score": observation.score,
        }

    def _shown(self, observation: Observation) -> Observation:
        """The observation as `info` carries it: a seed drawn here is withheld until the episode is over."""
        if not self._seed_drawn or observation.done:
            return observation
        metadata = {key: value for key, value in observation.metadata.items() if key != "seed"}
        return msgspec.structs.replace(observation, metadata=metadata)


def _digest(seed: int) -> str:
    return hashlib.sha256(str(seed).encode()).hexdigest()[:16]


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:ServiceIncidentGymEnv")
