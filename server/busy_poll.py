"""ASGI middleware: after each reply the event loop polls its sockets for `BUSY_POLL_US` before it
sleeps, so a client that steps in a loop finds the process on its core (client/polling.py)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service_incident.client.polling import poll_for

# ASGI messages that end a reply: what a client waits for before it sends again.
_REPLIES = frozenset({"websocket.send", "http.response.body"})


class BusyPolling:
    """Arms the loop's polling on every reply sent: a WebSocket frame, or the end of an HTTP body."""

    def __init__(self, app: ASGIApp, *, window_us: int) -> None:
        self.app = app
        self.window_s = window_us / 1e6

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        window_s = self.window_s
        if not window_s or scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_then_poll(message: Message) -> None:
            await send(message)
            if message["type"] in _REPLIES and not message.get("more_body", False):
                poll_for(window_s)

        await self.app(scope, receive, send_then_poll)
