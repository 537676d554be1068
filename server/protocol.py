"""The OpenEnv wire format: message envelopes, error codes, and their JSON encoding.

Sans-I/O: it turns text into typed messages and typed results into text, and knows nothing of
sockets. Decoders and encoders are built once at import; a well-formed frame costs one decode.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, get_args

import msgspec
from msgspec import Raw, Struct

from service_incident.models import Observation, ResetRequest, State


class ErrorCode(StrEnum):
    """OpenEnv's `WSErrorCode` values, spelled exactly as stock clients expect them."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


# After these the server closes the socket (code 1000), as stock OpenEnv does; others keep it open.
FATAL_CODES = frozenset({ErrorCode.CAPACITY_REACHED, ErrorCode.FACTORY_ERROR, ErrorCode.SESSION_ERROR})


# --- client -> server ---------------------------------------------------------------------------


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


ClientMessage = ResetMessage | StepMessage | StateMessage | CloseMessage | McpMessage
MESSAGE_TYPES = frozenset(cls.__struct_config__.tag for cls in get_args(ClientMessage))

_message_decoder = msgspec.json.Decoder(ClientMessage)


class ErrorDetail(Struct):
    """One validation problem, shaped like the pydantic error entries stock OpenEnv sends."""

    type: str
    loc: list[str | int]
    msg: str


class ProtocolError(Exception):
    """A frame or request the server refuses; becomes an error frame (WebSocket) or a 4xx (HTTP)."""

    def __init__(self, code: ErrorCode, message: str, errors: list[ErrorDetail] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.errors = errors

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_CODES


def decode_message(text: str | bytes) -> ClientMessage:
    """One frame to a typed message, or a ProtocolError with the code stock OpenEnv would use."""
    try:
        return _message_decoder.decode(text)
    except msgspec.ValidationError as exc:
        raise _classify(text, exc) from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from None


def _classify(text: str | bytes, exc: msgspec.ValidationError) -> ProtocolError:
    # Only frames that failed the typed decode get here, so the second, untyped decode costs nothing
    # on the hot path.
    try:
        frame = msgspec.json.decode(text)
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
                loc.append(field)
            elif index is not None:
                loc.append(int(index))
    field = _FIELD.match(text)
    if field:
        loc.append(field.group(2))
        kind = "missing" if field.group(1) == "missing required" else "extra_forbidden"
    else:
        kind = "invalid"
    return ErrorDetail(kind, loc, text.split(" - at `", 1)[0])


# --- server -> client ---------------------------------------------------------------------------


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


class ObservationFrame(_Frame, tag="observation"):
    data: StepPayload


class StateFrame(_Frame, tag="state"):
    data: State


class McpFrame(_Frame, tag="mcp"):
    data: Any


class ErrorData(Struct, omit_defaults=True):
    message: str
    code: ErrorCode
    errors: list[ErrorDetail] | None = None
    active_sessions: int | None = None
    max_sessions: int | None = None


class ErrorFrame(_Frame, tag="error"):
    data: ErrorData


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


def observation_text(observation: Observation) -> str:
    return encode(ObservationFrame(step_payload(observation))).decode()


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
