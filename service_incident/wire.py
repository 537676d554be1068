"""The OpenEnv wire format, for the server and the client alike: frames, error codes, their JSON.

Sans-I/O, in the manner of websockets' `frames.py`: it turns text into typed messages and typed
results into text, and knows nothing of sockets. It sits beside the core rather than in the server so
that the client imports the frames without the server: each is defined once, and this module loads
msgspec and the core's models only. Decoders and encoders are built once at import; a well-formed
frame costs one decode.

Everything a client sends is bounded before it is believed: nesting depth (`MAX_JSON_DEPTH`), and
the length of any piece of it an error message quotes back (`clip`).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any, Generic, TypeVar, get_args, get_type_hints

import msgspec
from msgspec import Meta, Raw, Struct

from service_incident.models import (
    MAX_EPISODE_ID_CHARS,
    VIEW_FIELD_PREFIX,
    InvalidAction,
    InvalidReset,
    Observation,
    ResetRequest,
    State,
)

T = TypeVar("T")


class ErrorCode(StrEnum):
    """OpenEnv's `WSErrorCode` values, spelled exactly as stock clients expect them."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"
    # Not OpenEnv's: a `resume` naming an episode the store does not (any longer) have.
    UNKNOWN_EPISODE = "UNKNOWN_EPISODE"


# After these the server closes the socket (code 1000), as stock OpenEnv does; others keep it open.
FATAL_CODES = frozenset({ErrorCode.CAPACITY_REACHED, ErrorCode.FACTORY_ERROR, ErrorCode.SESSION_ERROR})

# Every message of this protocol is a few levels deep; msgspec recurses per level and would hit the
# interpreter's recursion limit (a RecursionError, not a decode error) at about a thousand.
MAX_JSON_DEPTH = 32
# The most characters an error message (which may quote the client's input) or a field name in its
# location runs to: enough to see the mistake, too few to let a megabyte key come back as megabytes.
MAX_QUOTE_CHARS = 400
MAX_FIELD_CHARS = 100

# An episode id travels in the `Episode-Id` header: visible ASCII only, and bounded like any reset's.
# The HTTP API checks it in a body (the type) and in the header (the function) by this one pattern.
_EPISODE_ID_PATTERN = rf"^[!-~]{{1,{MAX_EPISODE_ID_CHARS}}}$"
EpisodeId = Annotated[str, Meta(pattern=_EPISODE_ID_PATTERN)]
EPISODE_ID_RULE = f"1 to {MAX_EPISODE_ID_CHARS} visible ASCII characters"
_EPISODE_ID = re.compile(_EPISODE_ID_PATTERN)


def clip(text: str, limit: int = MAX_QUOTE_CHARS) -> str:
    """`text`, cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def valid_episode_id(value: str) -> bool:
    return _EPISODE_ID.match(value) is not None


# --- client -> server ---------------------------------------------------------------------------
# The server decodes these; the client builds them with any `data` (msgspec encodes what is there).


class _Message(Struct, tag_field="type", forbid_unknown_fields=True):
    pass


class ResetMessage(_Message, tag="reset"):
    data: ResetRequest = ResetRequest()


class StepMessage(_Message, tag="step"):
    # Kept raw so the core's `parse_action` validates it and words the error.
    data: Raw


class StateMessage(_Message, tag="state"):
    pass


class CloseMessage(_Message, tag="close"):
    pass


class McpMessage(_Message, tag="mcp"):
    data: Any


class Resume(Struct, forbid_unknown_fields=True):
    """Carry on an episode on a new socket: its id (from the reset reply) and the steps the client
    has seen answered (the reply to one more may have been lost on the way)."""

    episode_id: EpisodeId
    steps: Annotated[int, Meta(ge=0)]


class ResumeMessage(_Message, tag="resume"):
    data: Resume


ClientMessage = ResetMessage | StepMessage | StateMessage | CloseMessage | McpMessage | ResumeMessage
MESSAGE_TYPES = frozenset(cls.__struct_config__.tag for cls in get_args(ClientMessage))

_message_decoder = msgspec.json.Decoder(ClientMessage)
_any_decoder = msgspec.json.Decoder()


class ErrorDetail(Struct):
    """One validation problem, shaped like the pydantic error entries stock OpenEnv sends."""

    type: str
    loc: list[str | int]
    msg: str


class ProtocolError(Exception):
    """A frame or request the server refuses; becomes an error frame (WebSocket) or a 4xx (HTTP)."""

    def __init__(self, code: ErrorCode, message: str, errors: list[ErrorDetail] | None = None) -> None:
        message = clip(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.errors = errors

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_CODES


class TooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH."""


def _nested_at_most(levels: int) -> str:
    """A regex for a run of matched brackets nested at most `levels` deep; possessive, so it never
    backtracks and matches in one pass."""
    pattern = ""
    for _ in range(levels):
        pattern = rf"(?:\({pattern}\))*+"
    return pattern


