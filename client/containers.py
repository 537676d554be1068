"""A server in a container, started by an OpenEnv container provider: the route `AutoEnv.from_env(name)`
takes without a `base_url`, through the client's `from_docker_image`.

The provider starts the image and waits for its `/health`; the client then talks to the container as
to any server, and closing the client stops the container. OpenEnv's providers (`LocalDockerProvider`
by default, any `ContainerProvider`) live in the `openenv` package, which this one does not depend
on: the route needs it installed beside this package, as AutoEnv's users have it, or a provider
passed in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol


class ContainerProvider(Protocol):
    """What the client asks of a provider: OpenEnv's `ContainerProvider` interface."""

    def start_container(self, image: str, *, env_vars: dict[str, str] | None = None, **options: Any) -> str: ...

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None: ...

    def stop_container(self) -> None: ...


class Container:
    """The container a client owns; `stop` ends it (the client's `close` calls it)."""

    def __init__(self, provider: ContainerProvider) -> None:
        self.provider = provider

    def stop(self) -> None:
        self.provider.stop_container()


def local_docker_provider() -> ContainerProvider:
    try:
        from openenv.core.containers.runtime import LocalDockerProvider
    except ImportError:
        raise ImportError(
            "starting a container needs OpenEnv's container providers: `pip install openenv`, or pass "
            "provider= (any object with start_container, wait_for_ready and stop_container)"
        ) from None
    provider: ContainerProvider = LocalDockerProvider()
    return provider


async def start(
    image: str,
    provider: ContainerProvider | None,
    wait_timeout: float,
    env_vars: Mapping[str, str] | None,
    options: Mapping[str, Any],
) -> tuple[str, Container]:
    """Start `image` and wait until it serves; the base URL and the container. A container that does
    not become ready is stopped before the error goes up. The provider blocks (it runs `docker` and
    polls), so it runs in a worker thread, off the event loop."""

    def run() -> tuple[str, Container]:
        chosen = provider if provider is not None else local_docker_provider()
        try:
            base_url = chosen.start_container(image, env_vars=dict(env_vars or {}), **options)
            chosen.wait_for_ready(base_url, timeout_s=wait_timeout)
        except BaseException:
            chosen.stop_container()
            raise
        return base_url, Container(chosen)

    return await asyncio.to_thread(run)
