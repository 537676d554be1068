"""The Service Incident client: `ServiceIncidentEnv`, a typed OpenEnv `EnvClient` for this environment.

async with ServiceIncidentEnv("http://127.0.0.1:8000") as env:
    result = await env.reset(task_id="easy", seed=7)
    result = await env.step(InspectLogs(target="db"))

with ServiceIncidentEnv.launch().sync() as env:      # own server process on a free port
    env.reset()

env = await ServiceIncidentEnv.from_docker_image("service-incident-env:latest")  # OpenEnv's provider route
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from service_incident.models import Action, Observation, ResetRequest, RewardMode, State, parse_action

from . import containers
from .base import (
    CapacityReached,
    ConnectionFailed,
    Desynchronised,
    EnvClient,
    EnvClientError,
    EpisodeLost,
    NoReply,
    ServerBusy,
    ServerError,
    SessionClosed,
    StepResult,
    SyncEnvClient,
)
from .containers import Container, ContainerProvider
from .local import LocalServer

__all__ = [
    "CapacityReached",
    "ConnectionFailed",
    "Desynchronised",
    "EnvClient",
    "EnvClientError",
    "EpisodeLost",
    "LocalServer",
    "NoReply",
    "ServerBusy",
    "ServerError",
    "ServiceIncidentAction",
    "ServiceIncidentEnv",
    "ServiceIncidentObservation",
    "SessionClosed",
    "StepResult",
    "SyncEnvClient",
]


class ServiceIncidentEnv(EnvClient[Action, Observation, State]):
    """Actions are `service_incident.models` Structs; observations and state decode into theirs."""

    _server: LocalServer | Container | None = None  # what this client started, stopped when it closes

    def __init__(self, base_url: str, *, provider: object = None, **options: Any) -> None:
        # OpenEnv's AutoEnv passes the container provider it started, None for a running server.
        super().__init__(base_url, **options)

    @classmethod
    def launch(cls, settings: Mapping[str, object] | None = None, **options: Any) -> ServiceIncidentEnv:
        """Start a private server process (blocks until it is ready) and a client bound to it.

        Closing the client stops the server, and so does the end of this process, however it ends.
        `settings` are server settings, `options` client ones.
        """
        server = LocalServer(settings)
        client = cls(server.start(), **options)
        client._server = server
        return client

    @classmethod
    async def from_docker_image(
        cls,
        image: str,
        provider: ContainerProvider | None = None,
        *,
        wait_timeout: float = 30.0,
        env_vars: Mapping[str, str] | None = None,
        **start_options: Any,
    ) -> ServiceIncidentEnv:
        """Start `image` through an OpenEnv container provider (`LocalDockerProvider` unless one is
        given), wait up to `wait_timeout` s for its `/health`, and return a client bound to it.

        This is what `AutoEnv.from_env("service_incident")` calls without a `base_url`. Closing the
        client stops the container. `start_options` go to the provider's `start_container` (`port=`).
        """
        base_url, container = await containers.start(image, provider, wait_timeout, env_vars, start_options)
        client = cls(base_url)
        client._server = container
        return client

    # Narrower than EnvClient's: the fields of this environment's reset request, typed.
    async def reset(  # type: ignore[override]
        self,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        incident_id: str | None = None,
        episode_id: str | None = None,
        reward_mode: RewardMode = "final",
    ) -> StepResult[Observation]:
        """Start an episode: the fields of `service_incident.models.ResetRequest`."""
        request = ResetRequest(
            task_id=task_id, seed=seed, incident_id=incident_id, episode_id=episode_id, reward_mode=reward_mode
        )
        return await self._reset(request)

    def _parse_result(self, result: StepResult[Observation]) -> StepResult[Observation]:
        # On the wire reward and done travel beside the observation; put them back in it.
        result.observation.reward = result.reward
        result.observation.done = result.done
        return result

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self._server is not None:
                server, self._server = self._server, None
                await asyncio.to_thread(server.stop)


class ServiceIncidentAction:
    """The action class OpenEnv's `AutoAction` finds: `ServiceIncidentAction(action="inspect_logs",
    target="db")` is the typed action (here an `InspectLogs`), validated like any other."""

    def __new__(cls, **fields: Any) -> Action:  # type: ignore[misc]
        return parse_action(fields)


# The observation class by OpenEnv's naming convention.
ServiceIncidentObservation = Observation