# Matches where the depth first passes MAX_JSON_DEPTH: at depth d, the brackets before the next
# opening one are matched and at most MAX_JSON_DEPTH - d deep. It stops there, however long the rest.
_DEEPER = re.compile((r"\(".join(_nested_at_most(levels) for levels in range(MAX_JSON_DEPTH, -1, -1)) + r"\(").encode())
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_AS_PARENTHESES = bytes.maketrans(b"[]{}", b"()()")


def check_depth(text: str | bytes) -> None:
    """Raise TooDeep if `text` nests arrays and objects deeper than MAX_JSON_DEPTH.

    Cheap where it matters: a document with few brackets cannot be deep, and that is every frame a
    well-behaved client sends. Otherwise strings are cut out and the brackets walked once by a regex,
    all in C, which stops where the depth passes the limit. Balanced or not: a decoder recurses into
    `[[[` before it finds the end missing. Past the first error of a broken document the count may
    be wrong, but only ever for a document that is refused either way.
    """
    opened = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opened <= MAX_JSON_DEPTH:
        return
    data = text.encode(errors="surrogatepass") if isinstance(text, str) else text
    if b"\\" in data:  # escaped backslashes, then escaped quotes: what is left of a quote delimits a string
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(data.split(b'"')[::2])
    if _DEEPER.match(outside_strings.translate(_AS_PARENTHESES, _NOT_BRACKET)):
        raise TooDeep(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def decode_message(text: str | bytes) -> ClientMessage:
    """One frame to a typed message, or a ProtocolError with the code stock OpenEnv would use."""
    try:
        check_depth(text)
        return _message_decoder.decode(text)
    except TooDeep as exc:
        raise invalid("Invalid message", str(exc)) from None
    except msgspec.ValidationError as exc:
        raise _classify(text, exc) from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from None


def decode_json(body: bytes, type: Any = Any, what: str = "body") -> Any:
    """A request body to `type`; VALIDATION_ERROR (422 over HTTP) for bad JSON, depth or shape."""
    try:
        check_depth(body)
        return msgspec.json.decode(body, type=type) if type is not Any else _any_decoder.decode(body)
    except TooDeep as exc:
        raise invalid("Invalid JSON", str(exc)) from None
    except msgspec.ValidationError as exc:
        raise invalid(f"Invalid {what}", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise invalid("Invalid JSON", str(exc)) from None


def _classify(text: str | bytes, exc: msgspec.ValidationError) -> ProtocolError:
    # Only frames that failed the typed decode get here, so the second, untyped decode costs nothing
    # on the hot path.
    try:
        frame = _any_decoder.decode(text)
    except msgspec.DecodeError as bad:
        return ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {bad}")
    if not isinstance(frame, dict):
        got = "an array" if isinstance(frame, list) else type(frame).__name__
        return ProtocolError(ErrorCode.SESSION_ERROR, f"A message must be a JSON object, got {got}")
    kind = frame.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        return ProtocolError(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {'' if kind is None else kind}")
    return invalid("Invalid message", str(exc))


def invalid(prefix: str, text: str) -> ProtocolError:
    """A VALIDATION_ERROR whose `errors` point at the offending field."""
    return ProtocolError(ErrorCode.VALIDATION_ERROR, f"{prefix}: {text}", [error_detail(text)])


def core_error(exc: Exception) -> ProtocolError | None:
    """The protocol error for an exception the core raises on bad input; None for anything else.

    The one mapping from core errors to protocol errors, for the WebSocket, HTTP and MCP alike.
    """
    match exc:
        case InvalidAction():
            return invalid("Invalid action", str(exc))
        case InvalidReset():
            return invalid("Invalid reset", str(exc))
        case msgspec.ValidationError():
            return invalid("Invalid message", str(exc))
    return None


_PATH = re.compile(r" - at `\$([^`]*)`")
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_FIELD = re.compile(r"^Object (missing required|contains unknown) field `([^`]+)`")


def error_detail(text: str) -> ErrorDetail:
    """Turn msgspec's one-line message ("... - at `$.data.target`") into a located error entry."""
    loc: list[str | int] = []
    path = _PATH.search(text)
    if path:
        for match in _PATH_PART.finditer(path.group(1)):
            field, index = match.groups()
            if field is not None:
                loc.append(clip(field, MAX_FIELD_CHARS))
            elif index is not None:
                loc.append(int(index))
    field = _FIELD.match(text)
    if field:
        loc.append(clip(field.group(2), MAX_FIELD_CHARS))
        kind = "missing" if field.group(1) == "missing required" else "extra_forbidden"
    else:
        kind = "invalid"
    return ErrorDetail(kind, loc, clip(text.split(" - at `", 1)[0]))


# --- server -> client ---------------------------------------------------------------------------
# Generic in their payload: the server fills them with its types, a client decodes them into its own.


class StepPayload(Struct, omit_defaults=True):
    """An observation as OpenEnv sends it: reward and done beside it, metadata inside and beside it."""

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any] | None = None


class HttpStepPayload(StepPayload, kw_only=True):
    """Over HTTP the episode id comes along, so a stateless caller can continue the episode.

    It is null only for a step sent before any HTTP episode exists."""

    episode_id: str | None


class _Frame(Struct, tag_field="type"):
    pass


class ObservationFrame(_Frame, Generic[T], tag="observation"):
    data: T


class StateFrame(_Frame, Generic[T], tag="state"):
    data: T


class McpFrame(_Frame, Generic[T], tag="mcp"):
    data: T


class Resumed(Struct, Generic[T]):
    """The reply to `resume`: the steps the episode has taken and the observation after the last."""

    steps: int
    result: T


class ResumedFrame(_Frame, Generic[T], tag="resumed"):
    data: Resumed[T]


class ErrorData(Struct, omit_defaults=True):
    message: str
    code: ErrorCode
    errors: list[ErrorDetail] | None = None
    active_sessions: int | None = None
    max_sessions: int | None = None


class ErrorFrame(_Frame, Generic[T], tag="error"):
    data: T


_OUTSIDE_OBSERVATION = ("reward", "done")


def _split(observation: Observation) -> tuple[dict[str, Any], float | None, bool, dict[str, Any] | None]:
    body = msgspec.structs.asdict(observation)
    for name in _OUTSIDE_OBSERVATION:
        del body[name]
    return body, observation.reward, observation.done, observation.metadata or None


def step_payload(observation: Observation) -> StepPayload:
    return StepPayload(*_split(observation))


def http_step_payload(observation: Observation, episode_id: str | None) -> HttpStepPayload:
    return HttpStepPayload(*_split(observation), episode_id=episode_id)


_encoder = msgspec.json.Encoder()
encode = _encoder.encode

# The views whose encoding is worth keeping: those of numbers (metrics), whose floats are most of what
# encoding a frame costs. A text view is one copy to encode, cheaper than looking its bytes up.
SPLICED_VIEWS = tuple(
    name
    for name, hint in get_type_hints(Observation).items()
    if name.startswith(VIEW_FIELD_PREFIX) and get_args(hint)[1] is not str
)


class FrameEncoder:
    """One session's observation frames (a socket's, or an HTTP episode's replies), each encoded once,
    with the bytes of the views earlier frames carried spliced in rather than encoded again.

    The observation is cumulative: every view taken so far is in every later frame, so a plain encode
    costs more each step. But a view is fixed once taken (a later look replaces it with another object,
    never changes it), so its bytes are kept by the object's identity while frames show it, and go into
    the next frame as `msgspec.Raw`: the same bytes as a plain encode (the wire tests compare the two
    over real episodes), without formatting its numbers again. Holding the view keeps its identity from
    being reused; what the latest frame did not show is let go, so a session keeps one frame's views.
    """

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[int, tuple[object, Raw]] = {}

    def observation_text(self, observation: Observation) -> str:
        return encode(ObservationFrame(StepPayload(*self._payload(observation)))).decode()

    def reset_text(self, observation: Observation, episode_id: str) -> str:
        """A reset's reply: with the id that resumes the episode on another socket."""
        return encode(ObservationFrame(HttpStepPayload(*self._payload(observation), episode_id=episode_id))).decode()

    def resumed_text(self, observation: Observation, steps: int) -> str:
        return encode(ResumedFrame(Resumed(steps, StepPayload(*self._payload(observation))))).decode()

    def http_body(self, observation: Observation, episode_id: str | None) -> bytes:
        """An HTTP reply's body: the payload with the episode's id, as no frame wraps it."""
        return encode(HttpStepPayload(*self._payload(observation), episode_id=episode_id))

    def _payload(self, observation: Observation) -> tuple[dict[str, Any], float | None, bool, dict[str, Any] | None]:
        body, reward, done, metadata = _split(observation)
        kept, shown = self._kept, {}
        for name in SPLICED_VIEWS:
            spliced = {}
            for service, view in body[name].items():
                entry = kept.get(id(view))
                if entry is None:
                    entry = (view, Raw(encode(view)))
                shown[id(view)] = entry
                spliced[service] = entry[1]
            body[name] = spliced
        self._kept = shown
        return body, reward, done, metadata


def state_text(state: State) -> str:
    return encode(StateFrame(state)).decode()


def mcp_text(response: Any) -> str:
    return encode(McpFrame(response)).decode()


def error_text(error: ProtocolError) -> str:
    return encode(ErrorFrame(ErrorData(error.message, error.code, error.errors))).decode()


def capacity_text(active: int, capacity: int) -> str:
    message = f"Server at capacity: {active}/{capacity} sessions active. Cannot accept new connections."
    data = ErrorData(message, ErrorCode.CAPACITY_REACHED, active_sessions=active, max_sessions=capacity)
    return encode(ErrorFrame(data)).decode()


# Cached: the server asks it of its own address on every request, and an address takes 2 µs to parse.
# Bounded, as the name the server asks of a loopback socket is the client's Host header.
@functools.lru_cache(maxsize=64)
def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (both the server's policy and the
    client's proxy choice depend on it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
