"""Ask service records: schemas, bounds, the encoder, and the decoder's fast path."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._ask import (
    ASK_EVENT_MAX_BYTES,
    ASK_EVENT_MAX_RECORDS,
    ASK_SERVICE_PROTOCOL_VERSION,
    INVALID_EVENT_CODE,
    INVALID_EVENT_MESSAGE,
    AskDoneEvent,
    AskErrorEvent,
    AskTextEvent,
    AskToolEvent,
    encode_ask_event,
    validate_ask_event,
)
from agentskit_chat.protocol._ask_ndjson import AskEventDecoder, decode_ask_events
from agentskit_chat.protocol._json import MAX_JSON_DEPTH, js_stringify, parse_json_text
from agentskit_chat.protocol._text import combine_surrogates

EMOJI = "\U0001f600"  # two UTF-16 units


def valid(record: Any) -> bool:
    return validate_ask_event(record) is not None


def test_constants() -> None:
    assert ASK_SERVICE_PROTOCOL_VERSION == 1
    assert ASK_EVENT_MAX_BYTES == 1048576
    assert ASK_EVENT_MAX_RECORDS == 4096


# --- encoding -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (AskTextEvent(delta="hello"), '{"type":"text","delta":"hello"}'),
        (
            AskToolEvent(
                id="sources-req-1",
                name="cite",
                args={"sources": [{"id": "a", "title": "T", "path": "/docs/a"}]},
            ),
            '{"type":"tool","id":"sources-req-1","name":"cite",'
            '"args":{"sources":[{"id":"a","title":"T","path":"/docs/a"}]}}',
        ),
        (AskDoneEvent(model="test"), '{"type":"done","model":"test"}'),
        (
            AskErrorEvent(message="The Ask request timed out.", code="ASK_TIMEOUT", retryable=True),
            '{"type":"error","message":"The Ask request timed out.","code":"ASK_TIMEOUT",'
            '"retryable":true}',
        ),
        (AskDoneEvent(), '{"type":"done"}'),
    ],
)
def test_encode_spec_examples(event: Any, line: str) -> None:
    assert encode_ask_event(event) == line + "\n"
    assert encode_ask_event(parse_json_text(line)) == line + "\n"
    assert decode_ask_events(line + "\n").events == (event,)


def test_encode_writes_schema_order_and_javascript_json() -> None:
    record = {
        "args": {"b": 1, "2": 1.0, "a": 1e21, "1": [-0.0, 1e-7], "01": "\ud800"},
        "name": "n",
        "id": "i",
        "type": "tool",
    }
    assert encode_ask_event(record) == (
        '{"type":"tool","id":"i","name":"n",'
        '"args":{"1":[0,1e-7],"2":1,"b":1,"a":1e+21,"01":"\\ud800"}}\n'
    )


@pytest.mark.parametrize(
    "record",
    [
        {"type": "text", "delta": "ok", "extra": True},
        {"type": "text"},
        {"type": "future"},
        {"delta": "no type"},
        {"type": "error", "message": ""},
        [{"type": "done"}],
        None,
        {"type": "tool", "id": "i", "name": "n", "args": {"k": {1, 2}}},
    ],
)
def test_encode_rejects_invalid_records(record: Any) -> None:
    with pytest.raises(ProtocolError) as raised:
        encode_ask_event(record)
    assert (raised.value.code, raised.value.message) == (INVALID_EVENT_CODE, INVALID_EVENT_MESSAGE)


def _deep_line(depth: int) -> str:
    """A tool record whose line nests ``depth`` levels (the record itself is one)."""
    levels = depth - 1
    return (
        '{"type":"tool","id":"i","name":"n","args":' + '{"n":' * levels + "0" + "}" * levels + "}"
    )


def _deep_args(depth: int) -> dict[str, Any]:
    """``args`` nesting ``depth`` levels (``args`` itself is one)."""
    value: Any = 0
    for _ in range(depth):
        value = {"n": value}
    return value  # type: ignore[no-any-return]


def test_args_at_the_depth_bound_decode_and_serialize_again() -> None:
    line = _deep_line(MAX_JSON_DEPTH)
    (event,) = decode_ask_events(line + "\n").events
    assert isinstance(event, AskToolEvent)
    assert event.to_json() == line
    assert encode_ask_event(event) == line + "\n"
    assert encode_ask_event(event.to_wire()) == line + "\n"


def test_args_past_the_depth_bound_neither_decode_nor_encode() -> None:
    assert decode_ask_events(_deep_line(MAX_JSON_DEPTH + 1) + "\n").events == ()
    record = {"type": "tool", "id": "i", "name": "n", "args": _deep_args(MAX_JSON_DEPTH)}
    assert validate_ask_event(record) is None
    with pytest.raises(ProtocolError):
        encode_ask_event(record)
    record["args"] = _deep_args(MAX_JSON_DEPTH - 1)
    assert encode_ask_event(record) == _deep_line(MAX_JSON_DEPTH) + "\n"


def test_cyclic_args_are_invalid() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert validate_ask_event({"type": "tool", "id": "", "name": "", "args": {"a": cyclic}}) is None


# --- bounds (UTF-16 units) ------------------------------------------------------------------------


def text_record(delta: str) -> dict[str, Any]:
    return {"type": "text", "delta": delta}


def tool_record(**changes: Any) -> dict[str, Any]:
    return {"type": "tool", "id": "i", "name": "n", "args": {}, **changes}


def error_record(**changes: Any) -> dict[str, Any]:
    return {"type": "error", "message": "m", **changes}


@pytest.mark.parametrize(
    ("record", "ok"),
    [
        (text_record("x" * 1048576), True),
        (text_record("x" * 1048577), False),
        (text_record(EMOJI * 524288), True),
        (text_record(EMOJI * 524288 + "x"), False),
        (text_record(""), True),
        (tool_record(id="x" * 256), True),
        (tool_record(id="x" * 257), False),
        (tool_record(id=EMOJI * 128), True),
        (tool_record(id=EMOJI * 128 + "x"), False),
        (tool_record(id="", name=""), True),
        (tool_record(name="x" * 128), True),
        (tool_record(name="x" * 129), False),
        (tool_record(name=EMOJI * 64 + "x"), False),
        (tool_record(args={"k" * 128: 1}), True),
        (tool_record(args={"k" * 129: 1}), False),
        (tool_record(args={EMOJI * 64: 1}), True),
        (tool_record(args={EMOJI * 64 + "k": 1}), False),
        (tool_record(args={"a": {"k" * 129: 1}}), True),  # only top-level keys are bounded
        (tool_record(args=[]), False),
        (tool_record(args=None), False),
        (tool_record(args="{}"), False),
        (tool_record(args={1: "x"}), False),
        ({"type": "tool", "id": "i", "name": "n"}, False),
        ({"type": "done", "model": "m" * 256}, True),
        ({"type": "done", "model": "m" * 257}, False),
        ({"type": "done", "model": EMOJI * 128 + "m"}, False),
        ({"type": "done", "model": ""}, True),
        ({"type": "done", "model": None}, False),
        (error_record(message="m" * 4096), True),
        (error_record(message="m" * 4097), False),
        (error_record(message=EMOJI * 2048 + "m"), False),
        (error_record(message=" "), True),  # not trimmed
        (error_record(code="A" * 128), True),
        (error_record(code="A" * 129), False),
        (error_record(code="A"), True),
        (error_record(code="ASK_TIMEOUT_2"), True),
        (error_record(code="ask"), False),
        (error_record(code="1A"), False),
        (error_record(code="_A"), False),
        (error_record(code="X\n"), False),
        (error_record(code=""), False),
        (error_record(code=None), False),
        (error_record(retryable=False), True),
        (error_record(retryable=1), False),
        (error_record(retryable="yes"), False),
        (error_record(retryable=None), False),
        ({"type": "text", "delta": 1}, False),
        ({"type": b"text", "delta": "x"}, False),
    ],
)
def test_record_bounds(record: dict[str, Any], ok: bool) -> None:
    assert valid(record) is ok


@pytest.mark.parametrize("kind", ["text", "tool", "done", "error"])
def test_every_variant_is_strict(kind: str) -> None:
    base = {
        "text": text_record("x"),
        "tool": tool_record(),
        "done": {"type": "done"},
        "error": error_record(),
    }[kind]
    assert valid(base)
    assert not valid({**base, "extra": None})


def test_models_validate_on_construction() -> None:
    with pytest.raises(ValueError):
        AskTextEvent(delta="x" * 1048577)
    with pytest.raises(ValueError):
        AskErrorEvent(message="")


# --- args: carried-through JSON -------------------------------------------------------------------


def test_top_level_proto_key_is_dropped_but_nested_ones_are_kept() -> None:
    line = '{"type":"tool","id":"i","name":"n","args":{"__proto__":{"x":1},"a":{"__proto__":2}}}'
    (event,) = decode_ask_events(line + "\n").events
    assert event.to_wire()["args"] == {"a": {"__proto__": 2}}


def test_args_are_read_only_deep_copies() -> None:
    source = {"list": [1, {"k": "v"}]}
    event = AskToolEvent(id="i", name="n", args=source)
    source["list"].append(2)
    assert isinstance(event.args, MappingProxyType)
    assert event.args["list"] == (1, MappingProxyType({"k": "v"}))
    assert event.to_wire()["args"] == {"list": [1, {"k": "v"}]}


def test_args_numbers_follow_javascript_doubles() -> None:
    line = (
        '{"type":"tool","id":"i","name":"n","args":{"big":12345678901234567890,'
        '"huge":' + "9" * 400 + ',"inf":1e400,"f":1.0,"neg":-0}}'
    )
    (event,) = decode_ask_events(line + "\n").events
    assert isinstance(event, AskToolEvent)
    assert math.isinf(event.args["huge"]) and math.isinf(event.args["inf"])
    assert encode_ask_event(event) == (
        '{"type":"tool","id":"i","name":"n",'
        '"args":{"big":12345678901234567000,"huge":null,"inf":null,"f":1,"neg":0}}\n'
    )
    assert valid(tool_record(args={"n": -(10**400), "nan": math.nan}))


def test_cyclic_or_non_json_args_are_invalid() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    looped: list[Any] = []
    looped.append(looped)
    for args in (cyclic, {"a": looped}, {"a": object()}, {"a": {1: 2}}, {"a": b"x"}):
        assert not valid(tool_record(args=args))
    shared = [1]
    assert valid(tool_record(args={"a": shared, "b": shared}))  # shared, not cyclic


# --- properties -----------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=()), max_size=40).map(combine_surrogates)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**1000), 2**1000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4)
)

EVENTS = st.one_of(
    st.builds(AskTextEvent, delta=TEXT),
    st.builds(
        AskToolEvent,
        id=TEXT,
        name=TEXT,
        args=st.dictionaries(TEXT.filter(lambda k: k != "__proto__"), JSON, max_size=4),
    ),
    st.builds(AskDoneEvent) | st.builds(AskDoneEvent, model=TEXT),
    st.builds(
        AskErrorEvent,
        message=TEXT.filter(bool),
        code=st.from_regex(r"\A[A-Z][A-Z0-9_]{0,127}\Z"),
        retryable=st.booleans(),
    ),
    st.builds(AskErrorEvent, message=TEXT.filter(bool)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENTS, max_size=6))
def test_encode_decode_round_trip(events: list[Any]) -> None:
    stream = "".join(encode_ask_event(event) for event in events)
    decoded = decode_ask_events(stream)
    assert decoded.rest == ""
    assert list(decoded.events) == events
    assert [e.to_json() for e in decoded.events] == [e.to_json() for e in events]
    decoder = AskEventDecoder()
    decoder.feed(stream.encode("utf-8", "surrogatepass"))
    # Lone surrogates travel as JSON escapes, so the stream bytes are valid UTF-8.
    assert list(decoder.events()) == events


NEAR_FAST_PATH = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "delta": JSON}),
    st.fixed_dictionaries({"type": st.just("text"), "delta": TEXT}, optional={"x": JSON}),
    st.fixed_dictionaries({"delta": TEXT}, optional={"type": st.sampled_from(["text", "done"])}),
    st.fixed_dictionaries({"type": st.just("done")}, optional={"model": JSON}),
    st.fixed_dictionaries({"type": st.just("done"), "model": TEXT}, optional={"extra": JSON}),
    st.fixed_dictionaries({"type": st.just("done"), "model": st.text(max_size=300)}),
    st.dictionaries(st.sampled_from(["type", "delta", "model", "message"]), JSON),
    JSON,
)


@settings(max_examples=200, deadline=None)
@given(NEAR_FAST_PATH)
def test_fast_path_equals_full_validation(record: Any) -> None:
    line = js_stringify(record)
    full = validate_ask_event(parse_json_text(line))
    fast = decode_ask_events(line + "\n").events
    if full is None:
        assert fast == ()
        return
    (event,) = fast
    assert type(event) is type(full)
    assert event == full
    assert event.model_fields_set == full.model_fields_set
    assert event.to_wire() == full.to_wire()
    assert event.to_json() == full.to_json()


@pytest.mark.parametrize(
    "delta", ["x" * 524288, "x" * 524289, EMOJI * 200000, "x" * 1000000, "\ud800" * 10]
)
def test_fast_path_boundary_equals_full_validation(delta: str) -> None:
    line = js_stringify(text_record(delta))
    (event,) = decode_ask_events(line + "\n").events
    full = validate_ask_event(parse_json_text(line))
    assert event == full
    assert full is not None
    assert event.model_fields_set == full.model_fields_set


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_validation_never_raises(value: Any) -> None:
    validate_ask_event(value)
    validate_ask_event({"type": "tool", "id": "i", "name": "n", "args": {"v": value}})


class Hostile:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("boom")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")

    def __hash__(self) -> int:
        raise RuntimeError("boom")


class HostileStr(str):
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")


class HostileDict(dict[str, Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("boom")

    def keys(self) -> Any:
        raise RuntimeError("boom")


HOSTILE: dict[str, Callable[[], Any]] = {
    "object": Hostile,
    "type object": lambda: {"type": Hostile(), "delta": "x"},
    "str subclasses": lambda: {"type": HostileStr("text"), "delta": HostileStr("x")},
    "dict subclass": lambda: HostileDict(type="done"),
    "args value": lambda: tool_record(args={"a": Hostile()}),
    "args key": lambda: tool_record(args={HostileStr("k"): 1}),
    "args dict subclass": lambda: tool_record(args=HostileDict(a=1)),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_programmatic_records_never_raise(name: str) -> None:
    record = HOSTILE[name]()
    event = validate_ask_event(record)
    if event is not None:
        # Whatever was accepted is plain, valid data that encodes.
        assert encode_ask_event(event) == encode_ask_event(event.to_wire())
    try:
        encode_ask_event(record)
    except ProtocolError as error:
        assert error.message == INVALID_EVENT_MESSAGE


MARKER = "ZQXJMARKERVW"


@settings(max_examples=100, deadline=None)
@given(TEXT, st.sampled_from(["delta", "id", "model", "message", "code", "extra"]))
def test_encoder_errors_never_echo_input(noise: str, key: str) -> None:
    payload = {"type": "error", "retryable": MARKER + noise, key: MARKER + noise}
    with pytest.raises(ProtocolError) as raised:
        encode_ask_event(payload)
    assert MARKER not in str(raised.value)
    assert MARKER not in raised.value.message
