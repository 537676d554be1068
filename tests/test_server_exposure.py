"""A public server against other users and careless clients, over real sockets on loopback.

Each test replays one way of abusing the server and checks the server holds: HTTP episodes nobody
else can reach, bounded bodies and nesting, ids that fit in a header, cross-site requests refused,
error messages that do not echo their input, no tracebacks for a client's mistakes, result files
that are data only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import eventually, logged_warnings, process_on_socket
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from service_incident.client import LocalServer
from service_incident.client.base import ws_url
from service_incident.wire import MAX_JSON_DEPTH

JSON = {"Content-Type": "application/json"}
DECLARE = {"action": "declare", "target": "gateway", "severity": "P2"}
INSPECT = {"action": "inspect_logs", "target": "db"}


def client(url: str, address: str = "127.0.0.1") -> httpx.Client:
    """An HTTP client from a chosen loopback address: Linux routes all of 127/8 to this machine."""
    return httpx.Client(base_url=url, timeout=10, transport=httpx.HTTPTransport(local_address=address))


# --- episodes with owners -------------------------------------------------------------------------


def test_nobody_reaches_an_episode_they_did_not_start(make_server: Any) -> None:
    """The attack sequence on a public server: read, end, hijack, take over, evict, close."""
    url = make_server(http_implicit_episode="false", http_max_episodes=64, http_max_episodes_per_client=8)
    with client(url, "127.0.0.2") as victim, client(url, "127.0.0.3") as attacker:
        reset = victim.post("/reset", json={"task_id": "easy", "seed": 5, "episode_id": "ep-1"})
        mine = reset.json()["episode_id"]
        assert reset.headers["Episode-Id"] == mine and len(mine) >= 24 and mine != "ep-1"
        own = {"Episode-Id": mine}

        # Reading the latest episode, or ending it, needs its id: a 400 that says how to name one.
        for response in (attacker.get("/state"), attacker.get("/grade"), attacker.post("/step", json=DECLARE)):
            assert response.status_code == 400 and "Episode-Id" in response.json()["detail"]
            assert mine not in response.text
        # A reset by someone else, even one naming the victim's episode, starts an episode of its own.
        for name in ("ep-1", mine):
            theirs = attacker.post("/reset", json={"task_id": "easy", "episode_id": name}).json()["episode_id"]
            assert theirs != mine
            assert attacker.get("/state", headers={"Episode-Id": theirs}).json()["step_count"] == 0
        # The victim's steps still land in the victim's episode.
        step = victim.post("/step", json=INSPECT, headers=own).json()
        assert step["episode_id"] == mine and step["observation"]["step_count"] == 1
        # Hundreds of resets from one address evict only that address's own episodes.
        for _ in range(300):
            attacker.post("/reset", json={})
        assert victim.get("/health").json()["http_episodes"] == 1 + 8
        state = victim.get("/state", headers=own).json()
        assert (state["episode_id"], state["step_count"], state["done"]) == ("ep-1", 1, False)
        # Closing over MCP needs the id too; a guessed one closes nothing.
        close = {"jsonrpc": "2.0", "method": "openenv/session/close", "params": {"session_id": "ep-1"}, "id": 1}
        assert attacker.post("/mcp", json=close).json()["result"]["closed"] is False
        assert victim.get("/state", headers=own).status_code == 200


def test_the_walkthrough_without_ids_works_on_loopback_but_never_after_a_failed_reset(server_url: str) -> None:
    with client(server_url) as http:
        first = http.post("/reset", json={"task_id": "easy", "seed": 1}).json()["episode_id"]
        assert http.post("/step", json=INSPECT).json()["episode_id"] == first
        assert http.post("/reset", json={"task_id": "no-such-task"}).status_code == 422
        after = http.post("/step", json=INSPECT).json()
        assert after["episode_id"] is None and "reset" in after["observation"]["last_action_error"]
        assert http.get("/state", headers={"Episode-Id": first}).json()["step_count"] == 1


def test_auto_allows_ids_to_be_left_out_only_on_a_loopback_server(make_server: Any) -> None:
    public = make_server(host="0.0.0.0")  # what a container or a Space sets
    with client(public) as http:
        http.post("/reset", json={})
        assert http.get("/state").status_code == 400
    forced = make_server(host="0.0.0.0", http_implicit_episode="true")
    with client(forced) as http:
        episode = http.post("/reset", json={}).json()["episode_id"]
        assert http.get("/state").json()["episode_id"] == episode


@pytest.mark.parametrize("episode_id", ["日本", "a\r\nSet-Cookie: x=1", "nul\x00", "x" * 256, ""])
def test_an_id_that_cannot_go_in_a_header_is_refused_and_harms_nobody(server_url: str, episode_id: str) -> None:
    with client(server_url) as http:
        latest = http.post("/reset", json={}).json()["episode_id"]
        response = http.post("/reset", json={"episode_id": episode_id})
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["episode_id"]
        assert http.get("/state").json()["episode_id"] == latest  # nothing stored, the latest unchanged
        if episode_id == "日本":  # a header can carry it as bytes; it is no id all the same
            assert http.get("/state", headers={"Episode-Id": episode_id.encode()}).status_code == 422


# --- bounded requests -----------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def stream_body(port: int, path: str, total: int, chunked: bool) -> int:
    """POST `total` bytes of body in 1 MiB pieces until the server stops reading; its status code."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        framing = b"Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}".encode()
        raw.sendall(
            b"POST "
            + path.encode()
            + b" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + framing
            + b"\r\n\r\n"
        )
        piece = b"[" * (1 << 20)
        sent = 0
        try:
            while sent < total:
                raw.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
        except OSError:
            pass  # the server answered and closed: exactly what should happen
        reply = b""
        try:
            while b"\r\n" not in reply and (chunk := raw.recv(4096)):
                reply += chunk
        except OSError:
            pass
    assert sent < total, "the server read the whole body"
    return int(reply.split()[1])


