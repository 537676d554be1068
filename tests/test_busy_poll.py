"""Busy polling: an armed loop polls without blocking for its window, then sleeps again; one poller per
loop however often it is armed; the server arms it at the end of each reply and the client after each
request, for the windows their settings give."""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from service_incident.client import ServiceIncidentEnv, polling
from service_incident.server.app import create_app
from service_incident.server.busy_poll import BusyPolling
from service_incident.server.settings import Settings

uvloop = pytest.importorskip("uvloop")

WINDOW_S = 0.02
# Long past the window, so the loop's sleep after it is seen even on a loaded machine.
AFTER_S = 10 * WINDOW_S


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
    """The rounds polled, counted where each yields the CPU (a real yield here would hand the core to
    the test's neighbours for a whole time slice)."""
    counted = [0]

    def count() -> None:
        counted[0] += 1

    monkeypatch.setattr(polling, "_yield_cpu", count)
    return counted


def run_on(loop: asyncio.AbstractEventLoop, main: Callable[[], Any]) -> Any:
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_an_armed_loop_polls_without_blocking_until_the_window_ends_then_sleeps(rounds: list[int]) -> None:
    selector = RecordingSelector()
    loop = asyncio.SelectorEventLoop(selector)

    async def main() -> tuple[float, bool]:
        await asyncio.sleep(0.01)  # unarmed first: the loop sleeps in select
        armed_at = time.perf_counter()
        polling.poll_for(WINDOW_S)
        polling.poll_for(WINDOW_S / 2)  # a shorter window leaves the longer one
        await asyncio.sleep(AFTER_S)
        return armed_at, polling.polling(loop)

    armed_at, still = run_on(loop, main)
    before = [timeout for at, timeout in selector.waits if at < armed_at]
    polls = [at for at, timeout in selector.waits if at >= armed_at and timeout == 0]
    sleeps = [at for at, timeout in selector.waits if at >= armed_at and (timeout is None or timeout > 0)]
    # Unarmed, the loop waited, polling only once or twice on a task's way.
    assert any(before) and sum(timeout == 0 for timeout in before) <= 4
    assert len(polls) >= 20 and max(polls) >= armed_at + WINDOW_S * 0.75  # armed, it kept polling
    assert min(sleeps) >= armed_at + WINDOW_S  # and slept only once the window was over
    assert rounds[0] <= len(polls) + 1  # one round per poll: one poller, however often armed
    assert not still


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_every_loop_iteration_of_the_window_is_a_round_and_the_polling_stops(
    new_loop: Callable[[], asyncio.AbstractEventLoop], rounds: list[int]
) -> None:
    loop = new_loop()

    async def main() -> bool:
        polling.poll_for(WINDOW_S)
        await asyncio.sleep(AFTER_S)  # no timer nor socket is due in the window: only the rounds
        return polling.polling(loop)

    assert run_on(loop, main) is False
    # A loop that slept in the window would have run a round or two; one that polled ran thousands.
    assert rounds[0] >= 20


def test_a_new_loop_polls_after_one_closed_mid_window(rounds: list[int]) -> None:
    async def arm() -> None:
        polling.poll_for(WINDOW_S)

    async def arm_and_wait() -> None:
        polling.poll_for(WINDOW_S)
        await asyncio.sleep(AFTER_S)

    run_on(asyncio.new_event_loop(), arm)  # closed with its window open
    counted = rounds[0]
    run_on(asyncio.new_event_loop(), arm_and_wait)
    assert rounds[0] - counted >= 20


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
def test_the_middleware_arms_on_the_end_of_a_reply_and_passes_every_message_on(
    messages: list[Message], armed: bool
) -> None:
    sent: list[Message] = []
    loop = asyncio.new_event_loop()

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "websocket.receive", "text": "{}"}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for message in messages:
            await send(message)

    async def main() -> bool:
        await BusyPolling(app, window_us=int(WINDOW_S * 1e6))({"type": "http"}, receive, send)
        return polling.polling(loop)

    assert run_on(loop, main) is armed
    assert sent == messages


async def test_lifespan_and_a_window_of_zero_leave_the_app_unwrapped() -> None:
    async def send(message: Message) -> None:
        pass

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    seen: list[Send] = []

    async def app(scope: Scope, receive: Receive, send_: Send) -> None:
        seen.append(send_)

    await BusyPolling(app, window_us=int(WINDOW_S * 1e6))({"type": "lifespan"}, receive, send)
    await BusyPolling(app, window_us=0)({"type": "websocket"}, receive, send)
    assert seen == [send, send]


@pytest.mark.parametrize(("environ", "window_us"), [({}, Settings().busy_poll_us), ({"BUSY_POLL_US": "0"}, 0)])
def test_the_app_polls_for_the_window_its_settings_give(environ: dict[str, str], window_us: int) -> None:
    app = create_app(Settings.load(environ, generation_processes=0))
    wrapped = [(middleware.cls, middleware.kwargs) for middleware in app.user_middleware]
    assert wrapped[0] == (BusyPolling, {"window_us": window_us})  # outermost: it sees every reply


@pytest.mark.parametrize(("window_us", "armed"), [(10_000_000, True), (0, False)])
async def test_the_client_polls_after_each_request_for_its_window(server_url: str, window_us: int, armed: bool) -> None:
    async with ServiceIncidentEnv(server_url, busy_poll_us=window_us) as env:
        result = await env.reset(task_id="easy", seed=3)
        assert result.observation.services  # the reply came while the loop polled for it
        assert polling.polling(asyncio.get_running_loop()) is armed


def test_a_negative_window_is_refused_by_the_client() -> None:
    with pytest.raises(ValueError, match="busy_poll_us"):
        ServiceIncidentEnv("http://127.0.0.1:1", busy_poll_us=-1)
