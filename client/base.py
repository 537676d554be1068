"""A generic async OpenEnv client: one WebSocket session, typed with msgspec, low overhead per step.

Wire-compatible with any OpenEnv server (stock `create_app` servers included): it speaks `/ws` as
OpenEnv defines it, with the frames of `service_incident.wire`, which the server uses
too. It improves on the stock client where that one is weak:

* A call that times out or is cancelled never shifts later replies onto the wrong request. The
  protocol has no request ids, but the server answers strictly in order, so the client remembers
  the frame left unanswered. If its late reply has come by the next call, it is skipped and the
  session (and the episode in it) goes on. If it has not, the session is out of step: that call and
  every later one raise `Desynchronised` at once, without sending anything, until `reset()` (a new
  episode on a new session) or `resume()` (this episode on a new session, from the server's episode
  log; the log says whether the lost step was taken). No call waits a second timeout behind a reply
  that may never come.
* Server errors raise `ServerError` carrying OpenEnv's error code (`CapacityReached` for a full
  server, on every attempt); a closed socket raises `SessionClosed` with the close code and reason
  (1001 idle timeout, 1009 frame too big, 1011 no answer to pings, ...); a server that cannot be
  reached raises `ConnectionFailed` with the URL, `ServerBusy` when it (or a balancer before it)
  refuses the handshake with 503. A server that stops answering is noticed within
  the ping interval plus twice the ping timeout (one for the pong, at most one for the close).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from http import HTTPStatus
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar, get_args, get_origin
from urllib.parse import urlsplit

import msgspec
from msgspec import Struct
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.http11 import Response

from service_incident.wire import (
    CloseMessage,
    ErrorCode,
    ErrorFrame,
    ObservationFrame,
    ResetMessage,
    Resume,
    ResumedFrame,
    ResumeMessage,
    StateFrame,
    StateMessage,
    StepMessage,
    is_loopback,
)

from .polling import poll_for

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")


class EnvClientError(RuntimeError):
    """Anything the client cannot turn into a result."""


class ServerError(EnvClientError):
    """An error frame from the server; `code` is OpenEnv's error code (VALIDATION_ERROR, ...)."""

    def __init__(self, code: str, message: str, data: Mapping[str, Any]) -> None:
        # Same wording as the stock client's RuntimeError, so code matching on it keeps working.
        super().__init__(f"Server error: {message} (code: {code})")
        self.code = code
        self.message = message
        self.data = dict(data)


class CapacityReached(ServerError):
    """The server has no free session slot; it closed the socket. Retry later or elsewhere."""


class EpisodeLost(ServerError):
    """The connection was lost and the episode could not be resumed: the server's store no longer
    has it (expired, evicted, or kept by a process that died without a shared store). Later calls
    raise it at once; `reset()` starts a new episode."""

    # How an evaluation knows to report the episode apart, without importing the client.
    episode_lost = True


class SessionClosed(EnvClientError, ConnectionError):
    """The socket is closed, by the server or by the client giving up on it (a ping unanswered, a
    reply that never came); `reset()` opens a new session, `resume()` continues the episode on one
    where the server still holds it."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"session closed (code {code}{': ' + reason if reason else ''})")
        self.code = code
        self.reason = reason


class Desynchronised(SessionClosed):
    """The session is out of step with the server: a frame sent earlier is still unanswered (its call
    timed out or was cancelled, and the reply had not come by the next call; or it was cut off while
    being sent), so no later reply could be matched to its request. The client dropped the socket;
    every call raises this at once until `reset()` starts a new episode or `resume()` carries this
    one on. A `SessionClosed` (code None), so code that resets on a closed session keeps working."""

    def __init__(self, why: str) -> None:
        super().__init__(None, why)
        self.args = (f"out of step with the server ({why}): reset() starts a new episode, resume() continues this one",)


class ConnectionFailed(EnvClientError, ConnectionError):
    """No session could be opened at `url`: nothing listening, no answer in time, or a refused handshake."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot open a session at {url}: {reason}")
        self.url = url
        self.reason = reason


