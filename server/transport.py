"""uvicorn's HTTP and WebSocket protocols with the two bounds a public server needs and they lack.

* A request's head (request line and headers) must arrive within the keep-alive timeout and fit in
  h11's incomplete-event limit, whichever HTTP parser runs. uvicorn arms its timer only after a
  response, so a connection that sends nothing, or half a header, would otherwise hold its
  descriptor forever: a few hundred of them exhaust the process's descriptors.
* A text frame that is not UTF-8 closes the socket with 1007, as uvicorn does, but without logging
  a traceback per frame (a peer could fill the log at line rate).
And the WebSocket protocol tells the app how many frames a socket has queued (fairness.py).
"""

from __future__ import annotations

import asyncio

from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from .fairness import BACKLOG_EXTENSION

INVALID_DATA = 1007


class HttpProtocol(HttpToolsProtocol):
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_timer is None or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        limit = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        if self._head_bytes > limit:
            self._head_done()
            self.send_400_response(f"Request head larger than {limit} bytes")

    def on_headers_complete(self) -> None:
        self._head_done()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        super().connection_lost(exc)

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
    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.handshake_initiated and not self.close_sent:
            # ASGI's types have every extension a dict; this one is a function the app calls.
            self.scope["extensions"][BACKLOG_EXTENSION] = self.queue.qsize  # type: ignore[assignment]

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