@pytest.fixture(scope="module")
def own_process() -> Iterator[LocalServer]:
    """A server in a process of its own, whose memory a test can read."""
    with LocalServer() as server:
        yield server


@pytest.mark.parametrize("path", ["/step", "/reset", "/mcp"])
def test_a_body_over_the_cap_is_refused_before_it_is_held(own_process: LocalServer, path: str) -> None:
    assert own_process.process is not None
    pid, port = own_process.process.pid, int(own_process.base_url.rsplit(":", 1)[1])
    before = rss_mb(pid)
    assert stream_body(port, path, 400 << 20, chunked=False) == 413  # says so up front
    assert stream_body(port, path, 256 << 20, chunked=True) == 413  # found out while reading
    assert rss_mb(pid) - before < 16  # a 1 MiB cap, not hundreds of MB
    assert httpx.get(f"{own_process.base_url}/health").status_code == 200


def test_deep_json_is_a_validation_error_everywhere(server_url: str, server_log: list[logging.LogRecord]) -> None:
    deep = "[" * 1000 + "]" * 1000
    with client(server_url) as http:
        for path in ("/step", "/reset"):
            response = http.post(path, content=f'{{"action": {deep}}}', headers=JSON)
            assert response.status_code == 422, path
            assert f"deeper than {MAX_JSON_DEPTH}" in response.json()["detail"][0]["msg"]
        rpc = http.post("/mcp", content=f'{{"jsonrpc": "2.0", "method": "tools/list", "params": {deep}}}', headers=JSON)
        assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700

    async def over_ws() -> None:
        async with connect(ws_url(server_url)) as ws:
            await ws.send(f'{{"type": "step", "data": {{"action": {deep}}}}}')
            reply = json.loads(await ws.recv())
            assert reply["data"]["code"] == "VALIDATION_ERROR"
            await ws.send('{"type": "state"}')  # the session goes on
            assert json.loads(await ws.recv())["type"] == "state"

    asyncio.run(over_ws())
    assert not [r for r in server_log if r.exc_info], "a client's deep JSON logged a traceback"


def test_errors_quote_a_few_hundred_characters_of_the_input_at_most(server_url: str) -> None:
    key = "k" * (900 << 10)
    with client(server_url) as http:
        unknown = http.post("/step", json={**INSPECT, key: 1})
        task = http.post("/reset", json={"task_id": key})
        too_big = http.post("/reset", json={"task_id": "t" * (20 << 20)})
    assert unknown.status_code == task.status_code == 422
    assert len(unknown.content) < 2048 and len(task.content) < 2048
    assert too_big.status_code == 413 and len(too_big.content) < 256

    async def over_ws() -> int:
        async with connect(ws_url(server_url)) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {key: 1}}))
            return len(await ws.recv())

    assert asyncio.run(over_ws()) < 2048


# --- connections that never finish --------------------------------------------------------------


