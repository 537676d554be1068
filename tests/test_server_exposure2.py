"""A public server against handshakes that never finish, broken JSON, forged headers and greedy peers,
over real sockets on loopback.

Each test replays an attack from outside and checks the server holds: every connection that has not
finished its handshake in time is closed, heads are capped however they arrive, unbalanced brackets
are a typed error on every channel with nothing in the log, forwarding headers are believed from
named proxies only and switch the implicit episode off, a loopback server answers to loopback names
only, one address holds a bounded share of the connections, and the page's policy names who may
frame it and where it may connect.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

import httpx
import pytest
from serving import logged_warnings
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from service_incident.client.base import ws_url
from service_incident.server.logs import BURST, ClientFaults
from service_incident.server.settings import SPACE_FRAME_ANCESTORS, Settings

JSON = {"Content-Type": "application/json"}
INSPECT = {"action": "inspect_logs", "target": "db"}
UNBALANCED = "[" * 975
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}  # msgspec recursed into this until the interpreter's limit


def client(url: str, address: str = "127.0.0.1", **options: Any) -> httpx.Client:
    """An HTTP client from a chosen loopback address: Linux routes all of 127/8 to this machine."""
    return httpx.Client(base_url=url, timeout=10, transport=httpx.HTTPTransport(local_address=address), **options)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def closed_by_server(connection: socket.socket, within_s: float) -> bytes:
    """What the server sent before it closed the connection; fails if it is still open after `within_s`."""
    connection.settimeout(within_s)
    received = b""
    try:
        while chunk := connection.recv(65536):
            received += chunk
    except TimeoutError:
        raise AssertionError(f"still open after {within_s:g} s, having sent {received[:80]!r}") from None
    except ConnectionResetError:
        pass
    return received


def handshake(headers: list[tuple[str, str]], host: str = "127.0.0.1") -> bytes:
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]
    return ("\r\n".join(lines + [f"{name}: {value}" for name, value in headers]) + "\r\n\r\n").encode()


# --- handshakes that never finish ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([("X-Long", "l" * 9000)], b"431"),  # one header line over websockets' 8 KiB
        ([(f"X-Many-{i}", "m") for i in range(200)], b"431"),  # over its 128 headers
    ],
    ids=["long-line", "many-headers"],
)
def test_a_websocket_handshake_websockets_refuses_is_answered_and_closed(
    make_server: Any, headers: list[tuple[str, str]], status: bytes
) -> None:
    url = make_server(http_timeout_s=30)  # answered at once, not at a deadline
    with socket.create_connection(("127.0.0.1", port_of(url))) as raw:
        raw.sendall(handshake(headers))
        assert closed_by_server(raw, 5).split(b" ", 2)[1] == status
    assert httpx.get(f"{url}/health").status_code == 200


def test_every_connection_not_through_its_handshake_in_time_is_closed(make_server: Any) -> None:
    """Heads in pieces, heads never finished, handshakes websockets refuses: all closed at 1 s."""
    url = make_server(http_timeout_s=1)
    port = port_of(url)
    stalled = []
    for i in range(60):
        raw = socket.create_connection(("127.0.0.1", port))
        kind = i % 3
        if kind == 0:
            raw.sendall(handshake([("X-Long", "l" * 9000)]))
        elif kind == 1:
            raw.sendall(handshake([])[:-2])  # the blank line that ends the head never comes
        else:
            raw.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nX-Slow: ")
        stalled.append(raw)
    started = time.monotonic()
    try:
        for raw in stalled:
            closed_by_server(raw, 10)
    finally:
        for raw in stalled:
            raw.close()
    assert time.monotonic() - started < 10


def test_a_head_over_the_cap_is_refused_when_sent_in_one_write(server_url: str) -> None:
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
        b"X-Filler-%d: %s\r\n" % (i, b"f" * 1000) for i in range(40)
    )
    with socket.create_connection(("127.0.0.1", port_of(server_url)), timeout=10) as raw:
        raw.sendall(head + b"\r\n")  # 40 KB at once: parsed whole before a byte count could see it
        reply = closed_by_server(raw, 5)
    assert reply.startswith(b"HTTP/1.1 400") and b"larger than 16384 bytes" in reply


# --- unbalanced brackets ----------------------------------------------------------------------------


def test_unbalanced_brackets_are_a_validation_error_on_every_channel(make_server: Any) -> None:
    url = make_server()
    with logged_warnings() as records, client(url) as http:
        for path in ("/step", "/reset"):
            response = http.post(path, content=UNBALANCED, headers=JSON)
            assert response.status_code == 422, path
            assert "deeper than 32" in response.json()["detail"][0]["msg"]
            nested = http.post(path, content='{"action": ' + UNBALANCED, headers=JSON)
            assert nested.status_code == 422, path
        rpc = http.post("/mcp", content=UNBALANCED, headers=JSON)  # OpenEnv's dialect
        assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700
        accept = {**JSON, "Accept": "application/json, text/event-stream"}
        session = http.post("/mcp", json=INITIALIZE, headers=accept).headers["Mcp-Session-Id"]
        in_session = http.post("/mcp", content=UNBALANCED, headers={**accept, "Mcp-Session-Id": session})
        assert in_session.json()["error"]["code"] == -32700  # an MCP session's, through the SDK
        assert http.get("/health").status_code == 200

        async def over_ws() -> None:
            async with connect(ws_url(url)) as ws:
                for frame in (UNBALANCED, '{"type": "step", "data": ' + UNBALANCED, "{" * 975):
                    await ws.send(frame)
                    reply = json.loads(await ws.recv())
                    assert reply["type"] == "error" and reply["data"]["code"] == "VALIDATION_ERROR"
                await ws.send('{"type": "reset"}')  # the session goes on
                assert json.loads(await ws.recv())["type"] == "observation"

        asyncio.run(over_ws())
    assert not [r for r in records if r.exc_info], "a client's broken JSON logged a traceback"


def test_repeated_client_faults_are_logged_at_a_bounded_rate(
    make_server: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    url = make_server()
    access = logging.getLogger("uvicorn.access")
    access.setLevel(logging.INFO)  # the test servers log warnings only
    try:
        with client(url) as http:
            for _ in range(3 * BURST):
                assert http.post("/step", content=UNBALANCED, headers=JSON).status_code == 422
            for _ in range(5):
                assert http.get("/health").status_code == 200  # no fault: always logged
    finally:
        access.setLevel(logging.WARNING)
    written = capfd.readouterr()
    log = (written.out + written.err).splitlines()
    assert len([line for line in log if '"POST /step' in line and " 422" in line]) == BURST
    assert len([line for line in log if '"GET /health' in line]) == 5
    assert "Traceback" not in written.err


def test_the_fault_filter_says_how_many_lines_it_left_out() -> None:
    now = [0.0]
    faults = ClientFaults(burst=2, window_s=10, clock=lambda: now[0])

    def access(status: int) -> logging.LogRecord:
        args = ("127.0.0.1:5000", "POST", "/step", "1.1", status)
        return logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)

    assert [faults.filter(access(422)) for _ in range(5)] == [True, True, False, False, False]
    assert faults.filter(access(200)) and faults.filter(access(500))  # not a client's fault
    now[0] = 11.0
    record = access(422)
    assert faults.filter(record) and record.getMessage().startswith("[3 more like this left out in 11 s]")


# --- forwarding headers ---------------------------------------------------------------------------


def test_forged_forwarding_headers_cannot_evict_another_clients_episode(make_server: Any) -> None:
    url = make_server(http_max_episodes=32, http_max_episodes_per_client=4, http_implicit_episode="false")
    with client(url, "127.0.0.2") as victim, client(url) as attacker:
        mine = victim.post("/reset", json={"task_id": "easy", "seed": 3}).json()["episode_id"]
        for i in range(100):  # a hundred "clients", all the same peer
            forged = {"X-Forwarded-For": f"10.0.{i // 250}.{i % 250}", "X-Real-IP": f"10.1.0.{i}"}
            assert attacker.post("/reset", json={}, headers=forged).status_code == 200
        assert victim.get("/health").json()["http_episodes"] == 1 + 4
        assert victim.get("/state", headers={"Episode-Id": mine}).status_code == 200


def test_a_named_proxy_is_believed(make_server: Any) -> None:
    """Behind a proxy the settings name, clients are told apart by the address it forwards."""
    url = make_server(
        http_max_episodes=32,
        http_max_episodes_per_client=4,
        http_implicit_episode="false",
        forwarded_allow_ips="127.0.0.1",
    )
    with client(url) as proxy:
        mine = proxy.post("/reset", json={}, headers={"X-Forwarded-For": "192.0.2.7"}).json()["episode_id"]
        for _ in range(20):
            proxy.post("/reset", json={}, headers={"X-Forwarded-For": "198.51.100.9"})
        assert proxy.get("/health").json()["http_episodes"] == 1 + 4
        assert proxy.get("/state", headers={"Episode-Id": mine}).status_code == 200


@pytest.mark.parametrize(
    "sign",
    [
        {"X-Forwarded-For": "203.0.113.5"},
        {"X-Forwarded-Host": "abcd.ngrok.app"},
        {"X-Forwarded-Proto": "https"},
        {"Forwarded": "for=203.0.113.5"},
        {"X-Real-IP": "203.0.113.5"},
        {"Via": "1.1 nginx"},
    ],
    ids=lambda sign: next(iter(sign)),
)
def test_a_forwarded_request_never_continues_the_latest_episode(server_url: str, sign: dict[str, str]) -> None:
    with client(server_url) as local, client(server_url) as remote:
        mine = local.post("/reset", json={"task_id": "easy", "seed": 9}).json()["episode_id"]
        for response in (remote.get("/state", headers=sign), remote.post("/step", json=INSPECT, headers=sign)):
            assert response.status_code == 400 and "Episode-Id" in response.json()["detail"]
            assert mine not in response.text
        assert local.get("/state").json()["step_count"] == 0  # the walkthrough still works without them


# --- DNS rebinding --------------------------------------------------------------------------------


def test_a_loopback_server_answers_to_loopback_names_only(make_server: Any) -> None:
    url = make_server(allowed_hosts="tunnel.example")
    port = port_of(url)
    with client(url) as http:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example"):
            for response in (
                http.post("/reset", json={}, headers={"Host": host, "Origin": f"http://{host}"}),
                http.get("/state", headers={"Host": host}),
                http.get("/web/", headers={"Host": host}),
            ):
                assert response.status_code == 421, host
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.2", f"[::1]:{port}", "app.localhost"):
            assert http.post("/reset", json={}, headers={"Host": host}).status_code == 200, host
        assert http.get("/health", headers={"Host": "tunnel.example"}).status_code == 200

    for host, status in (("evil.example", b"403"), (f"localhost:{port}", b"101")):  # no Origin: only Host tells
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(handshake([], host))
            assert raw.recv(4096).split(b" ", 2)[1] == status, host


# --- connections per address ----------------------------------------------------------------------


async def test_one_address_holds_a_bounded_share_of_connections_and_health_is_answered(make_server: Any) -> None:
    url = make_server(max_connections_per_client=4)

    async def health(address: str) -> int:
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address)) as http:
            return (await http.get(f"{url}/health")).status_code

    async def open_session(address: str) -> Any:
        ws = await connect(ws_url(url), open_timeout=5, local_addr=(address, 0))
        await ws.send('{"type": "reset"}')
        assert json.loads(await ws.recv())["type"] == "observation"
        return ws

    held = [await open_session("127.0.0.2") for _ in range(4)]
    with pytest.raises(InvalidStatus) as refused:
        await open_session("127.0.0.2")
    assert refused.value.response.status_code == 503
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2")) as http:
        assert (await http.post(f"{url}/reset", json={})).status_code == 503
    assert await health("127.0.0.2") == 200  # a monitor behind the same address still gets through
    other = await open_session("127.0.0.3")  # others are not held up
    await held.pop().close()

    async def admitted() -> bool:
        try:
            held.append(await open_session("127.0.0.2"))
            return True
        except InvalidStatus:
            return False

    deadline = time.monotonic() + 10
    while not await admitted():  # the closed one's slot comes back
        assert time.monotonic() < deadline, "a freed connection slot was not given back"
        await asyncio.sleep(0.05)
    for ws in (*held, other):
        await ws.close()


# --- the page's policy ----------------------------------------------------------------------------


def policy(url: str) -> dict[str, str]:
    header = httpx.get(f"{url}/web/").headers["content-security-policy"]
    return {part.split()[0]: part.split(" ", 1)[1] for part in (p.strip() for p in header.split(";")) if part}


def test_the_page_connects_to_its_own_server_and_the_allowed_origins_only(make_server: Any) -> None:
    assert policy(make_server())["connect-src"] == "'self'"
    narrowed = policy(make_server(allowed_origins="https://replays.example, https://other.example"))
    assert narrowed["connect-src"] == "'self' https://other.example https://replays.example"


def test_on_a_space_the_hub_may_frame_the_page_and_nobody_elsewhere(make_server: Any) -> None:
    space = Settings.load({"SPACE_ID": "someone/service-incident"})
    assert space.frame_ancestors == SPACE_FRAME_ANCESTORS == Settings.load({"SYSTEM": "spaces"}).frame_ancestors
    assert Settings.load({}).frame_ancestors == "'none'"
    assert Settings.load({"SPACE_ID": "a/b", "FRAME_ANCESTORS": "'self'"}).frame_ancestors == "'self'"
    assert policy(make_server(frame_ancestors=space.frame_ancestors))["frame-ancestors"] == SPACE_FRAME_ANCESTORS
    assert policy(make_server())["frame-ancestors"] == "'none'"
