"""The turn protocol and its message wire record: fixtures, decoding, encoding, snapshots."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._cursor import TurnSnapshotCursor
from agentskit_chat.protocol._json import MAX_JSON_DEPTH, js_stringify
from agentskit_chat.protocol._message import (
    MessageImagePart,
    MessageRecord,
    ToolCall,
    is_within_message_limits,
    validate_message_records,
)
from agentskit_chat.protocol._result import Decoded, Rejected
from agentskit_chat.protocol._text import js_trim
from agentskit_chat.protocol._turn import (
    DerivedLineage,
    SnapshotEvent,
    SubmitEvent,
    SubmitPayload,
    TokenUsage,
    TurnDiagnostic,
    create_snapshot_event,
    decode_turn_event,
    encode_turn_event,
    snapshot_messages,
)
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.turn import (
    INVALID_TURN_EVENT_FIXTURES,
    TURN_CASES,
    TURN_GOLDEN_ENCODINGS,
    VALID_TURN_EVENT_FIXTURES,
)
from tests._vectors import as_doubles

INVALID = {
    "code": "PROTOCOL_INVALID_PAYLOAD",
    "message": "Turn event payload is invalid.",
    "retryable": False,
}
FIXED_MESSAGES = {
    "Turn event is not valid JSON.",
    "Turn event payload is invalid.",
    "Turn event uses an unsupported protocol version.",
    "Turn event kind is unknown.",
}


def fixture(name: str, **changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(VALID_TURN_EVENT_FIXTURES[name])
    event.update(changes)
    return event


def streaming(**message_changes: Any) -> dict[str, Any]:
    event = fixture("streaming snapshot")
    event["payload"]["messages"][0].update(message_changes)
    return event


def message(**changes: Any) -> dict[str, Any]:
    base = {
        "id": "m",
        "role": "assistant",
        "content": "c",
        "status": "complete",
        "createdAt": "2026-07-11T03:00:00.000Z",
    }
    base.update(changes)
    return base


def snapshot_with(*messages: Any) -> dict[str, Any]:
    event = fixture("idle snapshot")
    event["payload"]["messages"] = list(messages)
    return event


def wire(result: Any) -> Any:
    assert isinstance(result, Decoded), result
    return result.value.to_wire()


def snapshot_of(payload: Any) -> SnapshotEvent:
    result = decode_turn_event(payload)
    assert isinstance(result, Decoded)
    assert isinstance(result.value, SnapshotEvent)
    return result.value


def diagnostic(result: Any) -> dict[str, Any]:
    assert isinstance(result, Rejected), result
    return result.diagnostic.to_wire()


# --- conformance cases ---------------------------------------------------------------------------


def run_case(case: ConformanceCase) -> None:
    payload = copy.deepcopy(case.input)
    if case.operation == "decode_turn_event":
        result = decode_turn_event(payload)
        if case.expect == "ok":
            assert isinstance(result, Decoded)
            assert as_doubles(wire(result)) == as_doubles(case.value)
            again = decode_turn_event(encode_turn_event(result.value))
            assert as_doubles(wire(again)) == as_doubles(case.value)
        else:
            assert isinstance(result, Rejected)
            assert diagnostic(result) == case.value
            assert (case.code, case.message) == (
                result.diagnostic.code,
                result.diagnostic.message,
            )
    elif case.operation == "encode_turn_event":
        assert encode_turn_event(payload) == case.value
    elif case.operation == "snapshot_messages":
        if case.expect == "raises":
            with pytest.raises(ProtocolError) as caught:
                snapshot_messages(payload)
            assert (caught.value.code, caught.value.message) == (case.code, case.message)
        else:
            projected = snapshot_messages(payload)
            for item in projected:
                assert isinstance(item["createdAt"], datetime)
            as_text = [
                {**item, "createdAt": item["createdAt"].isoformat(timespec="milliseconds")}
                for item in projected
            ]
            expected = [
                {**item, "createdAt": item["createdAt"].replace("Z", "+00:00")}
                for item in case.value
            ]
            assert as_text == expected
    elif case.operation == "create_snapshot_event":
        event = create_snapshot_event(**payload)
        assert event.to_wire() == case.value
        assert [m["content"] for m in snapshot_messages(event)] == [
            m["content"] for m in case.value["payload"]["messages"]
        ]
    elif case.operation == "turn_snapshot_cursor":
        cursor = TurnSnapshotCursor(payload["sessionId"])
        assert [cursor.apply(step) for step in payload["steps"]] == case.value["results"]
        held = cursor.get_snapshot()
        assert held is not None
        assert held.event_id == case.value["eventId"]
    else:  # pragma: no cover - a fixture with an unknown operation is a bug in the fixtures
        raise AssertionError(case.operation)


@pytest.mark.parametrize("case", TURN_CASES, ids=lambda case: case.name)
def test_conformance_case(case: ConformanceCase) -> None:
    run_case(case)


def test_fixture_sets_are_complete() -> None:
    assert list(VALID_TURN_EVENT_FIXTURES) == [
        "submit",
        "idle snapshot",
        "streaming snapshot",
        "complete snapshot with tool call",
        "diagnostic",
        "error snapshot",
    ]
    assert list(INVALID_TURN_EVENT_FIXTURES) == [
        "invalid payload",
        "unknown version",
        "unknown event",
        "blank input",
    ]
    assert len({case.name for case in TURN_CASES}) == len(TURN_CASES)
    assert {case.family for case in TURN_CASES} == {"turn"}


@pytest.mark.parametrize("name", list(VALID_TURN_EVENT_FIXTURES))
def test_valid_fixture_round_trips_as_text_and_bytes(name: str) -> None:
    event = VALID_TURN_EVENT_FIXTURES[name]
    encoded = encode_turn_event(event)
    assert wire(decode_turn_event(encoded)) == event
    assert wire(decode_turn_event(encoded.encode())) == event
    assert wire(decode_turn_event(b"\xef\xbb\xbf" + encoded.encode())) == event
    if name in TURN_GOLDEN_ENCODINGS:
        assert encoded == TURN_GOLDEN_ENCODINGS[name]


# --- decoding algorithm --------------------------------------------------------------------------


class HostileMapping(Mapping[str, Any]):
    """A mapping whose every access raises."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("hostile")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("hostile")

    def __len__(self) -> int:
        raise RuntimeError("hostile")


