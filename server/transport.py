"""uvicorn's HTTP and WebSocket protocols with the bounds a public server needs and they lack.

* A request's head (request line and headers) must arrive within the keep-alive timeout and fit in
  h11's incomplete-event limit, whichever HTTP parser runs, in one write or in pieces. uvicorn arms
  its timer only after a response, so a connection that sends nothing, or half a header, would
  otherwise hold its descriptor forever: a few hundred of them exhaust the process's descriptors.
* A WebSocket handshake must be through within the same timeout. websockets refuses a header line
  over 8 KiB or more than 128 headers with a 431, which uvicorn never sends: the connection would
  wait forever. It is sent, and whatever else keeps a handshake from finishing closes at the deadline.
* One peer address holds at most `max_per_client` connections, HTTP and WebSocket together (by
  default a quarter of the descriptors the process may open), so one client cannot take them all.
  Past that its requests are answered 503 at once and closed, except `GET /health`, which a monitor
  behind the same address (a proxy, a NAT) must still reach.
* A text frame that is not UTF-8 closes the socket with 1007, as uvicorn does, but without logging
  a traceback per frame (a peer could fill the log at line rate).
And the WebSocket protocol tells the app how many frames a socket has queued (fairness.py).
"""

from __future__ import annotations

import asyncio
import functools
import resource
from collections import Counter
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

import httptools
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from starlette.responses import PlainTextResponse
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.http11 import Request

from .fairness import BACKLOG_EXTENSION

INVALID_DATA = 1007
# What a client past its connection bound may still ask.
ALWAYS_ANSWERED = frozenset({("GET", "/health"), ("HEAD", "/health")})
_TOO_MANY = "Too many connections from this address: close some, or retry later."


class _HeadTooLarge(Exception):
    pass


class _Connections:
    """Open connections per peer address of one server, whichever protocol holds them now."""

    def __init__(self) -> None:
        self.by_address: Counter[str] = Counter()

    def open(self, address: str) -> int:
        self.by_address[address] += 1
        return self.by_address[address]

    def close(self, address: str) -> None:
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]


# One table per server (a test process runs several), gone with it.
_connections: WeakKeyDictionary[ServerState, _Connections] = WeakKeyDictionary()


def _table(server_state: ServerState) -> _Connections:
    return _connections.setdefault(server_state, _Connections())


def _peer(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


_BUSY_HEADERS = {"Connection": "close", "Retry-After": "1"}
_refuse_busy = PlainTextResponse(_TOO_MANY, 503, headers=_BUSY_HEADERS)
# The same, written raw: a WebSocket upgrade is answered before any app runs.
_BUSY_UPGRADE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    + b"".join(f"{name}: {value}\r\n".encode() for name, value in _BUSY_HEADERS.items())
    + f"content-length: {len(_TOO_MANY)}\r\n\r\n{_TOO_MANY}".encode()
)


def descriptor_share() -> int:
    """A quarter of the descriptors this process may open: what one address may hold by default."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(soft // 4, 1) if soft != resource.RLIM_INFINITY else 1 << 20


class HttpProtocol(HttpToolsProtocol):
    max_per_client = 1 << 20  # as uvicorn's own protocol: no bound but the descriptors; see `bounded`
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0  # received while the head is awaited, complete or not
    _parsed_head_bytes = 0  # of the request the parser is on, however it arrived
    _address: str | None = None  # counted in the connection table while set
    _over_bound = False  # this connection is one past its address's bound
    _refused = False  # and its current request is not one answered anyway
    _refusal: str | None = None

    def __init__(self, *args: Any, max_per_client: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if max_per_client is not None:
            self.max_per_client = max_per_client

    @classmethod
    def bounded(cls, max_per_client: int | None = None) -> Callable[..., HttpProtocol]:
        """This protocol with a bound on connections per client address (None: descriptor_share()).
        A partial, not a subclass made at run time: `--workers` pickles it into each worker process."""
        return functools.partial(cls, max_per_client=max_per_client or descriptor_share())

    @property
    def _head_limit(self) -> int:
        return self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = _peer(transport)
        self._over_bound = _table(self.server_state).open(self._address) > self.max_per_client
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_timer is None or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        if self._head_bytes > self._head_limit:
            self._head_done()
            self.send_400_response(f"Request head larger than {self._head_limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed_head_bytes = 0

    # A head that arrives in one write is parsed before data_received can count it: count its parts.
    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > self._head_limit:
            self._refusal = f"Request head larger than {self._head_limit} bytes"
            raise _HeadTooLarge  # the parser stops; uvicorn answers 400 through send_400_response

    def send_400_response(self, msg: str) -> None:
        super().send_400_response(self._refusal or msg)

    def on_headers_complete(self) -> None:
        self._head_done()
        if self._over_bound:
            method = self.parser.get_method().decode("ascii", "replace")
            path = httptools.parse_url(self.url).path.decode("ascii", "replace")
            self._refused = (method, path) not in ALWAYS_ANSWERED
        if not self._refused:
            super().on_headers_complete()
            return
        app = self.app
        self.app = _refuse_busy  # what uvicorn itself does past `limit_concurrency`
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def handle_websocket_upgrade(self) -> None:
        if self._refused:
            self.transport.write(_BUSY_UPGRADE)
            self.transport.close()
            return
        # The WebSocket protocol holds the connection from here, and counts it (connection_lost is
        # called on that protocol, not this one).
        self._release()
        super().handle_websocket_upgrade()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        self._release()
        super().connection_lost(exc)

    def _release(self) -> None:
        if self._address is not None:
            _table(self.server_state).close(self._address)
            self._address = None

    def _await_head(self) -> None:
        self._head_done()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.timeout_keep_alive, self._head_overdue)

    def _head_done(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class WebSocketProtocol(WebSocketsSansIOProtocol):
    _handshake_timer: asyncio.TimerHandle | None = None
    _address: str | None = None

    def __init__(self, config: Config, server_state: ServerState, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, server_state, *args, **kwargs)
        self.open_connections = _table(server_state)

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._address = _peer(transport)
        self.open_connections.open(self._address)
        self._handshake_timer = self.loop.call_later(self.config.timeout_keep_alive, self._handshake_overdue)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.handshake_initiated and self.conn.handshake_exc is not None:
            # websockets refused the request and wrote its answer (431, 414) or an EOF: send it.
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.transport.close()

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.handshake_initiated and not self.close_sent:
            # ASGI's types have every extension a dict; this one is a function the app calls.
            self.scope["extensions"][BACKLOG_EXTENSION] = self.queue.qsize  # type: ignore[assignment]

    def _handshake_overdue(self) -> None:
        self._handshake_timer = None
        if not self.handshake_complete and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        if self._address is not None:
            self.open_connections.close(self._address)
            self._address = None
        super().connection_lost(exc)

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text" and not self.close_sent:
            try:
                b"".join(self.frames).decode()
            except UnicodeDecodeError as exc:
                self.frames = []
                self.conn.send_close(INVALID_DATA, f"Text frame is not UTF-8 (byte {exc.start})")
                self.handle_parser_exception()
                return
        super().send_receive_event_to_app()