class ServerBusy(ConnectionFailed):
    """The handshake was refused with 503 Service Unavailable: this address already holds as many
    connections as the server allows one address (MAX_CONNECTIONS_PER_CLIENT), or a balancer has no
    server up behind it. `detail` is the server's own text; `retry_after_s` its Retry-After, if any.
    Close some sessions, or retry later; a lost session's resume retries it on its own."""

    def __init__(self, url: str, detail: str, retry_after_s: float | None) -> None:
        wait = f" (retry after {retry_after_s:g} s)" if retry_after_s is not None else ""
        super().__init__(url, f"the server is busy, HTTP 503: {detail or 'Service Unavailable'}{wait}")
        self.detail = detail
        self.retry_after_s = retry_after_s


class NoReply(EnvClientError, TimeoutError):
    """No reply within the message timeout. Unless the late reply has come by then, the next call
    raises `Desynchronised`."""


class StepResult(Struct, Generic[ObsT]):
    """One reset or step: exactly the `data` of OpenEnv's observation frame."""

    observation: ObsT
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None
    # A reset's reply from a server that logs episodes: the credential that resumes this one.
    episode_id: str | None = None


_encode = msgspec.json.Encoder().encode
# What a frame left unanswered was, so that skipping its late reply keeps the resume count right.
Sent = Literal["reset", "step", "state"]
_STATE = _encode(StateMessage())
RESUME_RETRY_S = 0.2
_CLOSE = _encode(CloseMessage())