class HostileDict(dict[str, Any]):
    """A dict holding a valid event whose accessors all raise."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("hostile")

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("hostile")

    def items(self) -> Any:
        raise RuntimeError("hostile")

    def keys(self) -> Any:
        raise RuntimeError("hostile")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("hostile")

    def __contains__(self, key: object) -> bool:
        raise RuntimeError("hostile")


@pytest.mark.parametrize(
    "hostile",
    [HostileMapping(), HostileDict(VALID_TURN_EVENT_FIXTURES["submit"])],
    ids=["mapping", "dict subclass"],
)
def test_hostile_object_is_exactly_invalid(hostile: Any) -> None:
    result = decode_turn_event(hostile)
    assert diagnostic(result) == INVALID
    assert isinstance(result, Rejected)
    assert result.diagnostic.event_id is None


class AccessorMessage:
    """An object exposing ``content`` through ``__getattr__``: not JSON."""

    def __init__(self) -> None:
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        if name == "content":
            self.reads += 1
            return "stable" if self.reads == 1 else {}
        raise AttributeError(name)


def test_accessor_objects_are_not_json() -> None:
    # Python has no JS accessors on plain dicts; an object with one is simply not a message.
    accessor = AccessorMessage()
    assert diagnostic(decode_turn_event(snapshot_with(accessor))) == {
        **INVALID,
        "eventId": "event-idle",
    }
    assert accessor.reads == 0


def test_message_values_are_read_once_through_plain_dicts() -> None:
    event = streaming(metadata={"n": [1, 2]})
    decoded = snapshot_of(event)
    event["payload"]["messages"][0]["metadata"]["n"].append(3)
    assert decoded.payload.messages[0].metadata == {"n": (1, 2)}


def test_function_and_cycles_in_metadata_are_invalid() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for metadata in (
        {"fn": lambda: None},
        cyclic,
        {"when": datetime(2026, 1, 1, tzinfo=UTC)},
        {"t": (1, 2)},
        {1: "non-string key"},
        {"nan": float("nan")},
        {"big": 10**400},
        MappingProxyType({"a": 1}),
    ):
        result = decode_turn_event(streaming(metadata=metadata))
        assert diagnostic(result) == {**INVALID, "eventId": "event-streaming"}


def test_shared_containers_are_not_cycles() -> None:
    # Message records reject cycles only: the reference copies the input once, so a container
    # reached from two parents is two equal values (unlike the bounded-JSON rule, which rejects
    # a container reached twice).
    shared = message()
    assert decode_turn_event(snapshot_with(shared, shared)).ok
    value: dict[str, Any] = {"x": 1}
    decoded = snapshot_of(streaming(metadata={"a": value, "b": value}))
    assert decoded.payload.messages[0].metadata == {"a": {"x": 1}, "b": {"x": 1}}


def test_gate_order_and_event_id_echo() -> None:
    base = {"protocol": "agentskit.chat.turn", "eventId": "e-1"}
    cases: list[tuple[Any, str, str | None]] = [
        ({**base, "version": 2}, "PROTOCOL_UNSUPPORTED_VERSION", "e-1"),
        ({**base, "version": 1.5, "event": "nope"}, "PROTOCOL_UNSUPPORTED_VERSION", "e-1"),
        ({**base, "version": float("inf")}, "PROTOCOL_UNSUPPORTED_VERSION", "e-1"),
        ({**base, "version": 10**400}, "PROTOCOL_UNSUPPORTED_VERSION", "e-1"),
        ({**base, "version": 1.0, "event": "nope"}, "PROTOCOL_UNKNOWN_EVENT", "e-1"),
        ({**base, "version": True, "event": "nope"}, "PROTOCOL_INVALID_PAYLOAD", "e-1"),
        ({**base, "version": "2"}, "PROTOCOL_INVALID_PAYLOAD", "e-1"),
        ({**base, "version": 1, "event": ["nope"]}, "PROTOCOL_INVALID_PAYLOAD", "e-1"),
        ({"version": 2, "eventId": "e-1"}, "PROTOCOL_INVALID_PAYLOAD", "e-1"),
        ({**base, "eventId": 7, "version": 2}, "PROTOCOL_UNSUPPORTED_VERSION", None),
        ([base], "PROTOCOL_INVALID_PAYLOAD", None),
        ("[1]", "PROTOCOL_INVALID_PAYLOAD", None),
        (7, "PROTOCOL_INVALID_PAYLOAD", None),
        (object(), "PROTOCOL_INVALID_PAYLOAD", None),
    ]
    for candidate, code, event_id in cases:
        rejected = decode_turn_event(candidate)
        assert isinstance(rejected, Rejected)
        assert (rejected.diagnostic.code, rejected.diagnostic.event_id) == (code, event_id)
        assert rejected.diagnostic.retryable is False


def test_text_that_is_not_json_never_echoes() -> None:
    for text in ('{"eventId":"e-1",', "", "\ufeff{}", "NaN", "{'a':1}", b"\xff\xfe"):
        rejected = decode_turn_event(text)
        assert diagnostic(rejected) == {
            "code": "PROTOCOL_INVALID_PAYLOAD",
            "message": "Turn event is not valid JSON.",
            "retryable": False,
        }


def test_deep_nesting() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert diagnostic(decode_turn_event(deep)) == INVALID
    assert diagnostic(decode_turn_event("[" * 100_000))["message"] == (
        "Turn event is not valid JSON."
    )
    # Unknown keys are dropped without being examined, up to the nesting bound.
    at_bound = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    submit = js_stringify(VALID_TURN_EVENT_FIXTURES["submit"])
    assert decode_turn_event(submit[:-1] + ',"future":' + at_bound + "}").ok
    nested_meta = js_stringify(streaming(metadata={}))
    within = "[" * 5000 + "]" * 5000
    broken = nested_meta.replace('"metadata":{}', '"metadata":{"n":' + within + "}")
    assert diagnostic(decode_turn_event(broken)) == {**INVALID, "eventId": "event-streaming"}


def test_json_nesting_is_bounded_at_10000_levels() -> None:
    # The reference would parse the whole line and drop the unknown key; a line nested past
    # the bound is refused unparsed instead, as the envelope's "invalid".
    past = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    submit = js_stringify(VALID_TURN_EVENT_FIXTURES["submit"])
    assert diagnostic(decode_turn_event(submit[:-1] + ',"future":' + past + "}")) == INVALID
    # Unparsed, the event's id is unknown, so the diagnostic cannot carry it.
    nested_meta = js_stringify(streaming(metadata={}))
    broken = nested_meta.replace('"metadata":{}', '"metadata":{"n":' + past + "}")
    assert diagnostic(decode_turn_event(broken)) == INVALID


def test_huge_numbers_are_rejected() -> None:
    text = js_stringify(fixture("submit")).replace('"sequence":0', '"sequence":1e400')
    assert diagnostic(decode_turn_event(text)) == {**INVALID, "eventId": "event-submit"}
    for number in (10**400, 2**53, float("inf"), float("nan"), -0.5):
        result = decode_turn_event(fixture("submit", sequence=number))
        assert diagnostic(result) == {**INVALID, "eventId": "event-submit"}
    meta = js_stringify(streaming(metadata={"x": 1})).replace('"x":1', '"x":1e400')
    assert not decode_turn_event(meta).ok


def test_integral_floats_are_integers() -> None:
    event = fixture("idle snapshot", sequence=3.0, version=1.0)
    event["payload"]["usage"] = {"promptTokens": 1.0, "completionTokens": -0.0, "totalTokens": 1}
    encoded = encode_turn_event(event)
    assert '"version":1,' in encoded
    assert '"sequence":3,' in encoded
    assert '"usage":{"promptTokens":1,"completionTokens":0,"totalTokens":1}' in encoded


def test_unknown_keys_are_never_encoded() -> None:
    event = streaming(parts=[{"type": "image", "source": "s", "durationSec": "x", "z": 1}])
    event["payload"]["future"] = {"x": 1}
    event["payload"]["usage"]["cost"] = 3
    encoded = encode_turn_event(event)
    for key in ("future", "durationSec", "cost", '"z"'):
        assert key not in encoded


def test_strings_keep_lone_surrogates_and_escape_them() -> None:
    event = streaming(content="a\ud800b\u2028<>&")
    encoded = encode_turn_event(event)
    assert '"content":"a\\ud800b\u2028<>&"' in encoded
    assert wire(decode_turn_event(encoded))["payload"]["messages"][0]["content"] == (
        "a\ud800b\u2028<>&"
    )


def test_carried_json_keeps_content_and_js_key_order() -> None:
    args = {"b": None, "10": [1.5, 1e21, 1e-7], "1": {"__proto__": True}, "a": ""}
    event = copy.deepcopy(VALID_TURN_EVENT_FIXTURES["complete snapshot with tool call"])
    event["payload"]["messages"][0]["toolCalls"][0]["args"] = args
    encoded = encode_turn_event(event)
    assert '"args":{"1":{"__proto__":true},"10":[1.5,1e+21,1e-7],"b":null,"a":""}' in encoded


# --- message record ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "ok"),
    [
        ({"role": "owner"}, False),
        ({"role": "User"}, False),
        ({"status": "done"}, False),
        ({"content": None}, False),
        ({"content": 1}, False),
        ({"id": 1}, False),
        ({"id": " "}, True),
        ({"id": "not a safe id\n"}, True),
        ({"toolCallId": None}, False),
        ({"toolCallId": 1}, False),
        ({"parts": None}, False),
        ({"parts": {}}, False),
        ({"parts": []}, True),
        ({"toolCalls": None}, False),
        ({"toolCalls": []}, True),
        ({"metadata": {}}, True),
        ({"metadata": "x"}, False),
        ({"createdAt": "2026-07-11T03:00:00.000Z", "created_at": "x"}, True),
    ],
)
def test_message_fields(changes: dict[str, Any], ok: bool) -> None:
    assert decode_turn_event(snapshot_with(message(**changes))).ok is ok


def test_message_timestamps_use_the_wire_name_only() -> None:
    record = message()
    record["created_at"] = record.pop("createdAt")
    assert not decode_turn_event(snapshot_with(record)).ok


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"type": "text", "text": ""}, {"type": "text", "text": ""}),
        ({"type": "text"}, None),
        ({"type": "text", "text": 1}, None),
        (
            {"type": "image", "source": "s", "detail": ["low"], "durationSec": "x"},
            {"type": "image", "source": "s", "detail": ["low"]},
        ),
        ({"type": "image", "source": "s", "detail": [["auto"]]}, ...),
        ({"type": "image", "source": "s", "detail": "high"}, ...),
        ({"type": "image", "source": "s", "detail": "LOW"}, None),
        ({"type": "image", "source": "s", "detail": ["low", "high"]}, None),
        ({"type": "image", "source": "s", "detail": []}, None),
        ({"type": "image", "source": "s", "detail": {"low": 1}}, None),
        ({"type": "image", "source": "s", "detail": None}, None),
        ({"type": "image", "source": "s", "mimeType": 1}, None),
        ({"type": "image"}, None),
        ({"type": "audio", "source": "s", "durationSec": 0}, ...),
        (
            {"type": "audio", "source": "s", "durationSec": 1.5, "filename": 3},
            {"type": "audio", "source": "s", "durationSec": 1.5},
        ),
        ({"type": "audio", "source": "s", "durationSec": -1}, None),
        ({"type": "audio", "source": "s", "durationSec": True}, None),
        ({"type": "audio", "source": "s", "durationSec": "1"}, None),
        ({"type": "video", "source": "s", "mimeType": "video/mp4", "durationSec": 2}, ...),
        ({"type": "video", "source": "s", "durationSec": None}, None),
        (
            {"type": "file", "source": "s", "filename": "a.pdf", "detail": 3},
            {"type": "file", "source": "s", "filename": "a.pdf"},
        ),
        ({"type": "file", "source": "s", "filename": "a.pdf"}, ...),
        ({"type": "file", "source": "s", "filename": None}, None),
        ({"type": "sticker", "source": "s"}, None),
        ({"type": ["text"], "text": "x"}, None),
        ({"text": "x"}, None),
        ("text", None),
    ],
)
def test_content_parts(part: Any, expected: Any) -> None:
    result = decode_turn_event(snapshot_with(message(parts=[part])))
    if expected is None:
        assert not result.ok
    else:
        decoded = wire(result)["payload"]["messages"][0]["parts"][0]
        assert decoded == (part if expected is ... else expected)


def test_file_part_drops_fields_of_other_types() -> None:
    part = {"type": "file", "source": "s", "detail": 3, "durationSec": "x", "text": 1}
    decoded = wire(decode_turn_event(snapshot_with(message(parts=[part]))))
    assert decoded["payload"]["messages"][0]["parts"] == [{"type": "file", "source": "s"}]


def test_image_detail_array_is_kept_and_frozen() -> None:
    decoded = snapshot_of(
        snapshot_with(message(parts=[{"type": "image", "source": "s", "detail": ["low"]}]))
    )
    parts = decoded.payload.messages[0].parts
    assert parts is not None
    assert isinstance(parts[0], MessageImagePart)
    assert parts[0].detail == ("low",)
    assert '"detail":["low"]' in encode_turn_event(decoded)


@pytest.mark.parametrize(
    ("changes", "ok"),
    [
        ({}, True),
        ({"args": []}, False),
        ({"args": None}, False),
        ({"args": "x"}, False),
        ({"status": "requires_confirmation"}, True),
        ({"status": "running", "error": "boom"}, True),
        ({"status": "done"}, False),
        ({"result": 1}, False),
        ({"result": None}, False),
        ({"result": ""}, True),
        ({"error": None}, False),
        ({"id": " "}, True),
        ({"name": 1}, False),
    ],
)
def test_tool_calls(changes: dict[str, Any], ok: bool) -> None:
    call = {"id": "c", "name": "n", "args": {}, "status": "pending", **changes}
    assert decode_turn_event(snapshot_with(message(toolCalls=[call]))).ok is ok


def padded_snapshot(total_nodes: int) -> dict[str, Any]:
    # Nodes: wrapper, its version, messages, one message, its five fields, metadata, an array.
    fixed = 11
    return snapshot_with(message(metadata={"a": [0] * (total_nodes - fixed)}))


def test_node_limit_counts_the_synthetic_wrapper() -> None:
    assert decode_turn_event(padded_snapshot(10_000)).ok
    assert diagnostic(decode_turn_event(padded_snapshot(10_001))) == {
        **INVALID,
        "eventId": "event-idle",
    }
    assert decode_turn_event(js_stringify(padded_snapshot(10_000))).ok
    assert not decode_turn_event(js_stringify(padded_snapshot(10_001))).ok


def test_container_size_limit() -> None:
    assert not is_within_message_limits([message(metadata={"a": [0] * 10_001})])
    assert not is_within_message_limits([message(metadata={str(i): 0 for i in range(10_001)})])
    assert is_within_message_limits([message()] * 2)  # shared, not cyclic
    assert is_within_message_limits([])


def test_depth_counts_from_the_wrapper() -> None:
    # Each message is depth 2, its fields depth 3, its parts' fields depth 5.
    leaf: Any = "x"
    for _ in range(27):
        leaf = [leaf]
    part = {"type": "image", "source": "s", "detail": leaf}
    assert is_within_message_limits([message(parts=[part])]) is True
    part["detail"] = [leaf]
    assert is_within_message_limits([message(parts=[part])]) is False


def test_validate_message_records_is_the_memory_record_validator() -> None:
    records = validate_message_records([message(future=1)])
    assert records is not None
    assert records[0].to_wire() == message()
    assert validate_message_records([message(id="")]) is None
    assert validate_message_records((message(),)) is not None
    assert validate_message_records({"0": message()}) is None
    assert validate_message_records(HostileMapping()) is None


# --- encoding ------------------------------------------------------------------------------------


def test_encode_accepts_models_built_in_python() -> None:
    event = SubmitEvent(
        protocol="agentskit.chat.turn",
        version=1,
        event_id="e",
        session_id="s",
        turn_id="t",
        sequence=0,
        emitted_at="2026-07-11T03:00:00.000Z",
        event="client.turn.submit",
        payload=SubmitPayload(input="hi"),
    )
    assert encode_turn_event(event) == TURN_CASES_BY_NAME["reordered submit encoding"].value


TURN_CASES_BY_NAME = {case.name: case for case in TURN_CASES}


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "{}",
        b"{}",
        [],
        {"event": "client.turn.submit"},
        fixture("submit", version=2),
        fixture("submit", event="server.turn.future"),
        HostileMapping(),
    ],
)
def test_encode_raises_on_invalid_events(bad: Any) -> None:
    with pytest.raises(ProtocolError) as caught:
        encode_turn_event(bad)
    assert (caught.value.code, caught.value.message) == (INVALID["code"], INVALID["message"])


# --- constructing and projecting snapshots -------------------------------------------------------


def snapshot_args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "event_id": "event-1",
        "session_id": "session",
        "turn_id": "turn-1",
        "sequence": 1,
        "emitted_at": "2026-07-11T03:00:00.000Z",
        "messages": [],
        "status": "streaming",
        "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
    }
    args.update(changes)
    return args


def test_create_snapshot_converts_datetimes() -> None:
    local = timezone(timedelta(hours=5, minutes=30))
    created = datetime(2026, 7, 11, 8, 30, 1, 123_999, tzinfo=local)
    event = create_snapshot_event(
        **snapshot_args(
            emitted_at=datetime(2026, 7, 11, 3, 0, tzinfo=UTC),
            messages=[
                {**message(createdAt=created), "toolCallId": None, "metadata": {"x": None}},
            ],
        )
    )
    record = event.to_wire()["payload"]["messages"][0]
    assert record["createdAt"] == "2026-07-11T03:00:01.123Z"
    assert event.emitted_at == "2026-07-11T03:00:00.000Z"
    assert "toolCallId" not in record
    assert record["metadata"] == {"x": None}
    assert "error" not in event.to_wire()["payload"]
    assert "lineage" not in event.to_wire()["payload"]


def test_create_snapshot_accepts_models_and_keeps_lineage_and_error() -> None:
    record = MessageRecord(
        id="m",
        role="tool",
        content="c",
        status="complete",
        created_at="2026-07-11T03:00:00.000Z",
        tool_calls=(ToolCall(id="c", name="n", args={"q": [1]}, status="complete"),),
    )
    event = create_snapshot_event(
        **snapshot_args(
            messages=[record],
            usage=TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
            lineage=DerivedLineage(
                operation="retry", parent_turn_id="turn-0", source_message_id="m"
            ),
            error=TurnDiagnostic(version=1, code="X", message="x", retryable=True),
        )
    )
    payload = event.to_wire()["payload"]
    assert payload["messages"][0]["toolCalls"][0]["args"] == {"q": [1]}
    assert payload["lineage"] == {
        "operation": "retry",
        "parentTurnId": "turn-0",
        "sourceMessageId": "m",
    }
    assert payload["error"] == {"version": 1, "code": "X", "message": "x", "retryable": True}
    projected = snapshot_messages(event)
    again = create_snapshot_event(**snapshot_args(messages=projected))
    assert again.payload.messages == event.payload.messages


@pytest.mark.parametrize(
    "changes",
    [
        {"event_id": "bad id"},
        {"session_id": ""},
        {"sequence": -1},
        {"emitted_at": "2026-07-11T03:00:00.000z"},
        {"emitted_at": datetime(2026, 7, 11)},
        {"messages": [message(createdAt=datetime(2026, 7, 11))]},
        {"messages": [message(createdAt=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))]},
        {"messages": [message(id="")]},
        {"messages": "not a list"},
        {"messages": [object()]},
        {"messages": [message(metadata={"fn": print})]},
        {"status": "waiting"},
        {"usage": {"promptTokens": -1, "completionTokens": 0, "totalTokens": 0}},
        {"lineage": {"operation": "edit"}},
        {"error": {"version": 1, "code": "bad", "message": "x", "retryable": False}},
    ],
)
def test_create_snapshot_raises_on_invalid_input(changes: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        create_snapshot_event(**snapshot_args(**changes))
    assert caught.value.code == "PROTOCOL_INVALID_PAYLOAD"


def test_snapshot_messages_projects_fresh_plain_values() -> None:
    event = streaming(
        metadata={"k": [1]},
        parts=[{"type": "image", "source": "s", "detail": ["low"]}],
    )
    projected = snapshot_messages(js_stringify(event))
    assert projected[0]["createdAt"] == datetime(2026, 7, 11, 3, 0, tzinfo=UTC)
    assert projected[0]["metadata"] == {"k": [1]}
    assert projected[0]["parts"] == [{"type": "image", "source": "s", "detail": ["low"]}]
    projected[0]["metadata"]["k"].append(2)
    assert snapshot_messages(event)[0]["metadata"] == {"k": [1]}


def test_snapshot_messages_keeps_milliseconds_and_leap_days() -> None:
    event = streaming(createdAt="2024-02-29T23:59:59.999Z")
    assert snapshot_messages(event)[0]["createdAt"] == datetime(
        2024, 2, 29, 23, 59, 59, 999_000, tzinfo=UTC
    )


def test_snapshot_messages_cannot_represent_year_zero() -> None:
    event = streaming(createdAt="0000-01-01T00:00:00.000Z")
    assert decode_turn_event(event).ok
    with pytest.raises(ProtocolError) as caught:
        snapshot_messages(event)
    assert caught.value.message == "Message createdAt cannot be represented as a datetime."


@pytest.mark.parametrize(
    "bad",
    [
        VALID_TURN_EVENT_FIXTURES["submit"],
        VALID_TURN_EVENT_FIXTURES["diagnostic"],
        {"event": "server.turn.snapshot"},
        "{",
        None,
    ],
)
def test_snapshot_messages_raises_for_non_snapshots(bad: Any) -> None:
    with pytest.raises(ProtocolError):
        snapshot_messages(copy.deepcopy(bad))


def test_decoded_events_are_immutable() -> None:
    event = decode_turn_event(fixture("complete snapshot with tool call")).value
    assert isinstance(event, SnapshotEvent)
    with pytest.raises(ValueError, match="frozen"):
        event.sequence = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.payload.messages[0].tool_calls[0].args["query"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        event.payload.messages.append(event.payload.messages[0])  # type: ignore[attr-defined]


# --- properties ----------------------------------------------------------------------------------

SAFE_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,12}", fullmatch=True)
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(["\ud800", "\udfff", "\U0001f600", "\u2028", "\x00", '"', "\\", " "]),
    ),
    max_size=12,
)
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)
JSON_OBJECTS = st.dictionaries(TEXT, JSON_VALUES, max_size=3)


@st.composite
def timestamps(draw: st.DrawFn, *, message: bool = False) -> str:
    year = draw(st.integers(0, 9999))
    month = draw(st.integers(1, 12))
    day = draw(st.integers(1, 28))
    clock = f"{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}"
    if message:
        return f"{year:04d}-{month:02d}-{day:02d}T{clock}:{draw(st.integers(0, 59)):02d}." + (
            f"{draw(st.integers(0, 999)):03d}Z"
        )
    seconds = draw(st.sampled_from(["", ":00", ":59.1", ":07.123456"]))
    zone = draw(st.sampled_from(["Z", "+05:30", "-23:59"]))
    return f"{year:04d}-{month:02d}-{day:02d}T{clock}{seconds}{zone}"


PARTS = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries(
        {"type": st.just("image"), "source": TEXT},
        optional={
            "mimeType": TEXT,
            "detail": st.sampled_from(["low", "high", "auto", ["low"], [["auto"]]]),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["audio", "video"]), "source": TEXT},
        optional={"mimeType": TEXT, "durationSec": st.floats(0, 1e9) | st.integers(0, 99)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("file"), "source": TEXT}, optional={"mimeType": TEXT, "filename": TEXT}
    ),
)
TOOL_CALLS = st.fixed_dictionaries(
    {
        "id": TEXT.filter(bool),
        "name": TEXT.filter(bool),
        "args": JSON_OBJECTS,
        "status": st.sampled_from(
            ["pending", "running", "complete", "error", "requires_confirmation"]
        ),
    },
    optional={"result": TEXT, "error": TEXT},
)
MESSAGES = st.fixed_dictionaries(
    {
        "id": TEXT.filter(bool),
        "role": st.sampled_from(["user", "assistant", "system", "tool"]),
        "content": TEXT,
        "status": st.sampled_from(["pending", "streaming", "complete", "error"]),
        "createdAt": timestamps(message=True),
    },
    optional={
        "parts": st.lists(PARTS, max_size=3),
        "toolCalls": st.lists(TOOL_CALLS, max_size=2),
        "toolCallId": TEXT,
        "metadata": JSON_OBJECTS,
    },
)
COUNTS = st.integers(0, 2**53 - 1)
DIAGNOSTICS = st.fixed_dictionaries(
    {
        "version": st.just(1),
        "code": st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True),
        "message": TEXT.filter(bool),
        "retryable": st.booleans(),
    }
)
LINEAGES = st.one_of(
    st.just({"operation": "submit"}),
    st.fixed_dictionaries(
        {
            "operation": st.sampled_from(["retry", "edit", "regenerate"]),
            "parentTurnId": SAFE_IDS,
            "sourceMessageId": SAFE_IDS,
        }
    ),
)
SNAPSHOT_PAYLOADS = st.fixed_dictionaries(
    {
        "messages": st.lists(MESSAGES, max_size=3),
        "status": st.sampled_from(["idle", "streaming", "complete", "error"]),
        "usage": st.fixed_dictionaries(
            {"promptTokens": COUNTS, "completionTokens": COUNTS, "totalTokens": COUNTS}
        ),
    },
    optional={"error": DIAGNOSTICS, "lineage": LINEAGES},
)


@st.composite
def turn_events(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(["client.turn.submit", "server.turn.snapshot", "server.turn.diagnostic"])
    )
    if kind == "client.turn.submit":
        payload: Any = {"input": draw(TEXT.filter(lambda s: js_trim(s) != ""))}
    elif kind == "server.turn.snapshot":
        payload = draw(SNAPSHOT_PAYLOADS)
    else:
        payload = draw(DIAGNOSTICS)
    return {
        "protocol": "agentskit.chat.turn",
        "version": 1,
        "eventId": draw(SAFE_IDS),
        "sessionId": draw(SAFE_IDS),
        "turnId": draw(SAFE_IDS),
        "sequence": draw(COUNTS),
        "emittedAt": draw(timestamps()),
        "event": kind,
        "payload": payload,
    }


@settings(max_examples=150)
@given(turn_events())
def test_round_trip(event: dict[str, Any]) -> None:
    decoded = decode_turn_event(event)
    assert isinstance(decoded, Decoded)
    encoded = encode_turn_event(decoded.value)
    assert encode_turn_event(event) == encoded
    again = decode_turn_event(encoded)
    assert isinstance(again, Decoded)
    assert encode_turn_event(again.value) == encoded
    assert decode_turn_event(encoded.encode("utf-8", "surrogatepass")).ok
    if isinstance(decoded.value, SnapshotEvent):
        rebuilt = create_snapshot_event(
            event_id=decoded.value.event_id,
            session_id=decoded.value.session_id,
            turn_id=decoded.value.turn_id,
            sequence=decoded.value.sequence,
            emitted_at=decoded.value.emitted_at,
            messages=list(decoded.value.payload.messages),
            status=decoded.value.payload.status,
            usage=decoded.value.payload.usage,
            lineage=decoded.value.payload.lineage,
            error=decoded.value.payload.error,
        )
        assert rebuilt.to_json() == encoded


HOSTILE_VALUES = st.recursive(
    JSON_LEAVES
    | st.sampled_from([10**400, -(10**400), float("inf"), float("nan"), 2**53, b"x", object()]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3) | st.tuples(inner)
    ),
    max_leaves=10,
)


@st.composite
def hostile_events(draw: st.DrawFn) -> Any:
    """A valid event with one value somewhere inside replaced by something hostile."""
    event = draw(turn_events())
    node: Any = event
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, dict | list) or not child or draw(st.booleans()):
            node[key] = draw(HOSTILE_VALUES)
            return event
        node = child


@settings(max_examples=200)
@example("[" * 50_000 + "]" * 50_000)
@example('{"protocol":"agentskit.chat.turn","version":1e400}')
@example('{"protocol":"agentskit.chat.turn","version":1,"sequence":' + "9" * 400 + "}")
@given(
    st.one_of(
        st.binary(max_size=64),
        st.text(max_size=64),
        JSON_VALUES,
        HOSTILE_VALUES,
        hostile_events(),
    )
)
def test_decoder_never_raises_on_arbitrary_input(payload: Any) -> None:
    result = decode_turn_event(payload)
    assert result.ok in (True, False)
    if isinstance(result, Rejected):
        assert result.diagnostic.message in FIXED_MESSAGES


@st.composite
def corrupted_events(draw: st.DrawFn) -> tuple[Any, str]:
    marker = "LEAKMARK" + draw(st.from_regex(r"[0-9a-f]{8}", fullmatch=True))
    event = draw(turn_events())
    poison = draw(
        st.sampled_from(
            [
                marker,
                [marker],
                {marker: marker},
                {"n": marker},
                " " + marker + "\n",
                10**400,
                float("inf"),
            ]
        )
    )
    target = draw(st.sampled_from(["top", "payload", "message", "metadata", "eventId", "raw"]))
    if target == "top":
        event[draw(st.sampled_from(list(event)))] = poison
    elif target == "payload" and isinstance(event["payload"], dict) and event["payload"]:
        event["payload"][draw(st.sampled_from(sorted(event["payload"])))] = poison
    elif target == "message" and event["event"] == "server.turn.snapshot":
        event["payload"]["messages"].append({"id": marker, "role": marker, "createdAt": poison})
    elif target == "metadata" and event["event"] == "server.turn.snapshot":
        event["payload"]["messages"].append(message(metadata={marker: [poison] * 10_001}))
    elif target == "eventId":
        event["eventId"] = marker + "\n"
        event["version"] = 2
    else:
        return js_stringify(event)[: draw(st.integers(0, 400))] + marker, marker
    event["secret"] = marker
    return event, marker


@settings(max_examples=150)
@given(corrupted_events())
def test_diagnostics_never_leak_payload_data(corrupted: tuple[Any, str]) -> None:
    payload, marker = corrupted
    candidates = [payload]
    if not isinstance(payload, str):
        # 10**400 has no JSON text; the programmatic payload still runs.
        with contextlib.suppress(TypeError, OverflowError):
            candidates.append(js_stringify(payload))
    for candidate in candidates:
        result = decode_turn_event(candidate)
        if isinstance(result, Rejected):
            rendered = js_stringify(result.diagnostic.to_wire())
            assert marker not in rendered
            assert result.diagnostic.message in FIXED_MESSAGES
            event_id = result.diagnostic.event_id
            assert event_id is None or (
                isinstance(payload, dict) and event_id == payload["eventId"]
            )
