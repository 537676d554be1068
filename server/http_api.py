"""The HTTP routes: OpenEnv's simulation endpoints (stateful here), discovery endpoints, MCP and tasks.

An episode is named by the id `/reset` returned: the `Episode-Id` header, `episode_id` in a step's
body or a GET's query. Whether a request that names none continues the latest episode is the
`implicit` policy (on for a server reachable from this machine only): a curl walkthrough keeps
working there, and a public server answers 400 instead, so nobody reaches another's episode.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.holdout import fingerprint
from service_incident.models import Action, Observation, ResetRequest, State, parse_action, schemas
from service_incident.tasks import catalogue
from service_incident.wire import (
    EPISODE_ID_RULE,
    EpisodeId,
    ProtocolError,
    core_error,
    decode_json,
    encode,
    http_step_payload,
    invalid,
    valid_episode_id,
)

from . import mcp
from .errors import JSON, json_response
from .http_episodes import EpisodeStore, UnknownEpisode
from .replay import Episode
from .sessions import SessionRegistry

EPISODE_HEADER = "Episode-Id"


class StepOptions(Struct, kw_only=True, forbid_unknown_fields=True):
    """Keys a step request may carry beside the action. OpenEnv's `timeout_s` and `request_id` are
    accepted for compatibility and have no effect: a step never waits on anything."""

    episode_id: EpisodeId | None = None
    timeout_s: Annotated[float, Meta(gt=0)] | None = None
    request_id: Annotated[str, Meta(max_length=255)] | None = None


class StepRequest(StepOptions, kw_only=True):
    """OpenEnv's wrapped form; the flat form puts the action's own keys at the top level instead."""

    action: Action


class Grade(Struct):
    episode_id: str | None
    done: bool
    score: float | None
    breakdown: dict[str, float] | None


class ServerHealth(Struct):
    """`/health`: liveness and how full the server is (not an incident's service health)."""

    active_sessions: int
    max_sessions: int
    http_episodes: int
    status: str = "healthy"
    # Names the key the held-out tasks derive from, so published scores say which set they are on.
    holdout_fingerprint: str | None = None


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


_STEP_OPTIONS = frozenset(StepOptions.__struct_fields__)


def parse_step(body: bytes) -> tuple[Action, StepOptions]:
    """Both OpenEnv's `{"action": {...}}` and the flat `{"action": "inspect_logs", "target": "db"}`."""
    fields = decode_json(body or b"null", dict[str, Any])
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
    except ValueError as exc:
        raise core_error(exc) or exc from None


class HttpApi:
    def __init__(
        self,
        episodes: EpisodeStore,
        sessions: SessionRegistry,
        implicit: Callable[[Request], bool],
        holdout_key: str | None = None,
    ) -> None:
        self.episodes = episodes
        self.sessions = sessions
        self.implicit = implicit
        self.holdout_fingerprint = fingerprint(holdout_key) if holdout_key is not None else None
        self._metadata = encode(environment_metadata())
        self._schema = encode({**schemas(), "reset_observation": msgspec.json.schema(Observation)})
        self._tasks = encode(catalogue(held_out=holdout_key is not None))

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
        reset = decode_json(body, ResetRequest, "reset") if body.strip() else ResetRequest()
        if reset.episode_id is not None and not valid_episode_id(reset.episode_id):
            raise invalid("Invalid reset", f"episode_id must be {EPISODE_ID_RULE} - at `$.episode_id`")
        try:
            episode_id, observation = await self.episodes.start(reset, _client(request))
        except ValueError as exc:
            raise core_error(exc) or exc from None
        return self._observation(episode_id, observation)

    async def step(self, request: Request) -> Response:
        action, options = parse_step(await request.body())
        episode_id, episode = await self._episode(request, options.episode_id or self._header(request), stepping=True)
        if episode_id is None or not isinstance(episode, Episode):
            return self._observation(episode_id, episode.step(action))
        observation = await self.episodes.step(episode_id, episode, action)
        # The episode's encoder splices in the views its last reply carried: the frame grows every step.
        body = episode.frames.http_body(observation, episode_id)
        return Response(body, headers={EPISODE_HEADER: episode_id}, media_type=JSON)

    async def state(self, request: Request) -> Response:
        episode_id, episode = await self._named(request)
        return self._json(episode.state, episode_id)

    async def grade(self, request: Request) -> Response:
        """The episode's score and breakdown: null until it has ended, so it is no scoring oracle."""
        episode_id, episode = await self._named(request)
        score, breakdown = episode.grade()
        return self._json(Grade(episode_id=episode_id, done=episode.state.done, score=score, breakdown=breakdown))

    async def health(self, request: Request) -> Response:
        sessions = self.sessions
        return self._json(
            ServerHealth(
                sessions.active, sessions.capacity, len(self.episodes), holdout_fingerprint=self.holdout_fingerprint
            )
        )

    async def metadata(self, request: Request) -> Response:
        return Response(self._metadata, media_type=JSON)

    async def schema(self, request: Request) -> Response:
        return Response(self._schema, media_type=JSON)

    async def tasks(self, request: Request) -> Response:
        return Response(self._tasks, media_type=JSON)

    async def openenv_mcp(self, request: Request, call: Any) -> mcp.RpcResponse:
        """One request of OpenEnv's JSON-RPC dialect at /mcp, acting only on the episode it names."""
        client = _client(request)
        if mcp.method_of(call) == "openenv/session/create":
            return await mcp.create_session(call, lambda reset: self.episodes.start(reset, client))
        if mcp.method_of(call) == "openenv/session/close":
            return await mcp.close_session(call, self.episodes.close)
        if mcp.method_of(call) != "tools/call":
            return mcp.handle(call, _unknown(UnknownEpisode("no episode")))
        try:
            episode_id, episode = await self._episode(request, mcp.session_of(call))
        except (HTTPException, ProtocolError, UnknownEpisode) as exc:
            return mcp.handle(call, _unknown(exc))
        response = mcp.handle(call, lambda _session_id: episode)
        if episode_id is not None and isinstance(episode, Episode):
            await self.episodes.save(episode_id, episode)
        return response

    async def _named(self, request: Request) -> tuple[str | None, Episode | ServiceIncidentEnvironment]:
        """The episode a GET names (query or header)."""
        return await self._episode(request, request.query_params.get("episode_id") or self._header(request))

    @staticmethod
    def _header(request: Request) -> str | None:
        return request.headers.get(EPISODE_HEADER)

    async def _episode(
        self, request: Request, episode_id: str | None, stepping: bool = False
    ) -> tuple[str | None, Episode | ServiceIncidentEnvironment]:
        """The named episode; without a name, the latest one if the policy allows, else a 400.

        Before any episode (or after a failed reset) the latest is none, and a fresh environment
        answers, as it would on a stock OpenEnv server.
        """
        if episode_id is not None:
            if not valid_episode_id(episode_id):
                raise invalid("Invalid episode id", f"must be {EPISODE_ID_RULE} - at `$.episode_id`")
            return episode_id, await self.episodes.get(episode_id, _client(request), stepping=stepping)
        if not self.implicit(request):
            raise HTTPException(400, f"name the episode: send the {EPISODE_HEADER} header with the id /reset returned")
        latest = self.episodes.latest
        if latest is None:
            return None, ServiceIncidentEnvironment()
        return latest, await self.episodes.get(latest, _client(request), stepping=stepping)

    def _observation(self, episode_id: str | None, observation: Observation) -> Response:
        return self._json(http_step_payload(observation, episode_id), episode_id)

    @staticmethod
    def _json(body: State | Struct, episode_id: str | None = None) -> Response:
        return json_response(body, headers={EPISODE_HEADER: episode_id} if episode_id else None)


def _unknown(exc: Exception) -> mcp.EnvResolver:
    """A resolver that refuses, for a request whose episode cannot be had."""
    message = (
        exc.detail if isinstance(exc, HTTPException) else exc.message if isinstance(exc, ProtocolError) else str(exc)
    )

    def refuse(session_id: str | None) -> ServiceIncidentEnvironment:
        raise UnknownEpisode(message)

    return refuse


def _client(request: Request) -> str:
    """Who is asking, for the per-client bound on episodes: the peer's address (behind a proxy, the
    forwarded one, when uvicorn is told to trust the proxy's headers)."""
    return request.client.host if request.client else ""