def _decoder(obs_type: Any, state_type: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(
        ObservationFrame[StepResult[obs_type]]
        | StateFrame[state_type]
        | ResumedFrame[StepResult[obs_type]]
        | ErrorFrame[dict[str, Any]]
    )


# Close codes after which a session is resumed elsewhere rather than given up: going away (a
# draining server), service restart (uvicorn's shutdown), and none at all (the process died).
RESUMABLE_CLOSES = frozenset({1001, 1006, 1012, 1013, None})


def ws_url(base_url: str) -> str:
    """OpenEnv's rule: http(s) -> ws(s), a bare host -> ws, then `/ws` on the server root."""
    url = base_url.rstrip("/")
    for http, ws in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(http):
            return ws + url[len(http) :] + "/ws"
    if url.startswith(("ws://", "wss://")):
        return url + "/ws"
    return f"ws://{url}/ws"


class EnvClient(Generic[ActT, ObsT, StateT]):
    """An async client for one environment session.

    Subclass it with concrete types, `class MyEnv(EnvClient[MyAction, MyObservation, MyState])`,
    and replies decode straight into them (msgspec Structs, dicts, or anything msgspec can decode);
    the bare `EnvClient` works with plain dicts. Use `async with`, or `.sync()` from blocking code.
    One call is in flight at a time; concurrent calls on one client wait their turn.
    """

    _decoder: ClassVar[msgspec.json.Decoder[Any]] = _decoder(Any, Any)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is EnvClient:
                _, obs_type, state_type = get_args(base)
                cls._decoder = _decoder(obs_type, state_type)

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_message_bytes: int = 100 * 1024 * 1024,
        ping_interval_s: float | None = 20.0,
        ping_timeout_s: float | None = 20.0,
        headers: Mapping[str, str] | None = None,
        compression: bool = False,
        resume_timeout_s: float = 30.0,
        busy_poll_us: int = 1000,
    ) -> None:
        self.base_url = base_url
        self.url = ws_url(base_url)
        self.connect_timeout_s = connect_timeout_s
        self.message_timeout_s = message_timeout_s
        self.max_message_bytes = max_message_bytes
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.headers = dict(headers or {})
        # Off by default: per-message deflate costs more CPU per step than a few KB save on a LAN.
        self.compression = compression
        # How long a lost session keeps trying to reach a server that can resume its episode.
        self.resume_timeout_s = resume_timeout_s
        # After each frame sent, the loop polls for the reply this long before it sleeps: a step's
        # reply comes within a few hundred µs, and a process that slept meets it later
        # (client/polling.py). 0: sleep at once.
        if busy_poll_us < 0:
            raise ValueError(f"busy_poll_us must be 0 or more, not {busy_poll_us}")
        self.busy_poll_s = busy_poll_us / 1e6
        self._ws: ClientConnection | None = None
        self._unanswered: Sent | None = None  # the frame whose call gave up before its reply came
        self._lost: EnvClientError | None = None  # why the session ended, until a reset
        self._lock = asyncio.Lock()
        # What resumes the episode on a new socket: its id and the steps answered since its reset.
        self._episode_id: str | None = None
        self._steps = 0
        self.resumes = 0  # how many times this client resumed its episode

    @property
    def steps(self) -> int:
        """Steps of this episode answered so far, those a resume found the server took included."""
        return self._steps

    # --- hooks for subclasses ---

    def _step_payload(self, action: ActT) -> Any:
        """The `data` of a step frame; msgspec encodes Structs and builtins as they are."""
        return action

    def _parse_result(self, result: StepResult[ObsT]) -> StepResult[ObsT]:
        return result

    # --- session ---

    async def connect(self) -> Self:
        if self._ws is not None:
            return self
        try:
            self._ws = await connect(
                self.url,
                open_timeout=self.connect_timeout_s,
                max_size=self.max_message_bytes,
                ping_interval=self.ping_interval_s,
                ping_timeout=self.ping_timeout_s,
                # A peer that stopped answering pings will not answer a close either: waiting the
                # default 10 s for it would hide a frozen server that long.
                close_timeout=self.ping_timeout_s if self.ping_timeout_s is not None else 10.0,
                additional_headers=self.headers,
                compression="deflate" if self.compression else None,
                # Proxies from the environment must not capture traffic to this machine.
                proxy=None if is_loopback(urlsplit(self.url).hostname or "") else True,
            )
        except InvalidStatus as exc:
            if exc.response.status_code == HTTPStatus.SERVICE_UNAVAILABLE:
                raise _busy(self.url, exc.response) from None
            raise ConnectionFailed(self.url, f"the server answered HTTP {exc.response.status_code}") from None
        except TimeoutError:
            raise ConnectionFailed(self.url, f"no handshake within {self.connect_timeout_s:g} s") from None
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise ConnectionFailed(self.url, str(exc) or type(exc).__name__) from None
        return self

    async def reset(self, **options: Any) -> StepResult[ObsT]:
        """Start an episode. A reset begins afresh anyway, so it reopens a session the server closed."""
        return await self._reset(options)

    async def step(self, action: ActT) -> StepResult[ObsT]:
        return self._observation(await self._call(_encode(StepMessage(self._step_payload(action))), step=True))

    async def state(self) -> StateT:
        frame = await self._call(_STATE)
        if not isinstance(frame, StateFrame):
            raise EnvClientError(f"expected a state frame, got {type(frame).__name__}")
        return frame.data

    async def resume(self) -> StepResult[ObsT]:
        """Carry this client's episode on in a new session, from the server's episode log: the way
        back from `Desynchronised` (or any lost session) that keeps the episode.

        Returns the result of the last step the episode took: the lost step's, if the server took it,
        else the one before. `EpisodeLost` if the server no longer has the episode. After
        `ConnectionFailed` or `NoReply` the session stays out of step, and `resume()` may be tried again.
        """
        async with self._lock:
            if self._episode_id is None:
                raise EnvClientError("no episode to resume: none started, or the server names none; reset() starts one")
            self._abandon()
            self._lost = Desynchronised("resume() has not finished")
            await self.connect()
            ws = self._ws
            assert ws is not None
            self.resumes += 1
            try:
                async with asyncio.timeout(self.message_timeout_s):
                    resumed = await self._resumed(ws)
            except TimeoutError:
                self._abandon()
                raise NoReply(f"no reply to resume from {self.url} within {self.message_timeout_s:g} s") from None
            except ConnectionClosed as closed:
                self._abandon()
                frame = closed.rcvd or closed.sent
                raise SessionClosed(frame.code if frame else None, frame.reason if frame else "") from None
            self._lost, self._steps = None, resumed.data.steps
            return self._parse_result(resumed.data.result)

    async def close(self) -> None:
        """Say goodbye (the server frees the session at once) and close the socket. Idempotent."""
        ws, self._ws, self._lost, self._episode_id, self._unanswered = self._ws, None, None, None, None
        if ws is None:
            return
        with contextlib.suppress(ConnectionClosed):  # already closed by the server
            await ws.send(_CLOSE, text=True)
        await ws.close()

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def sync(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """A blocking facade over this client, for notebooks and plain training loops."""
        return SyncEnvClient(self)

    # --- one request, one reply ---

    async def _reset(self, data: Any) -> StepResult[ObsT]:
        result = self._observation(await self._call(_encode(ResetMessage(data)), fresh=True))
        self._episode_id, self._steps = result.episode_id, 0
        return result

    def _abandon(self) -> None:
        """Drop the socket without a closing handshake; the server frees the session when it notices.
        A reply still owed on it will never be read."""
        ws, self._ws, self._unanswered = self._ws, None, None
        if ws is not None:
            ws.transport.abort()

    async def _call(self, message: bytes, *, fresh: bool = False, step: bool = False) -> Any:
        """Send one frame and read its reply. `fresh` (a reset) may start over on a new session; a
        `step` is counted, so the episode can be resumed at it."""
        async with self._lock:
            frame = await self._exchange(message, fresh, step)
        if step:
            self._steps += 1
        return frame

    async def _exchange(self, message: bytes, fresh: bool, step: bool) -> Any:
        if fresh:
            self._episode_id = None
            if self._lost is not None or self._unanswered is not None:
                self._abandon()  # a reset begins afresh anyway: never wait on late replies for it
                self._lost = None
        if self._lost is not None:
            raise self._lost
        if self._unanswered is not None:
            await self._skip_late_reply()
        await self.connect()
        ws = self._ws
        assert ws is not None
        try:
            await ws.send(message, text=True)
        except ConnectionClosed:
            pass  # a refused session closes right after its error frame: the read below gets it
        except BaseException:
            # Interrupted mid-send: whether the server got the frame is unknown, so no reply can be
            # matched any more. Drop the socket (the server frees the session).
            self._abandon()
            self._lost = Desynchronised("a call was interrupted while sending its frame")
            raise
        self._unanswered = "reset" if fresh else "step" if step else "state"
        if self.busy_poll_s:
            poll_for(self.busy_poll_s)
        try:
            async with asyncio.timeout(self.message_timeout_s):
                raw = await ws.recv(decode=False)
        except TimeoutError:
            raise NoReply(f"no reply from {self.url} within {self.message_timeout_s:g} s") from None
        except ConnectionClosed as closed:
            self._ws, self._unanswered = None, None
            frame = closed.rcvd or closed.sent  # the server's close, else ours (1011: no pong)
            code = frame.code if frame else None
            if code in RESUMABLE_CLOSES and (fresh or self._episode_id is not None):
                return await self._resume(message, step, fresh)
            self._lost = SessionClosed(code, frame.reason if frame else "")
            raise self._lost from None
        self._unanswered = None
        return self._decode(raw)

    async def _skip_late_reply(self) -> None:
        """Read and drop the reply owed to a call that gave up, if it has come meanwhile. If it has
        not, the session is out of step for good: fail now rather than wait for a reply that may
        never come (a frozen server, a lost frame), and keep failing until a reset or a resume."""
        ws = self._ws
        assert ws is not None
        try:
            async with asyncio.timeout(0):  # only what has already arrived
                raw = await ws.recv(decode=False)
        except (TimeoutError, ConnectionClosed):
            late = self._unanswered
            self._abandon()
            self._lost = Desynchronised(f"the reply to an earlier {late} frame has not come")
            raise self._lost from None
        late, self._unanswered = self._unanswered, None
        with contextlib.suppress(msgspec.DecodeError):
            frame = self._decoder.decode(raw)
            if isinstance(frame, ObservationFrame) and late == "step":
                self._steps += 1  # the server took that step: a resume must count it
            elif isinstance(frame, ObservationFrame) and late == "reset":
                self._episode_id, self._steps = frame.data.episode_id, 0  # its episode is the one played now

    async def _resume(self, pending: bytes, step: bool, fresh: bool) -> Any:
        """Carry the episode on in a new session (this server's process, or another sharing its store)
        and answer the call that was in flight: the log says whether the server took it. A reset
        (`fresh`) needs no episode: it is sent again, and starts its episode there."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.resume_timeout_s
        while True:
            self._abandon()
            try:
                await self.connect()
            except ConnectionFailed:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(RESUME_RETRY_S)
                continue
            try:
                return await self._resume_on(pending, step, fresh)
            except ConnectionClosed as closed:
                # A balancer may hand the new connection to a server that is draining too: that one
                # closes it as resumable, and the next connection may find a server that stays.
                frame = closed.rcvd or closed.sent
                if frame is not None and frame.code in RESUMABLE_CLOSES and loop.time() <= deadline:
                    await asyncio.sleep(RESUME_RETRY_S)
                    continue
                lost = "the connection went again while resuming; reset() starts over"
            except TimeoutError:
                lost = "no reply while resuming; reset() starts over"
            self._abandon()
            self._lost = SessionClosed(None, lost)
            raise self._lost from None

    async def _resume_on(self, pending: bytes, step: bool, fresh: bool) -> Any:
        """One attempt of `_resume` on the socket just opened."""
        ws = self._ws
        assert ws is not None
        self.resumes += 1
        async with asyncio.timeout(self.message_timeout_s):
            if fresh or self._episode_id is None:
                await ws.send(pending, text=True)
                return self._decode(await ws.recv(decode=False))
            resumed = await self._resumed(ws)
            if step and resumed.data.steps == self._steps + 1:
                return ObservationFrame(resumed.data.result)  # taken before the connection went
            await ws.send(pending, text=True)
            return self._decode(await ws.recv(decode=False))

    async def _resumed(self, ws: ClientConnection) -> ResumedFrame[StepResult[ObsT]]:
        """Ask the server, on a socket just opened, to carry this client's episode on where it left off."""
        assert self._episode_id is not None
        await ws.send(_encode(ResumeMessage(Resume(self._episode_id, self._steps))), text=True)
        resumed = self._decode(await ws.recv(decode=False), lost=True)
        if not isinstance(resumed, ResumedFrame):
            raise EnvClientError(f"expected a resumed frame, got {type(resumed).__name__}")
        return resumed

    def _decode(self, raw: bytes | str, lost: bool = False) -> Any:
        try:
            frame = self._decoder.decode(raw)
        except msgspec.DecodeError as exc:  # validation errors included
            raise EnvClientError(f"unexpected reply from the server: {exc}") from None
        if isinstance(frame, ErrorFrame):
            data = frame.data
            code, text = str(data.get("code", "UNKNOWN")), str(data.get("message", "Unknown error"))
            if code == ErrorCode.CAPACITY_REACHED:
                # The server closes the socket after this frame: the next call must connect afresh
                # (and may find a free slot) rather than read that close.
                self._abandon()
                raise CapacityReached(code, text, data)
            if lost or code == ErrorCode.UNKNOWN_EPISODE:
                self._abandon()
                self._lost = EpisodeLost(code, text, data)
                raise self._lost
            raise ServerError(code, text, data)
        return frame

    def _observation(self, frame: Any) -> StepResult[ObsT]:
        if not isinstance(frame, ObservationFrame):
            raise EnvClientError(f"expected an observation frame, got {type(frame).__name__}")
        return self._parse_result(frame.data)


def _busy(url: str, response: Response) -> ServerBusy:
    detail = (response.body or b"")[:200].decode("utf-8", "replace").strip()
    retry_after = response.headers.get("Retry-After", "")
    return ServerBusy(url, detail, float(retry_after) if retry_after.isdigit() else None)


class SyncEnvClient(Generic[ActT, ObsT, StateT]):
    """Blocking calls on an `EnvClient`, run on a private event loop thread (works inside Jupyter,
    whose own loop is already running). `with env.sync() as e:` closes the session and the thread."""

    def __init__(self, client: EnvClient[ActT, ObsT, StateT]) -> None:
        self.client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="EnvClient.sync", daemon=True)
        self._thread.start()

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result()

    def connect(self) -> Self:
        self._run(self.client.connect())
        return self

    def reset(self, **options: Any) -> StepResult[ObsT]:
        return self._run(self.client.reset(**options))

    def step(self, action: ActT) -> StepResult[ObsT]:
        return self._run(self.client.step(action))

    def state(self) -> StateT:
        return self._run(self.client.state())

    def resume(self) -> StepResult[ObsT]:
        return self._run(self.client.resume())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
