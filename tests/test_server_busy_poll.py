"""Busy polling: after a reply the loop polls without blocking for its window, then sleeps again; one
poller per loop however often it is armed; only the end of a reply arms it; the setting reaches it."""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from service_incident.server import busy_poll
from service_incident.server.app import create_app
from service_incident.server.busy_poll import BusyPoll, BusyPolling
from service_incident.server.settings import Settings

uvloop = pytest.importorskip("uvloop")

WINDOW_US = 20_000
# Long past the window, so the loop's sleep after it is seen even on a loaded machine.
AFTER_S = 10 * WINDOW_US / 1e6


class RecordingSelector(selectors.DefaultSelector):  # type: ignore[misc, valid-type]
    """The loop's selector, noting when it was asked to wait and for how long."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[tuple[float, float | None]] = []

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.waits.append((time.perf_counter(), timeout))
        return super().select(timeout)


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The poll's rounds, counted where each yields the CPU (a yield here would hand the core to the
    test's neighbours for a whole time slice)."""
    counted = [0]

    def count() -> None:
        counted[0] += 1

    monkeypatch.setattr(busy_poll, "_yield_cpu", count)
    return counted


def run_on(loop: asyncio.AbstractEventLoop, main: Callable[[], Any]) -> Any:
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_an_armed_loop_polls_without_blocking_until_the_window_ends_then_sleeps(rounds: list[int]) -> None:
    selector = RecordingSelector()
    poll = BusyPoll(WINDOW_US)

    async def main() -> float:
        await asyncio.sleep(0.01)  # unarmed first: the loop sleeps in select
        armed_at = time.perf_counter()
        poll.arm()
        poll.arm()  # a second reply extends the window: still one poller
        await asyncio.sleep(AFTER_S)
        return armed_at

    armed_at = run_on(asyncio.SelectorEventLoop(selector), main)
    before = [timeout for at, timeout in selector.waits if at < armed_at]
    polls = [at for at, timeout in selector.waits if at >= armed_at and timeout == 0]
    sleeps = [at for at, timeout in selector.waits if at >= armed_at and (timeout is None or timeout > 0)]
    # Unarmed, the loop waited, polling only once or twice on a task's way.
    assert any(before) and sum(timeout == 0 for timeout in before) <= 4
    assert len(polls) >= 20 and max(polls) >= armed_at + WINDOW_US / 2e6  # armed, it kept polling
    assert min(sleeps) >= armed_at + WINDOW_US / 1e6  # and slept only once the window was over
    assert rounds[0] <= len(polls) + 1  # one round per poll: one poller, however often armed
    assert not poll.polling


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_every_loop_iteration_of_the_window_is_a_round_and_the_polling_stops(
    new_loop: Callable[[], asyncio.AbstractEventLoop], rounds: list[int]
) -> None:
    poll = BusyPoll(WINDOW_US)

    async def main() -> bool:
        poll.arm()
        await asyncio.sleep(AFTER_S)  # no timer nor socket is due in the window: only the rounds
        return poll.polling

    assert run_on(new_loop(), main) is False
    # A loop that slept in the window would have run a round or two; one that polled ran thousands.
    assert rounds[0] >= 20


def test_a_new_loop_gets_a_poller_of_its_own_after_one_closed_mid_window(rounds: list[int]) -> None:
    poll = BusyPoll(WINDOW_US)

    async def arm_and_leave() -> None:
        poll.arm()

    run_on(asyncio.new_event_loop(), arm_and_leave)  # closed with the window open
    assert poll.polling
    counted = rounds[0]

    async def arm_and_wait() -> None:
        poll.arm()
        await asyncio.sleep(AFTER_S)

    run_on(asyncio.new_event_loop(), arm_and_wait)
    assert rounds[0] - counted >= 20 and not poll.polling


@pytest.mark.parametrize(
    ("messages", "armed"),
    [
        ([{"type": "websocket.send", "text": "{}"}], True),
        ([{"type": "http.response.start", "status": 200, "headers": []}], False),
        ([{"type": "http.response.body", "body": b"part", "more_body": True}], False),
        ([{"type": "http.response.start", "status": 200}, {"type": "http.response.body", "body": b"{}"}], True),
        ([{"type": "websocket.accept"}], False),
    ],
    ids=["a frame", "a head alone", "a body to be continued", "a whole response", "a handshake"],
)
async def test_the_middleware_arms_on_the_end_of_a_reply_and_passes_every_message_on(
    messages: list[Message], armed: bool
) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "websocket.receive", "text": "{}"}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for message in messages:
            await send(message)

    middleware = BusyPolling(app, window_us=WINDOW_US)
    await middleware({"type": "http"}, receive, send)
    assert sent == messages
    assert middleware.poll is not None and middleware.poll.polling is armed


async def test_lifespan_and_a_window_of_zero_leave_the_app_unwrapped() -> None:
    async def send(message: Message) -> None:
        pass

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    seen: list[Send] = []

    async def app(scope: Scope, receive: Receive, send_: Send) -> None:
        seen.append(send_)

    await BusyPolling(app, window_us=WINDOW_US)({"type": "lifespan"}, receive, send)
    await BusyPolling(app, window_us=0)({"type": "websocket"}, receive, send)
    assert seen == [send, send]


@pytest.mark.parametrize(("environ", "window_us"), [({}, Settings().busy_poll_us), ({"BUSY_POLL_US": "0"}, 0)])
def test_the_app_polls_for_the_window_its_settings_give(environ: dict[str, str], window_us: int) -> None:
    app = create_app(Settings.load(environ, generation_processes=0))
    wrapped = [(middleware.cls, middleware.kwargs) for middleware in app.user_middleware]
    assert wrapped[0] == (BusyPolling, {"window_us": window_us})  # outermost: it sees every reply
