"""The HTTP routes: OpenEnv's simulation endpoints (stateful here), discovery endpoints, MCP and tasks."""

from __future__ import annotations

import importlib.metadata
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import (
    Action,
    InvalidAction,
    InvalidReset,
    Observation,
    ResetRequest,
    parse_action,
    schemas,
)
from service_incident.tasks import catalogue

from .http_episodes import EpisodeStore, UnknownEpisode
from .protocol import ErrorDetail, ProtocolError, encode, http_step_payload, invalid
from .sessions import SessionRegistry

EPISODE_HEADER = "Episode-Id"
JSON = "application/json"


class StepOptions(Struct, kw_only=True, forbid_unknown_fields=True):
    """Keys a step request may carry beside the action. OpenEnv's `timeout_s` and `request_id` are
    accepted for compatibility and have no effect: a step never waits on anything."""

    episode_id: str | None = None
    timeout_s: Annotated[float, Meta(gt=0)] | None = None
    request_id: Annotated[str, Meta(max_length=255)] | None = None


class StepRequest(StepOptions, kw_only=True):
    """OpenEnv's wrapped form; the flat form puts the action's own keys at the top level instead."""

    action: Action


class ValidationFailure(Struct):
    detail: list[ErrorDetail]


class Failure(Struct):
    detail: str


class Grade(Struct):
    episode_id: str | None
    done: bool
    score: float | None
    breakdown: dict[str, float] | None


class Health(Struct):
    active_sessions: int
    max_sessions: int
    http_episodes: int
    status: str = "healthy"


class EnvironmentMetadata(Struct):
    name: str
    description: str
    version: str | None = None
    readme_content: str | None = None
    author: str | None = None
    documentation_url: str | None = None


def environment_metadata() -> EnvironmentMetadata:
    dist = importlib.metadata.metadata("openenv-service-incident")
    return EnvironmentMetadata("service_incident", dist["Summary"], version=dist["Version"])


def _json(body: Any, status: int = 200, episode_id: str | None = None) -> Response:
    headers = {EPISODE_HEADER: episode_id} if episode_id else None
    return Response(encode(body), status, headers, media_type=JSON)


_STEP_OPTIONS = frozenset(StepOptions.__struct_fields__)


def parse_step(body: bytes) -> tuple[Action, StepOptions]:
    """Both OpenEnv's `{"action": {...}}` and the flat `{"action": "inspect_logs", "target": "db"}`."""
    try:
        fields = msgspec.json.decode(body or b"null", type=dict[str, Any])
    except msgspec.ValidationError as exc:
        raise invalid("Invalid body", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise invalid("Invalid JSON", str(exc)) from None
    try:
        options = msgspec.convert({k: fields.pop(k) for k in _STEP_OPTIONS & fields.keys()}, StepOptions)
    except msgspec.ValidationError as exc:
        raise invalid("Invalid body", str(exc)) from None
    wrapped = fields.get("action")
    if isinstance(wrapped, dict):
        if len(fields) > 1:
            extra = ", ".join(sorted(k for k in fields if k != "action"))
            raise invalid("Invalid body", f"Object contains unknown field `{extra}`")
        fields = wrapped
    try:
        return parse_action(fields), options
    except InvalidAction as exc:
        raise invalid("Invalid action", str(exc)) from None


class HttpApi:
    def __init__(self, episodes: EpisodeStore, sessions: SessionRegistry) -> None:
        self.episodes = episodes
        self.sessions = sessions
        self._metadata = encode(environment_metadata())
        self._schema = encode({**schemas(), "reset_observation": msgspec.json.schema(Observation)})
        self._tasks = encode(catalogue())

    def routes(self) -> list[Route]:
        return [
            Route("/reset", self.reset, methods=["POST"]),
            Route("/step", self.step, methods=["POST"]),
            Route("/state", self.state, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/metadata", self.metadata, methods=["GET"]),
            Route("/schema", self.schema, methods=["GET"]),
            Route("/tasks", self.tasks, methods=["GET"]),
            Route("/grade", self.grade, methods=["GET"]),
        ]

    async def reset(self, request: Request) -> Response:
        body = await request.body()
        try:
            try:
                reset = msgspec.json.decode(body, type=ResetRequest) if body.strip() else ResetRequest()
            except msgspec.ValidationError as exc:
                raise invalid("Invalid reset", str(exc)) from None
            except msgspec.DecodeError as exc:
                raise invalid("Invalid JSON", str(exc)) from None
            try:
                episode_id, observation = self.episodes.reset(reset)
            except InvalidReset as exc:
                raise invalid("Invalid reset", str(exc)) from None
        except ProtocolError as error:
            return _unprocessable(error)
        return self._observation(episode_id, observation)

    async def step(self, request: Request) -> Response:
        try:
            action, options = parse_step(await request.body())
        except ProtocolError as error:
            return _unprocessable(error)
        try:
            episode_id, env = self.episodes.get(options.episode_id or request.headers.get(EPISODE_HEADER))
        except UnknownEpisode as exc:
            return _json(Failure(str(exc)), 404)
        return self._observation(episode_id, env.step(action))

    async def state(self, request: Request) -> Response:
        try:
            episode_id, env = self._named(request)
        except UnknownEpisode as exc:
            return _json(Failure(str(exc)), 404)
        return _json(env.state, episode_id=episode_id)

    async def grade(self, request: Request) -> Response:
        """The episode's score and breakdown: null until it has ended, so it is no scoring oracle."""
        try:
            episode_id, env = self._named(request)
        except UnknownEpisode as exc:
            return _json(Failure(str(exc)), 404)
        score, breakdown = env.grade()
        return _json(Grade(episode_id=episode_id, done=env.state.done, score=score, breakdown=breakdown))

    def _named(self, request: Request) -> tuple[str | None, ServiceIncidentEnvironment]:
        """The episode a GET names (query or header), else the most recent one."""
        return self.episodes.get(request.query_params.get("episode_id") or request.headers.get(EPISODE_HEADER))

    async def health(self, request: Request) -> Response:
        sessions = self.sessions
        return _json(Health(sessions.active, sessions.capacity, len(self.episodes)))

    async def metadata(self, request: Request) -> Response:
        return Response(self._metadata, media_type=JSON)

    async def schema(self, request: Request) -> Response:
        return Response(self._schema, media_type=JSON)

    async def tasks(self, request: Request) -> Response:
        return Response(self._tasks, media_type=JSON)

    def _observation(self, episode_id: str | None, observation: Observation) -> Response:
        return _json(http_step_payload(observation, episode_id), episode_id=episode_id)


def _unprocessable(error: ProtocolError) -> Response:
    return _json(ValidationFailure(error.errors or []), 422)