def test_silent_connections_beyond_the_descriptor_limit_cannot_lock_others_out(tmp_path: Path) -> None:
    """300 silent or half-sent connections against a server allowed 128 descriptors. While they hold
    its descriptors new connections are refused (libuv accepts and drops them); after the request
    timeout (1 s here) the server has closed them, and /health and new sessions get through."""
    launcher = tmp_path / "limited.py"
    launcher.write_text(
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "sys.argv = ['server', '--fd', sys.argv[1]]\n"
        "runpy.run_module('service_incident.server', run_name='__main__')\n"
    )
    command = [sys.executable, str(launcher), "{fd}"]
    with process_on_socket(command, env={"HTTP_TIMEOUT_S": "1", "LOG_LEVEL": "critical"}) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        for i, connection in enumerate(idle):
            if i % 2:
                connection.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")  # half a header
        try:
            eventually(lambda: _answers(f"{url}/health"), "/health answered while silent connections were open")

            async def new_session() -> str:
                async with connect(ws_url(url), open_timeout=10) as ws:
                    await ws.send('{"type": "reset"}')
                    return json.loads(await ws.recv())["type"]

            def session_opens() -> bool:
                # Until the server has hung up on enough of them, this address is over its connection
                # bound and a new session is refused with 503; /health can answer a little earlier.
                try:
                    return asyncio.run(new_session()) == "observation"
                except InvalidStatus as refused:
                    assert refused.response.status_code == 503, refused
                    return False

            eventually(session_opens, "a new session opened once the silent connections were closed")
            for connection in idle:  # the server hung up on every one of them
                connection.settimeout(10)
                with contextlib.suppress(ConnectionResetError):  # dropped unread while descriptors ran out
                    assert connection.recv(1024) == b""
        finally:
            for connection in idle:
                connection.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_a_head_larger_than_the_limit_is_refused(server_url: str) -> None:
    port = int(server_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        try:
            for _ in range(64):
                raw.sendall(b"X-Filler: " + b"f" * 1000 + b"\r\n")
        except OSError:
            pass
        assert raw.recv(4096).startswith(b"HTTP/1.1 400")


# --- cross-site requests --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_post_bodies_must_be_json(server_url: str, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    with client(server_url) as http:
        for path in ("/reset", "/step", "/mcp"):
            response = http.post(path, content=json.dumps(INSPECT), headers=headers)
            assert response.status_code == 415, (path, content_type)


def test_other_origins_are_refused_on_posts_and_websockets(make_server: Any) -> None:
    url = make_server(allowed_origins="https://trusted.example")
    host = url.removeprefix("http://")
    with client(url) as http:
        assert http.post("/reset", json={}, headers={"Origin": "https://evil.example"}).status_code == 403
        for origin in (f"http://{host}", "https://trusted.example"):
            assert http.post("/reset", json={}, headers={"Origin": origin}).status_code == 200
        behind_proxy = {"Origin": "https://x.hf.space", "X-Forwarded-Host": "x.hf.space"}
        assert http.post("/reset", json={}, headers=behind_proxy).status_code == 200

    async def handshake(origin: str | None) -> int:
        try:
            async with connect(ws_url(url), origin=origin, open_timeout=5) as ws:  # type: ignore[arg-type]
                await ws.send('{"type": "state"}')
                await ws.recv()
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(handshake("https://evil.example")) == 403
    assert asyncio.run(handshake("null")) == 403
    assert asyncio.run(handshake(f"http://{host}")) == 101
    assert asyncio.run(handshake(None)) == 101


# --- what gets logged -----------------------------------------------------------------------------


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """Warnings and errors the in-process test server logs while the test runs."""
    with logged_warnings() as records:
        yield records


def test_invalid_utf8_closes_with_1007_and_logs_no_traceback(
    server_url: str, server_log: list[logging.LogRecord]
) -> None:
    async def send_bad_text() -> int | None:
        async with connect(ws_url(server_url)) as ws:
            # websockets checks what it sends: put the frame on the wire by hand (masked, as a client must).
            payload = b'{"type": "\xff"}'
            mask = b"\x00\x00\x00\x00"
            ws.transport.write(bytes([0x81, 0x80 | len(payload)]) + mask + payload)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            return ws.close_code

    assert asyncio.run(send_bad_text()) == 1007
    assert not [r for r in server_log if r.exc_info]


def test_a_client_leaving_mid_body_logs_no_traceback(server_url: str, server_log: list[logging.LogRecord]) -> None:
    port = int(server_url.rsplit(":", 1)[1])
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(
                b"POST /step HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"action": '
            )
    assert httpx.get(f"{server_url}/health").status_code == 200  # it has handled the three by now
    assert not [r for r in server_log if r.exc_info]


# --- result files ---------------------------------------------------------------------------------


def test_results_serves_result_files_only_and_as_data(make_server: Any, tmp_path: Path) -> None:
    (tmp_path / "episodes.jsonl").write_text('{"name": "x"}\n')
    (tmp_path / "report.md").write_text("# Report\n")
    for name in ("page.html", "image.svg", ".env", "notes.txt"):
        (tmp_path / name).write_text("<script>alert(1)</script>")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.md").write_text("secret")
    url = make_server(results_dir=str(tmp_path))
    with client(url) as http:
        for name, media_type in (("episodes.jsonl", "application/x-ndjson"), ("report.md", "text/markdown")):
            response = http.get(f"/results/{name}")
            assert response.status_code == 200 and response.headers["content-type"].startswith(media_type)
            assert response.headers["x-content-type-options"] == "nosniff"
            assert "sandbox" in response.headers["content-security-policy"]
        for name in ("page.html", "image.svg", ".env", "notes.txt", ".git/config.md", ""):
            assert http.get(f"/results/{name}").status_code == 404, name


# --- fair sessions --------------------------------------------------------------------------------


class ReplyOrder:
    """The order in which the server sends WebSocket replies, by client port, beside the moments a
    test sends a request. Counted in the server, so a test client that falls behind reading its
    sockets (it shares the interpreter with the server thread) does not count as unfairness."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def recording(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "websocket":
                return await app(scope, receive, send)
            port = scope["client"][1]

            async def sending(message: Message) -> None:
                if message["type"] == "websocket.send":
                    self.events.append(("reply", port))
                await send(message)

            await app(scope, receive, sending)

        return recording

    async def ask(self, ws: Any, frame: str) -> tuple[str, int]:
        """Send `frame` on `ws` and await its reply; returns it with how many replies the server
        sent to other sockets between the request leaving and the reply."""
        port = ws.local_address[1]
        self.events.append(("request", port))
        start = len(self.events)
        await ws.send(frame)
        reply = await ws.recv()
        mine = self.events.index(("reply", port), start)
        return reply, sum(1 for _, other in self.events[start:mine] if other != port)


async def test_a_pipelining_client_does_not_hold_up_its_neighbour(make_server: Any) -> None:
    """2,000 resets sent at once by one client (a few seconds of work): a neighbour's request is
    answered among the first of them, not after them. (bench/bench_fairness.py times it.)"""
    order = ReplyOrder()
    url = make_server(wrap=order.wrap)
    frames = 2000
    async with connect(ws_url(url)) as pipeliner, connect(ws_url(url)) as neighbour:
        await neighbour.send('{"type": "reset"}')
        await neighbour.recv()
        first = asyncio.Event()

        async def read_all() -> None:
            for _ in range(frames):
                await pipeliner.recv()
                first.set()

        reader = asyncio.create_task(read_all())
        for seed in range(frames):  # written back to back: the server reads them in a few chunks
            await pipeliner.send(json.dumps({"type": "reset", "data": {"task_id": "hard", "seed": seed}}))
        async with asyncio.timeout(120):
            await first.wait()
            reply, waited = await order.ask(neighbour, '{"type": "state"}')
            assert json.loads(reply)["type"] == "state"
            await reader
    assert waited < frames // 10, f"the neighbour waited for {waited} of {frames} frames"


async def test_many_pipelining_clients_take_turns_behind_a_neighbour(make_server: Any) -> None:
    """With 20 clients pipelining, round robin would make a neighbour wait for one frame of each of
    them; pipelining sessions take turns instead, so it waits for about one frame in all."""
    order = ReplyOrder()
    url = make_server(max_concurrent_envs=32, wrap=order.wrap)
    pipeliners, frames = 20, 60
    sockets = [await connect(ws_url(url)) for _ in range(pipeliners)]
    async with connect(ws_url(url)) as neighbour:
        await neighbour.send('{"type": "reset"}')
        await neighbour.recv()
        received = 0
        busy = asyncio.Event()

        async def read_all(ws: Any) -> None:
            nonlocal received
            for _ in range(frames):
                await ws.recv()
                received += 1
                if received >= pipeliners:
                    busy.set()

        readers = [asyncio.create_task(read_all(ws)) for ws in sockets]
        for ws in sockets:
            for seed in range(frames):
                await ws.send(json.dumps({"type": "reset", "data": {"task_id": "gen_expert", "seed": seed}}))
        waits = []
        async with asyncio.timeout(120):
            await busy.wait()
            for _ in range(5):
                waits.append((await order.ask(neighbour, '{"type": "state"}'))[1])
            await asyncio.gather(*readers)
    for ws in sockets:
        await ws.close()
    assert sorted(waits)[2] < pipeliners // 2, f"pipelined replies sent while the neighbour waited: {waits}"
