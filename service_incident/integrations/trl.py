"""TRL's `GRPOTrainer(environment_factory=...)`: the environment as a class whose public methods are its tools.

    from service_incident.integrations.trl import ServiceIncidentToolEnv
    trainer = GRPOTrainer(model=..., train_dataset=rows, environment_factory=ServiceIncidentToolEnv)

TRL makes one instance per rollout, calls `reset(**row)` with a dataset row (see `prompts`) and
appends the text it returns, the pager, to the row's prompt; the model then calls the tools, one
method per action, whose schemas TRL reads from their type hints and Google-style docstrings. Each
tool returns what its action revealed. TRL calls `get_reward` once the rollout is over. Nothing here
imports TRL or torch: the class is plain Python.

The held-out tasks need the host's key, passed explicitly (it is never read from the environment):
`environment_factory=functools.partial(ServiceIncidentToolEnv, holdout_key=key)`.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Observation, RewardMode, parse_action
from service_incident.tasks import HELD_OUT, TASKS, find_task

from . import text
from .prompts import GENERATED_TASKS, instructions
from .tools import ACTION_TOOLS, ToolSpec, argument_fields

_draw = random.SystemRandom()
_RETURNS = "What the action revealed: its outcome, new telemetry, the step count, and the score once the episode ends."


class IncidentToolEnv:
    """One rollout's episode. Subclasses add one public method per action (see `tool_env_class`).

    Every other public method would become a tool too, so the helpers here are private.
    """

    reward_mode: RewardMode = "final"

    def __init__(self, holdout_key: str | None = None) -> None:
        """`holdout_key` offers the held-out tasks (see `ServiceIncidentEnvironment`)."""
        self._episode = text.TextEpisode(ServiceIncidentEnvironment(holdout_key=holdout_key))
        self._held_out = holdout_key is not None
        self._mode = self.reward_mode

    @property
    def observation(self) -> Observation | None:
        """The latest observation, for reward functions and scripted checks."""
        return self._episode.observation

    def reset(
        self,
        task_id: str | None = None,
        seed: int | None = None,
        incident_id: str | None = None,
        reward_mode: RewardMode | None = None,
        **row: Any,
    ) -> str:
        """Start the episode a dataset row names; returns the pager text TRL appends to the prompt.

        A row without a prompt (TRL without a dataset) gets the instructions first, and a row
        without a task plays a generated training incident drawn at random.
        """
        if task_id is None and incident_id is None:
            task_id = _draw.choice(GENERATED_TASKS)
        self._mode = reward_mode or self.reward_mode
        page = self._episode.reset(task_id=task_id, seed=seed, incident_id=incident_id, reward_mode=self._mode)
        if "prompt" in row:
            return page
        assert self._episode.observation is not None
        task = find_task(self._episode.observation.task_id, held_out=self._held_out)
        assert task is not None
        return instructions(task) + page

    def get_reward(self) -> float:
        """The episode's score once it is over (0 for a rollout that never ended it); in dense mode
        the return, the sum of every step's reward."""
        observation = self.observation
        if observation is None:
            return 0.0
        if self._mode == "dense":
            return float(observation.metadata.get("cumulative_reward", 0.0))
        return float(observation.score) if observation.done and observation.score is not None else 0.0

    def _act(self, name: str, arguments: dict[str, Any]) -> str:
        """Raises ValueError (InvalidAction included), which TRL hands back to the model as the tool's
        error: after the episode's end that error is the signal to stop calling tools."""
        if self.observation is not None and self.observation.done:
            raise ValueError("the episode is over: stop calling tools")
        return self._episode.step(parse_action({**arguments, "action": name}))


def _docstring(spec: ToolSpec) -> str:
    properties = spec.input_schema["properties"]
    # An argument without a description fails TRL's schema build; a test keeps every one described.
    args = "\n".join(f"    {name}: {prop.get('description', '')}" for name, prop in properties.items())
    return f"{spec.description}\n\nArgs:\n{args}\n\nReturns:\n    {_RETURNS}\n"


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    fields = argument_fields(spec)
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for field in fields:
        if field.required:
            default = inspect.Parameter.empty
        else:
            default = field.default if field.default_factory is msgspec.NODEFAULT else field.default_factory()
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters.append(inspect.Parameter(field.name, kind, default=default, annotation=field.type))
    signature = inspect.Signature(parameters, return_annotation=str)
    name = spec.name

    def tool(self: IncidentToolEnv, *args: Any, **kwargs: Any) -> str:
        bound = signature.bind(self, *args, **kwargs)
        # Only what the caller gave: the action type supplies its own defaults.
        return self._act(name, {k: v for k, v in bound.arguments.items() if k != "self"})

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = _docstring(spec)
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {field.name: field.type for field in fields} | {"return": str}
    return tool


def tool_env_class(actions: Iterable[str], name: str = "IncidentTools") -> type[IncidentToolEnv]:
    """A class with one tool method per named action, in the registry's order."""
    wanted = set(actions)
    namespace: dict[str, Any] = {spec.name: _tool_method(spec) for spec in ACTION_TOOLS if spec.name in wanted}
    namespace["__module__"] = __name__
    namespace["__doc__"] = f"Service Incident for TRL, with the tools {', '.join(namespace)}."
    return type(name, (IncidentToolEnv,), namespace)


@cache
def for_tasks(*task_ids: str) -> type[IncidentToolEnv]:
    """The class whose tools are the actions these tasks allow, and no others (held-out tasks included:
    their actions are public; playing them takes the key)."""
    tasks = [find_task(task_id, held_out=True) for task_id in task_ids]
    unknown = [task_id for task_id, task in zip(task_ids, tasks, strict=True) if task is None]
    if unknown:
        raise ValueError(f"unknown task {unknown[0]!r}; tasks are: {', '.join([*TASKS, *HELD_OUT])}")
    return tool_env_class({action for task in tasks if task for action in task.actions}, "IncidentTools")


# The generated tasks' tools: the default training distribution. Defined at module level so that
# TRL's asynchronous trainer can pickle the factory by reference.
ServiceIncidentToolEnv = tool_env_class(
    {action for task_id in GENERATED_TASKS for action in TASKS[task_id].actions}, "ServiceIncidentToolEnv"
)


def episode_reward(environments: Sequence[IncidentToolEnv], **kwargs: Any) -> list[float]:
    """A `reward_funcs` entry over the rollouts' environments, for TRL versions without `get_reward`."""
    return [environment.get_reward() for environment in environments]
