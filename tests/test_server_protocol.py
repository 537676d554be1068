"""The wire module's bounds on what a client sends: nesting depth and how much of it an error quotes."""

from __future__ import annotations

import json

import msgspec
import pytest

from service_incident.models import MAX_EPISODE_ID_CHARS, ResetRequest
from service_incident.server.http_api import StepOptions
from service_incident.wire import (
    MAX_JSON_DEPTH,
    MAX_QUOTE_CHARS,
    ErrorCode,
    ProtocolError,
    TooDeep,
    check_depth,
    clip,
    decode_message,
    valid_episode_id,
)

LONGEST = "a" * MAX_EPISODE_ID_CHARS
EPISODE_IDS = ["ep-1", "!~", LONGEST, "", LONGEST + "a", "a b", "é", "a\x7f", "a\n"]


def _decodes(type_: type, fields: dict[str, object]) -> bool:
    try:
        msgspec.convert(fields, type_)
    except msgspec.ValidationError:
        return False
    return True


@pytest.mark.parametrize("episode_id", EPISODE_IDS)
def test_the_episode_id_rule_is_one_for_the_header_and_the_body(episode_id: str) -> None:
    assert valid_episode_id(episode_id) == _decodes(StepOptions, {"episode_id": episode_id})


@pytest.mark.parametrize("episode_id", EPISODE_IDS)
def test_a_reset_bounds_an_episode_id_as_the_header_rule_does(episode_id: str) -> None:
    # A reset takes any characters (only a header needs visible ASCII), within the same length.
    within = 1 <= len(episode_id) <= MAX_EPISODE_ID_CHARS
    assert _decodes(ResetRequest, {"episode_id": episode_id}) == within
    assert not valid_episode_id(episode_id) or within


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"type": "step", "data": {"action": "inspect_logs", "target": "db", "rationale": "[" * 5000}}),
        "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
        '{"a": [' * (MAX_JSON_DEPTH // 2) + "1" + "]}" * (MAX_JSON_DEPTH // 2),
        "[" * MAX_JSON_DEPTH + "]",  # unbalanced but shallow: the decoder says what is wrong
        r'["\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]',
    ],
)
def test_shallow_documents_pass_whatever_their_strings_hold(text: str) -> None:
    check_depth(text)
    check_depth(text.encode())


def test_one_level_too_deep_is_refused() -> None:
    for text in (
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        "[{" * (MAX_JSON_DEPTH // 2) + "[]" + "}]" * (MAX_JSON_DEPTH // 2),
        "[" * (MAX_JSON_DEPTH + 1),  # unbalanced: a decoder recurses as deep before it finds the end missing
        "[" * 5000 + "]" * 10,
    ):
        with pytest.raises(TooDeep):
            check_depth(text)


def test_a_deep_frame_is_a_validation_error_not_a_recursion_error() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_message('{"type": "step", "data": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert caught.value.code == ErrorCode.VALIDATION_ERROR and not caught.value.fatal


def test_messages_are_clipped_and_say_by_how_much() -> None:
    assert clip("short") == "short"
    long = clip("x" * 10_000)
    assert long.startswith("x" * MAX_QUOTE_CHARS) and "9600 more characters" in long
    with pytest.raises(ProtocolError) as caught:
        decode_message(json.dumps({"type": "reset", "data": {"k" * 100_000: 1}}))
    error = caught.value
    assert len(error.message) < MAX_QUOTE_CHARS + 50 and error.errors is not None
    assert len(error.errors[0].msg) < MAX_QUOTE_CHARS + 50 and all(len(str(p)) < 150 for p in error.errors[0].loc)
