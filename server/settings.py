"""Server settings: every default is defined here once; each field can be set by an environment variable.

The variable is the field name in upper case (`max_concurrent_envs` -> `MAX_CONCURRENT_ENVS`), the
convention OpenEnv environments follow, so a Space or a Dockerfile tunes the server without code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from service_incident.holdout import MIN_KEY_CHARS

from .logs import logging_config
from .transport import HttpProtocol, WebSocketProtocol

# A Space's app is shown on its page at huggingface.co, and may be embedded from other Spaces.
SPACE_FRAME_ANCESTORS = "https://huggingface.co https://*.hf.space"

Positive = Annotated[float, Meta(gt=0)]
Count = Annotated[int, Meta(ge=1)]
# One cap for a WebSocket frame and an HTTP body: the same messages travel either way.
MAX_MESSAGE_BYTES = 1024 * 1024


class Settings(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Transport settings, and the one setting of the environment: the holdout key."""

    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 8000
    # WebSocket sessions: one environment per socket.
    max_concurrent_envs: Count = 512
    session_idle_timeout_s: Positive = 600.0
    ws_ping_interval_s: Positive | None = 20.0
    ws_ping_timeout_s: Positive | None = 20.0
    ws_max_message_bytes: Count = MAX_MESSAGE_BYTES
    # Observations are a few KB: deflate costs more CPU per step than it saves on loopback or a LAN.
    ws_per_message_deflate: bool = False
    # Stateful HTTP episodes (/reset, /step, /state): bounded, least recently used evicted first.
    http_max_episodes: Count = 256
    # One client (address) holds at most this many; its resets past it evict its own oldest.
    http_max_episodes_per_client: Count = 16
    http_episode_idle_timeout_s: Positive = 900.0
    # MCP sessions: one client (address) holds at most this many.
    mcp_max_sessions_per_client: Count = 16
    # Where episode logs live, so a session resumes on any process (server/episode_log.py):
    # "memory" (this process), "sqlite:///path" (the workers of one box), "redis://host:6379/0" (many boxes).
    episode_store: str = "memory"
    # Server processes on one port: a number, or "auto" for one per core. More than one shares the
    # episode store, a SQLite file of their own if EPISODE_STORE is "memory".
    workers: Annotated[str, Meta(pattern=r"^(auto|[1-9][0-9]*)$")] = "1"
    # After each reply the event loop polls its sockets this long before it sleeps (server/busy_poll.py):
    # a client's next frame then finds the process on its core. 0: sleep at once.
    busy_poll_us: Annotated[int, Meta(ge=0, le=10_000)] = 500
    # Processes that generate the incidents of training and held-out resets, off the event loop, so
    # that a reset does not hold every other session's step while it generates (0: in the loop).
    generation_processes: Annotated[int, Meta(ge=0)] = 1
    # Whether a request that names no episode continues the latest one: "auto" allows it only on a
    # server reachable from this machine alone (bound to loopback, and the request arrived there).
    http_implicit_episode: Literal["auto", "true", "false"] = "auto"
    http_max_body_bytes: Count = MAX_MESSAGE_BYTES
    # A request's head and body must each arrive within this; an idle keep-alive connection closes after it.
    http_timeout_s: Positive = 10.0
    # Browser origins allowed beside the server's own, comma-separated ("*": any). Clients that are
    # not browsers send no Origin and are always allowed. The page may fetch replays from them too.
    allowed_origins: str = ""
    # Host names a connection that arrives on loopback may name beside loopback ones (comma-separated,
    # "*": any): a tunnel's or a local proxy's public name. Others are refused, so a page on a domain
    # that an attacker points at 127.0.0.1 (DNS rebinding) cannot reach a local server.
    allowed_hosts: str = ""
    # The proxies whose X-Forwarded-For and X-Forwarded-Proto are believed (uvicorn's option: addresses
    # or networks, comma-separated, "*": any). Nobody by default, so a client cannot pose as many.
    forwarded_allow_ips: str = ""
    # Connections one peer address may hold at once, HTTP and WebSocket together; past it, 503 (but
    # /health is answered). None: a quarter of the descriptors the process may open. Behind a proxy
    # every client is the proxy: raise it to MAX_CONCURRENT_ENVS and more.
    max_connections_per_client: Count | None = None
    # Who may show the page in a frame (CSP frame-ancestors). The default: the Hugging Face Hub,
    # which frames a Space's app, when running on a Space; nobody elsewhere.
    frame_ancestors: str = "'none'"
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"
    # A folder of inference.py results to serve at /results/, so the page replays runs by URL.
    results_dir: str | None = None
    # The secret the held-out tasks' incidents derive from (see service_incident.holdout); without
    # it they are not offered. /health shows its fingerprint, nothing ever shows the key.
    holdout_key: Annotated[str, Meta(min_length=MIN_KEY_CHARS)] | None = None

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then environment variables, then keyword overrides; all validated."""
        environ = os.environ if environ is None else environ
        raw: dict[str, Any] = {
            name: _parse_env(environ[name.upper()]) for name in cls.__struct_fields__ if name.upper() in environ
        }
        if on_a_space(environ):
            raw.setdefault("frame_ancestors", SPACE_FRAME_ANCESTORS)
        raw.update(overrides)
        try:
            return msgspec.convert(raw, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise ValueError(f"invalid server setting: {exc}") from None

    def uvicorn_options(self) -> dict[str, Any]:
        """The uvicorn.Config arguments these settings determine."""
        return {
            "host": self.host,
            "port": self.port,
            "http": HttpProtocol.bounded(self.max_connections_per_client),
            "ws": WebSocketProtocol,
            "timeout_keep_alive": self.http_timeout_s,
            "ws_max_size": self.ws_max_message_bytes,
            "ws_ping_interval": self.ws_ping_interval_s,
            "ws_ping_timeout": self.ws_ping_timeout_s,
            "ws_per_message_deflate": self.ws_per_message_deflate,
            "log_level": self.log_level,
            "log_config": logging_config(),
            # Without proxy_headers uvicorn ignores the headers; with it, believes them from these.
            "proxy_headers": bool(self.forwarded_allow_ips),
            "forwarded_allow_ips": self.forwarded_allow_ips or None,
            "workers": self.worker_count,
        }

    @property
    def worker_count(self) -> int:
        return (os.cpu_count() or 1) if self.workers == "auto" else int(self.workers)

    @property
    def origins(self) -> frozenset[str]:
        return _names(self.allowed_origins)

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset(host.lower() for host in _names(self.allowed_hosts))


def on_a_space(environ: Mapping[str, str]) -> bool:
    """Whether this runs on a Hugging Face Space, which sets these variables in its containers."""
    return "SPACE_ID" in environ or environ.get("SYSTEM") == "spaces"


def _names(listed: str) -> frozenset[str]:
    return frozenset(name.strip() for name in listed.split(",") if name.strip())


def _parse_env(value: str) -> str | None:
    # "none" disables the optional settings (keepalive pings) the way uvicorn's own flags do.
    return None if value.strip().lower() in {"", "none", "off"} else value
