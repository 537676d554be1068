"""Observations as text for a language model: the whole page at reset, then only what each action revealed.

Every view is headed by its service and the minute it was taken (`db (as of 14:03):`), so a view
read steps ago never passes for the present.

A tool-calling model keeps the conversation, so repeating the cumulative observation every turn (several
KB by the end of a long episode) spends its context on what it has already read. Both renderings walk
the Observation's fields generically: a new view or field shows up without an edit here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import VIEW_FIELD_PREFIX, Action, Alert, Observation

# Bookkeeping the model does not need to read: the reward travels beside the text, the history is
# the conversation itself, and the score appears once, at the end.
_UNSHOWN = frozenset(
    {
        "metadata",
        "reward",
        "done",
        "score",
        "breakdown",
        "action_history",
        "available_actions",
        "terminal_actions",
        "step_count",
        "max_steps",
        "message",
        "last_action_error",
        # Shown with each view instead (`_stamped`).
        "as_of",
    }
)
_FIELDS = tuple(name for name in Observation.__struct_fields__ if name not in _UNSHOWN)
# After reset, the pager's news is an alert that appears, changes level or clears; a value drifting
# is not (the metrics show it when asked), nor the title, which follows the top alert's value.
_ALERTS = "alerts"
_NOT_NEWS = frozenset({"title"})


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def _entry(key: str, value: Any) -> list[str]:
    text = _scalar(value)
    if "\n" not in text:
        return [f"  {key}: {text}"]
    return [f"  {key}:", *(f"    {line}" for line in text.splitlines())]


def _field(name: str, value: Any, before: Any = None) -> list[str]:
    """Lines for one field; with `before`, a mapping shows only its new or changed entries."""
    if isinstance(value, dict):
        changed = {k: v for k, v in value.items() if not isinstance(before, dict) or before.get(k) != v}
        if not changed:
            return []
        return [f"{name}:", *(line for key, item in changed.items() for line in _entry(key, item))]
    if isinstance(value, list):
        if value and all(isinstance(item, str) for item in value):
            return [f"{name}: {', '.join(value)}"]
        return [f"{name}:", *(f"  - {_scalar(item)}" for item in value)] if value else []
    return [f"{name}: {_scalar(value)}"]


def _status(observation: Observation) -> list[str]:
    lines = [f"step {observation.step_count}/{observation.max_steps}"]
    if observation.last_action_error is not None:
        lines.insert(0, f"error: {observation.last_action_error}")
    if observation.done:
        lines.append(f"episode over: score {_scalar(observation.score)}")
        if observation.breakdown:
            lines.extend(_field("breakdown", observation.breakdown))
    return lines


def _stamped(observation: Observation, name: str) -> Any:
    """A field's value; a view's entries keyed by service and the minute the view was taken."""
    value = getattr(observation, name)
    if not name.startswith(VIEW_FIELD_PREFIX):
        return value
    return {f"{service} (as of {observation.taken(name, service)})": view for service, view in value.items()}


def page(observation: Observation) -> str:
    """Everything an observation shows, for the first message of an episode."""
    lines = [observation.message]
    for name in _FIELDS:
        value = _stamped(observation, name)
        if value not in (None, "", [], {}):
            lines.extend(_field(name, value))
    return "\n".join([*lines, *_status(observation)])


def _alert_news(before: list[Alert], after: list[Alert]) -> list[Alert]:
    seen = {(alert.service, alert.signal): (alert.level, alert.status) for alert in before}
    return [alert for alert in after if seen.get((alert.service, alert.signal)) != (alert.level, alert.status)]


def revealed(before: Observation, after: Observation) -> str:
    """What changed from one observation to the next: the outcome of the action in between."""
    lines = [after.message]
    for name in _FIELDS:
        # A view taken again shows, under its new minute, even where it reads as it did.
        value, previous = _stamped(after, name), _stamped(before, name)
        if name == _ALERTS:
            lines.extend(_field("alerts that changed", news) if (news := _alert_news(previous, value)) else [])
        elif name not in _NOT_NEWS and value != previous and value not in (None, "", [], {}):
            lines.extend(_field(name, value, previous))
    return "\n".join([*lines, *_status(after)])


class TextEpisode:
    """An environment whose steps read as text: the page after reset, then what each action revealed."""

    def __init__(self, env: ServiceIncidentEnvironment | None = None) -> None:
        self.env = env or ServiceIncidentEnvironment()
        self.observation: Observation | None = None

    def reset(self, **request: Any) -> str:
        """`request` as `ServiceIncidentEnvironment.reset` takes it (InvalidReset propagates)."""
        self.observation = self.env.reset(**request)
        return page(self.observation)

    def step(self, action: Action) -> str:
        before, self.observation = self.observation, self.env.step(action)
        return page(self.observation) if before is None else revealed(before, self.observation)
