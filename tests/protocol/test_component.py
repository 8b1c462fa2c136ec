"""The component envelope: render frames, events, fallbacks, and their fixtures."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._component import (
    ComponentFrame,
    ComponentInteractEvent,
    ComponentSelectEvent,
    SemanticFallback,
    create_component_interaction_event,
    create_component_select_event,
    decode_component_frame,
    encode_component_event,
    format_semantic_fallback,
    is_component_frame_candidate,
)
from agentskit_chat.protocol._json import js_stringify, parse_json_text
from agentskit_chat.protocol._result import Decoded, Rejected
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.component import (
    COMPONENT_CASES,
    INVALID_CHOICE_LIST_PROPS_FRAME,
    INVALID_COMPONENT_FRAME_FIXTURES,
    STANDARD_COMPONENT_FRAME_FIXTURES,
    UNKNOWN_COMPONENT_FRAME,
    VALID_CHOICE_LIST_FRAME,
)
from tests._vectors import as_doubles

INVALID_PAYLOAD = {
    "code": "COMPONENT_INVALID_FRAME",
    "message": "Component frame payload is invalid.",
    "retryable": False,
}


def frame_with(**changes: Any) -> dict[str, Any]:
    frame = copy.deepcopy(VALID_CHOICE_LIST_FRAME)
    frame.update(changes)
    return frame


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


class Hostile(dict[str, Any]):
    """A mapping whose every access raises."""

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("boom")

    def items(self) -> Any:
        raise RuntimeError("boom")

    def keys(self) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Any:
        raise RuntimeError("boom")


def run_case(case: ConformanceCase) -> None:
    if case.operation == "decode_component_frame":
        result = decode_component_frame(case.input)
        if case.expect == "ok":
            assert isinstance(result, Decoded)
            expected = case.value if case.value is not None else parse_json_text(case.input)
            assert as_doubles(result.value.to_wire()) == as_doubles(expected)
        else:
            assert isinstance(result, Rejected)
            assert result.diagnostic.to_wire() == {
                "code": case.code,
                "message": case.message,
                "retryable": False,
            }
        return
    if case.operation == "format_semantic_fallback":
        assert format_semantic_fallback(case.input) == case.value
        return
    build: Any = {
        "create_component_select_event": create_component_select_event,
        "create_component_interaction_event": create_component_interaction_event,
    }[case.operation]
    if case.expect == "raises":
        with pytest.raises(ProtocolError) as info:
            build(**case.input)
        assert info.value.code == case.code
        return
    event = build(**case.input)
    assert event.to_json() == case.value
    assert encode_component_event(event) == case.value


@pytest.mark.parametrize("case", COMPONENT_CASES, ids=lambda c: c.name)
def test_conformance_case(case: ConformanceCase) -> None:
    run_case(case)


def test_fixture_inventory() -> None:
    assert len(STANDARD_COMPONENT_FRAME_FIXTURES) == 12
    keys = [f["componentKey"] for f in STANDARD_COMPONENT_FRAME_FIXTURES]
    assert len(set(keys)) == 12
    for frame in STANDARD_COMPONENT_FRAME_FIXTURES:
        if frame is not VALID_CHOICE_LIST_FRAME:
            assert frame["instanceId"] == f"{frame['componentKey']}-fixture"
        assert frame["fallback"]["kind"] == frame["componentKey"]
    assert [c.code for c in INVALID_COMPONENT_FRAME_FIXTURES] == [
        "COMPONENT_INVALID_FRAME",
        "COMPONENT_UNSUPPORTED_VERSION",
        "COMPONENT_UNKNOWN_TYPE",
    ]


def test_valid_choice_list_frame_text_round_trips() -> None:
    result = decode_component_frame(js_stringify(VALID_CHOICE_LIST_FRAME))
    assert isinstance(result, Decoded)
    assert result.value.to_wire() == VALID_CHOICE_LIST_FRAME
    assert result.value.to_json() == js_stringify(VALID_CHOICE_LIST_FRAME)
    assert decode_component_frame(js_stringify(VALID_CHOICE_LIST_FRAME).encode()).ok


def test_envelope_fixtures_are_valid_envelopes() -> None:
    for frame in (INVALID_CHOICE_LIST_PROPS_FRAME, UNKNOWN_COMPONENT_FRAME):
        result = decode_component_frame(frame)
        assert isinstance(result, Decoded)
        assert result.value.to_wire() == frame


def test_decoded_frame_is_frozen_and_keeps_key_order() -> None:
    frame = frame_with(props={"b": 1, "2": [1], "a": {"z": 1, "0": 2}, "01": 0})
    shuffled = {k: frame[k] for k in reversed(frame)} | {"future": True}
    result = decode_component_frame(shuffled)
    assert isinstance(result, Decoded)
    assert result.value.to_json() == (
        '{"protocol":"agentskit.chat.component","version":1,"type":"render",'
        '"componentKey":"choice-list","instanceId":"destination-choice",'
        '"props":{"2":[1],"b":1,"a":{"0":2,"z":1},"01":0},'
        '"fallback":{"kind":"choice-list","summary":"Choose Documentation or Demo."}}'
    )
    props = result.value.props
    assert isinstance(props, MappingProxyType)
    with pytest.raises(TypeError):
        props["b"] = 2  # type: ignore[index]
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises its own ValidationError
        result.value.instance_id = "other"  # type: ignore[misc]


# --- cases that need Python objects ---------------------------------------------------------------


def test_interaction_value_containing_a_function_raises() -> None:
    with pytest.raises(ProtocolError) as info:
        create_component_interaction_event(VALID_CHOICE_LIST_FRAME, "submit", {"f": len})
    assert info.value.code == "COMPONENT_INVALID_FRAME"
    assert info.value.message == "Component event is invalid."


def test_interaction_value_absent_versus_null() -> None:
    frame = decode_component_frame(VALID_CHOICE_LIST_FRAME).unwrap()
    absent = create_component_interaction_event(frame, "submit")
    present = create_component_interaction_event(frame, "submit", None)
    assert not absent.has_value
    assert present.has_value
    assert "value" not in absent.to_wire()
    assert present.to_wire()["value"] is None
    assert encode_component_event(absent.to_wire()) == absent.to_json()
    assert encode_component_event(present.to_wire()) == present.to_json()


def test_hostile_object_is_not_ok_and_does_not_raise() -> None:
    result = decode_component_frame(Hostile())
    assert isinstance(result, Rejected)
    assert result.diagnostic.to_wire() == INVALID_PAYLOAD
    assert not is_component_frame_candidate(Hostile())


@pytest.mark.parametrize(
    "props",
    [{"unsafe": len}, {"unsafe": object()}, {"unsafe": b"x"}, {"unsafe": {1, 2}}],
    ids=["function", "object", "bytes", "set"],
)
def test_props_that_are_not_json(props: Any) -> None:
    result = decode_component_frame(frame_with(props=props))
    assert isinstance(result, Rejected)
    assert result.diagnostic.to_wire() == INVALID_PAYLOAD


def test_cyclic_and_shared_props() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    shared = {"a": 1}
    for props in (cyclic, {"x": shared, "y": shared}):
        result = decode_component_frame(frame_with(props=props))
        assert result.diagnostic is not None
        assert result.diagnostic.to_wire() == INVALID_PAYLOAD


def test_props_depth_and_size_bounds() -> None:
    assert decode_component_frame(frame_with(props=nested(20))).ok
    assert not decode_component_frame(frame_with(props=nested(21))).ok
    assert not decode_component_frame(frame_with(props=nested(22))).ok
    assert decode_component_frame(frame_with(props=[0] * 999)).ok
    assert not decode_component_frame(frame_with(props=[0] * 1000)).ok
    assert decode_component_frame(frame_with(props="😀" * 8192)).ok
    assert not decode_component_frame(frame_with(props="😀" * 8192 + "a")).ok


@pytest.mark.parametrize(
    ("field", "limit"), [("kind", 64), ("summary", 4096)], ids=["kind", "summary"]
)
def test_fallback_bounds_in_utf16_units(field: str, limit: int) -> None:
    def frame(value: str) -> dict[str, Any]:
        fallback = {"kind": "k", "summary": "s"} | {field: value}
        return frame_with(fallback=fallback)

    assert decode_component_frame(frame("x" * limit)).ok
    assert not decode_component_frame(frame("x" * (limit + 1))).ok
    assert decode_component_frame(frame("😀" * (limit // 2))).ok
    assert not decode_component_frame(frame("😀" * (limit // 2) + "x")).ok
    assert not decode_component_frame(frame("")).ok


def test_identifier_bounds() -> None:
    assert decode_component_frame(frame_with(instanceId="i" * 128)).ok
    assert not decode_component_frame(frame_with(instanceId="i" * 129)).ok
    event = "e" * 64
    assert create_component_interaction_event(VALID_CHOICE_LIST_FRAME, event).event == event
    with pytest.raises(ProtocolError):
        create_component_interaction_event(VALID_CHOICE_LIST_FRAME, event + "e")
    with pytest.raises(ProtocolError):
        create_component_interaction_event(VALID_CHOICE_LIST_FRAME, "submit\n")


def test_selection_event_from_model_and_mapping() -> None:
    frame = decode_component_frame(VALID_CHOICE_LIST_FRAME).unwrap()
    from_model = create_component_select_event(frame, "docs")
    from_mapping = create_component_select_event(VALID_CHOICE_LIST_FRAME, "docs")
    assert isinstance(from_model, ComponentSelectEvent)
    assert from_model == from_mapping
    with pytest.raises(ProtocolError):
        create_component_select_event({"componentKey": "choice-list"}, "docs")
    with pytest.raises(ProtocolError):
        create_component_select_event(frame, "")


def test_encode_component_event_rejects_invalid_events() -> None:
    event: Any
    for event in (
        {"type": "render"},
        {"type": "select"},
        [],
        None,
        {**create_component_select_event(VALID_CHOICE_LIST_FRAME, "docs").to_wire(), "version": 2},
    ):
        with pytest.raises(ProtocolError):
            encode_component_event(event)


def test_candidate_check() -> None:
    assert is_component_frame_candidate(VALID_CHOICE_LIST_FRAME)
    assert is_component_frame_candidate(js_stringify(VALID_CHOICE_LIST_FRAME))
    assert is_component_frame_candidate({"protocol": "agentskit.chat.component"})
    assert not is_component_frame_candidate({"protocol": "agentskit.chat.turn"})
    assert not is_component_frame_candidate("{")
    assert not is_component_frame_candidate(None)
    assert not is_component_frame_candidate([VALID_CHOICE_LIST_FRAME])


def test_format_semantic_fallback() -> None:
    fallback = SemanticFallback(kind="chart", summary="Revenue rose 12%.")
    assert format_semantic_fallback(fallback) == "[unsupported visual: chart] Revenue rose 12%."
    with pytest.raises(ProtocolError):
        format_semantic_fallback({"kind": "", "summary": "x"})


# --- properties ----------------------------------------------------------------------------------

MARKER = "Zq7MARKERx9w"
keys = st.from_regex(r"[a-z][a-z0-9-]{0,63}", fullmatch=True)
safe_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", fullmatch=True)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
bounded = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)
any_json = st.recursive(
    json_leaves | st.just(10**400) | st.just(float("inf")),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)
frames = st.builds(
    lambda key, instance, props, kind, summary: {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": key,
        "instanceId": instance,
        "props": props,
        "fallback": {"kind": kind, "summary": summary},
    },
    keys,
    safe_ids,
    bounded,
    st.text(min_size=1, max_size=64).filter(lambda s: len(s.encode("utf-16-le")) <= 128),
    st.text(min_size=1, max_size=200),
)


@settings(max_examples=150)
@given(frames)
def test_frame_round_trip(frame: dict[str, Any]) -> None:
    decoded = decode_component_frame(frame)
    assert isinstance(decoded, Decoded)
    again = decode_component_frame(decoded.value.to_json())
    assert isinstance(again, Decoded)
    # Compared as doubles: a large integral float comes back as an int with the same double value.
    assert as_doubles(again.value.to_wire()) == as_doubles(decoded.value.to_wire())
    assert again.value.to_json() == decoded.value.to_json()
    assert isinstance(decoded.value, ComponentFrame)


@settings(max_examples=100)
@given(frames, st.from_regex(r"[a-z][a-z0-9-]{0,63}", fullmatch=True), bounded, safe_ids)
def test_event_round_trip(frame: dict[str, Any], name: str, value: Any, choice: str) -> None:
    interact = create_component_interaction_event(frame, name, value)
    assert isinstance(interact, ComponentInteractEvent)
    assert parse_json_text(encode_component_event(interact))["value"] == parse_json_text(
        js_stringify(value)
    )
    wire = parse_json_text(interact.to_json())
    assert encode_component_event(wire) == interact.to_json()
    select = create_component_select_event(frame, choice)
    assert encode_component_event(parse_json_text(select.to_json())) == select.to_json()


@settings(max_examples=200)
@given(st.binary(max_size=200) | st.text(max_size=200) | any_json)
def test_decoder_never_raises(payload: Any) -> None:
    result = decode_component_frame(payload)
    assert result.ok in (True, False)
    assert is_component_frame_candidate(payload) in (True, False)


def test_decoder_never_raises_on_deep_or_huge_input() -> None:
    for payload in (
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        nested(100_000),
        frame_with(props=nested(100_000)),
        "1e400",
        10**400,
        frame_with(version=10**400),
        frame_with(props={"n": 10**400}),
    ):
        assert decode_component_frame(payload).ok is False
    assert decode_component_frame(frame_with(version=1e400)).diagnostic is not None


def marked(value: Any) -> Any:
    """Put the marker into every string and key of ``value``."""
    if isinstance(value, str):
        return value + MARKER
    if isinstance(value, list):
        return [marked(v) for v in value] + [MARKER]
    if isinstance(value, dict):
        return {marked(k): marked(v) for k, v in value.items()} | {MARKER: MARKER}
    return value


@settings(max_examples=200)
@given(frames | any_json, st.booleans())
def test_diagnostics_never_echo_input(value: Any, as_text: bool) -> None:
    payload = marked(value)
    if as_text:
        try:
            # Cut the last byte so the text fails to parse too, sometimes.
            payload = js_stringify(payload)[: -1 if isinstance(payload, dict) else None]
        except (TypeError, OverflowError):
            payload = MARKER
    result = decode_component_frame(payload)
    if result.diagnostic is not None:
        assert MARKER not in result.diagnostic.message
        assert MARKER not in str(result.diagnostic.to_wire())
