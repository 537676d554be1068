"""An evaluation's records say how many times each episode was resumed, and its report says so: over a
real server whose connections are cut midway by a relay in front of it, the cut episodes carry on
from the server's log to the traces an undisturbed in-process run gives, and each record counts its
resumes (the client's own, on a lost connection, which the session alone never saw)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
from scale_support import disturbing, trace

from service_incident.client import LocalServer
from service_incident.harness import report
from service_incident.harness.evaluation import evaluate, reference_policy
from service_incident.harness.records import EpisodeSpec, decode, encode
from service_incident.harness.session import InProcess, WebSocket


class Relay:
    """A TCP relay on loopback to `upstream`, whose live connections `cut()` aborts (as a network that
    drops them would: no closing handshake either way); new connections pass again after it."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._live: set[asyncio.StreamWriter] = set()
        self.cuts = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        self._live |= {client_writer, server_writer}
        try:
            await asyncio.gather(self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer))
        finally:
            self._live -= {client_writer, server_writer}

    def cut(self) -> None:
        for writer in list(self._live):
            writer.transport.abort()
        self.cuts += 1

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            yield f"http://{host}:{port}"


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, int]]:
    with LocalServer() as server:  # its own process, with the in-memory episode log
        host, port = server.base_url.removeprefix("http://").split(":")
        yield host, int(port)


SPECS = [EpisodeSpec(name=f"expert-{seed}", task_id="gen_expert", incident_id=None, seed=seed) for seed in range(4)]
# The third answer of an episode: the connections are cut after it in the first episode, then the second.
CUT_AFTER = 3


async def test_each_record_counts_the_resumes_of_its_episode_after_a_cut_connection(
    upstream: tuple[str, int],
) -> None:
    relay = Relay(upstream)
    expert = reference_policy("expert")
    undisturbed = await evaluate(expert, SPECS, sessions=InProcess())
    cut_at = (CUT_AFTER, len(undisturbed[0].actions) + CUT_AFTER)
    cutting = disturbing(expert, cut_at, relay.cut)  # between two steps: the next finds its connection gone
    async with relay.running() as url:
        sessions = WebSocket(url)
        records = await evaluate(cutting, SPECS, agent="expert", sessions=sessions, concurrency=1)

    assert relay.cuts == len(cut_at) and sessions.resumes == 0  # none was a late reply
    assert [r.failure for r in records] == [None] * len(SPECS)
    assert [trace(r) for r in records] == [trace(r) for r in undisturbed]
    # One episode at a time: each cut fell in the episode playing then, which resumed once for it.
    assert [r.resumes for r in records] == [1, 1, 0, 0]
    assert [r.resumes for r in undisturbed] == [0] * len(SPECS)
    # The results file keeps the count, and the report says which episodes resumed.
    assert [r.resumes for r in decode(b"".join(map(encode, records)))] == [r.resumes for r in records]
    text = report.markdown(records)
    assert "- expert: 2 episode(s) resumed, 2 resume(s) in all: expert-0 (1), expert-1 (1)" in text
    assert "; 2 episode(s) resumed, 2 resume(s) in all" in report.summary_text(records)
    assert "## Resumed" not in report.markdown(undisturbed)
