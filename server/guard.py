"""What a request must be before any route sees it: for this host, from an allowed origin, JSON,
bounded, prompt.

* A connection that arrives on loopback must name a loopback host (`localhost`, `127.0.0.1`, `[::1]`)
  or one the settings allow: a page on `evil.example`, once that name resolves to 127.0.0.1 (DNS
  rebinding), is then same-origin with a local server as far as the browser knows, and only the
  `Host` it sends still tells. Refused with 421 (a WebSocket handshake: 403) before anything runs.

* A browser page on another site can send "simple" cross-origin requests (form or `text/plain`
  bodies, no preflight) and open WebSockets to any server the user can reach, a local one included.
  So POST bodies must be `application/json` (415 otherwise), and a request or WebSocket that carries
  an `Origin` must come from this server's own origin or one the settings allow (403 otherwise).
  Non-browser clients send no `Origin` and are unaffected.
* A body larger than the cap is answered 413 before it is read: at once when `Content-Length` says
  so, else as soon as the bytes read pass the cap. A body that stops arriving is answered 408 after
  the timeout. Either way no more than the cap is ever held in memory.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from service_incident.wire import is_loopback

from .errors import failure

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_WRONG_HOST = "the Host header names no host of this server: on loopback it answers to loopback names and ALLOWED_HOSTS"


class OriginPolicy:
    """Same origin and no origin are allowed; so are the origins listed (`*` allows any)."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def allows(self, headers: Headers) -> bool:
        origin = headers.get("origin")
        if origin is None or "*" in self.allowed or origin in self.allowed:
            return True
        # The scheme is not compared: behind a TLS proxy the page is https and the hop to us is not.
        # A proxy may name the public host in X-Forwarded-Host; a page cannot set that header on a
        # WebSocket, nor on a POST without a CORS preflight, which this server never grants.
        netloc = urlsplit(origin).netloc.lower()  # empty for "null" (sandboxed frames, files)
        return bool(netloc) and netloc in (headers.get("host", "").lower(), headers.get("x-forwarded-host", "").lower())


class HostPolicy:
    """Loopback host names, and those listed (`*`: any), for connections that arrive on loopback."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def allows(self, scope: Scope) -> bool:
        server = scope.get("server")
        if "*" in self.allowed or not server or not is_loopback(str(server[0])):
            return True
        host = Headers(scope=scope).get("host")
        if host is None:  # HTTP/1.0 without a Host: no browser sends that
            return True
        name = _host_name(host)
        # *.localhost resolves to loopback by definition (RFC 6761), so no attacker can own one.
        return is_loopback(name) or name.endswith(".localhost") or name in self.allowed


def _host_name(host: str) -> str:
    """`Host` without its port, lower case, an IPv6 literal without brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


# Headers a proxy or tunnel adds: any of them means the request did not come from this machine alone.
_FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"via",
        b"x-real-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"x-client-ip",
        b"x-cluster-client-ip",
        b"x-envoy-external-address",
    }
)
_FORWARDING_PREFIXES = (b"x-forwarded-", b"x-original-")


def forwarded(scope: Scope) -> bool:
    """Whether the request shows any sign of having come through a proxy or tunnel."""
    return any(name in _FORWARDING_HEADERS or name.startswith(_FORWARDING_PREFIXES) for name, _ in scope["headers"])


def from_this_machine(scope: Scope) -> bool:
    """Whether a request came from this machine alone: it arrived on loopback, names a loopback host
    and shows no sign of a proxy or tunnel (which would connect from loopback too)."""
    server = scope.get("server")
    if not server or not is_loopback(str(server[0])):
        return False
    return is_loopback(_host_name(Headers(scope=scope).get("host", "localhost"))) and not forwarded(scope)


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class RequestGuard:
    def __init__(
        self, app: ASGIApp, *, hosts: HostPolicy, origins: OriginPolicy, max_body_bytes: int, body_timeout_s: float
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self.hosts.allows(scope):
            if scope["type"] == "websocket":
                await WebSocketClose()(scope, receive, send)  # before the handshake: a 403
            else:
                await failure(421, _WRONG_HOST)(scope, receive, send)
            return
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(headers)
        if refusal is not None:
            await failure(*refusal)(scope, receive, send)
            return
        await self.app(scope, self._bounded(receive), send)

    def _refusal(self, headers: Headers) -> tuple[int, str] | None:
        if not self.origins.allows(headers):
            return 403, "cross-origin requests are not allowed from this origin"
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            return 413, f"the body is larger than the limit of {self.max_body_bytes} bytes"
        has_body = "transfer-encoding" in headers or (length is not None and length.strip() not in ("", "0"))
        if has_body and not is_json(headers.get("content-type", "")):
            return 415, "the body must be JSON, sent with Content-Type: application/json"
        return None

    def _bounded(self, receive: Receive) -> Receive:
        received = 0
        deadline = anyio.current_time() + self.body_timeout_s
        done = False

        async def bounded_receive() -> Message:
            nonlocal received, done
            if done:  # the body is in; what is left to hear is the disconnect, whenever it comes
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.max_body_bytes:
                        raise HTTPException(413, f"the body is larger than the limit of {self.max_body_bytes} bytes")
                    done = not message.get("more_body", False)
                return message
            raise HTTPException(408, f"the body did not arrive within {self.body_timeout_s:g} s")

        return bounded_receive
