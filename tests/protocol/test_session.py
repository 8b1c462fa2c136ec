"""The application session ``agentskit.chat.session`` v1: fixtures, decoding and migration."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._json import js_stringify, parse_json_text
from agentskit_chat.protocol._result import Decoded, Rejected
from agentskit_chat.protocol._session import (
    Confirmation,
    SessionSnapshot,
    decode_session_snapshot,
    encode_session_snapshot,
)
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.session import (
    PERSISTENT_SESSION_FIXTURE,
    SESSION_CASES,
    SESSION_SNAPSHOT,
)
from tests._vectors import as_doubles

INVALID = {
    "code": "SESSION_INVALID_SNAPSHOT",
    "message": "Session snapshot payload is invalid.",
    "retryable": False,
}


def snapshot_with(**changes: Any) -> dict[str, Any]:
    snapshot = copy.deepcopy(SESSION_SNAPSHOT)
    snapshot.update(changes)
    return snapshot


def with_input(value: Any) -> dict[str, Any]:
    confirmation = {**SESSION_SNAPSHOT["confirmations"][0], "input": value}
    return snapshot_with(confirmations=[confirmation])


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


@pytest.mark.parametrize("case", SESSION_CASES, ids=lambda c: c.name)
def test_conformance_case(case: ConformanceCase) -> None:
    if case.operation == "encode_session_snapshot":
        if case.expect == "raises":
            with pytest.raises(ProtocolError) as info:
                encode_session_snapshot(case.input)
            assert info.value.code == case.code
        else:
            assert encode_session_snapshot(case.input) == case.value
        return
    result = decode_session_snapshot(case.input)
    if case.expect == "ok":
        assert isinstance(result, Decoded)
        assert as_doubles(result.value.to_wire()) == as_doubles(case.value)
        assert encode_session_snapshot(result.value) == js_stringify(case.value)
    else:
        assert isinstance(result, Rejected)
        assert result.diagnostic.to_wire() == {
            "code": case.code,
            "message": case.message,
            "retryable": False,
        }
    # The same answer whether the payload arrives as a value or as JSON text.
    if not isinstance(case.input, str):
        as_text = decode_session_snapshot(js_stringify(case.input))
        assert as_text.ok is result.ok
        assert as_text.diagnostic == result.diagnostic


def test_persistent_fixture_decodes_to_itself_as_text() -> None:
    text = js_stringify(PERSISTENT_SESSION_FIXTURE)
    result = decode_session_snapshot(text)
    assert isinstance(result, Decoded)
    assert result.value.to_json() == text
    assert decode_session_snapshot(text.encode()).ok


def test_v0_migration_uses_v1_key_order() -> None:
    legacy = {k: v for k, v in SESSION_SNAPSHOT.items() if k != "protocol"} | {"version": 0}
    result = decode_session_snapshot(js_stringify(legacy))
    assert isinstance(result, Decoded)
    assert result.value.session_id == "session"
    assert result.value.to_json().startswith(
        '{"protocol":"agentskit.chat.session","version":1,"sessionId":"session",'
    )
    assert result.value.to_json() == js_stringify(SESSION_SNAPSHOT)


def test_version_9_exact_diagnostic() -> None:
    result = decode_session_snapshot(snapshot_with(version=9))
    assert isinstance(result, Rejected)
    assert result.diagnostic.to_wire() == {
        "code": "SESSION_UNSUPPORTED_VERSION",
        "message": "Session snapshot uses an unsupported version.",
        "retryable": False,
    }


def test_not_json() -> None:
    result = decode_session_snapshot("{")
    assert result.diagnostic is not None
    assert result.diagnostic.message == "Session snapshot is not valid JSON."


@pytest.mark.parametrize(
    "value",
    [{"f": len}, {"o": object()}, {"b": b"x"}, {1: "a"}],
    ids=["function", "object", "bytes", "int-key"],
)
def test_confirmation_input_that_is_not_json(value: Any) -> None:
    result = decode_session_snapshot(with_input(value))
    assert result.diagnostic is not None
    assert result.diagnostic.to_wire() == INVALID


def test_confirmation_input_cycles_and_shared_references() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    shared = {"a": 1}
    for value in (cyclic, {"x": shared, "y": shared}):
        assert decode_session_snapshot(with_input(value)).diagnostic is not None


def test_confirmation_input_bounds() -> None:
    assert decode_session_snapshot(with_input({str(i): i for i in range(999)})).ok
    assert not decode_session_snapshot(with_input({str(i): i for i in range(1000)})).ok
    assert decode_session_snapshot(with_input({"s": "😀" * 8192})).ok
    assert not decode_session_snapshot(with_input({"s": "😀" * 8192 + "a"})).ok
    assert decode_session_snapshot(with_input({"😀" * 128: 1})).ok
    assert not decode_session_snapshot(with_input({"😀" * 128 + "k": 1})).ok


def test_confirmation_input_proto_key_dropped_only_at_top_level() -> None:
    result = decode_session_snapshot(
        js_stringify(with_input({"__proto__": [1], "a": {"__proto__": 2}}))
    )
    assert isinstance(result, Decoded)
    assert result.value.confirmations[0].input == {"a": {"__proto__": 2}}


def test_hostile_objects_are_invalid_and_never_raise() -> None:
    for payload in (Hostile(), snapshot_with(conversation=Hostile()), with_input(Hostile())):
        result = decode_session_snapshot(payload)
        assert result.diagnostic is not None
        assert result.diagnostic.to_wire() == INVALID


def test_decoded_snapshot_is_frozen() -> None:
    snapshot = decode_session_snapshot(SESSION_SNAPSHOT).unwrap()
    assert isinstance(snapshot, SessionSnapshot)
    assert isinstance(snapshot.confirmations, tuple)
    confirmation = snapshot.confirmations[0]
    assert isinstance(confirmation, Confirmation)
    assert isinstance(confirmation.input, MappingProxyType)
    with pytest.raises(TypeError):
        confirmation.input["to"] = "b"  # type: ignore[index]
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises its own ValidationError
        snapshot.cursor = 3  # type: ignore[misc]


def test_optional_fields_are_omitted_not_null() -> None:
    text = encode_session_snapshot(PERSISTENT_SESSION_FIXTURE)
    for key in ("activeTurn", "terminalTurns"):
        assert key not in text
    assert "null" not in text


def test_encoder_revalidates_and_raises() -> None:
    snapshot = decode_session_snapshot(SESSION_SNAPSHOT).unwrap()
    assert encode_session_snapshot(snapshot) == js_stringify(SESSION_SNAPSHOT)
    bad: Any
    for bad in (
        None,
        [],
        snapshot_with(protocol=None),
        snapshot_with(version=0),
        with_input({"f": len}),
    ):
        with pytest.raises(ProtocolError) as info:
            encode_session_snapshot(bad)
        assert info.value.code == "SESSION_INVALID_SNAPSHOT"


def test_integral_floats_and_negative_zero() -> None:
    result = decode_session_snapshot(
        js_stringify(SESSION_SNAPSHOT).replace('"cursor":2', '"cursor":2.0')
    )
    assert isinstance(result, Decoded)
    assert result.value.cursor == 2
    assert '"cursor":2,' in result.value.to_json()
    assert decode_session_snapshot(snapshot_with(cursor=-0.0)).ok
    assert not decode_session_snapshot(snapshot_with(cursor=2.5)).ok
    assert not decode_session_snapshot(snapshot_with(cursor=True)).ok
    assert not decode_session_snapshot(snapshot_with(cursor=2**53)).ok


# --- properties ----------------------------------------------------------------------------------

MARKER = "Kp2MARKERj5y"
ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,40}", fullmatch=True)
states = st.text(min_size=1, max_size=30)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
inputs = st.dictionaries(
    st.text(max_size=8).filter(lambda k: k != "__proto__"),
    st.recursive(
        json_leaves,
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=20,
    ),
    max_size=5,
)
timestamps = st.sampled_from(
    ["2026-07-11T00:00:00.000Z", "2026-07-11T03:00+05:30", "0000-02-29T23:59:59.123456-23:59"]
)
statuses = st.sampled_from(
    ["pending", "approving", "rejecting", "expiring", "approved", "rejected", "expired"]
)


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "protocol": "agentskit.chat.session",
        "version": 1,
        "sessionId": draw(ids),
        "definitionId": draw(ids),
        "definitionRevision": draw(st.integers(1, 2**53 - 1)),
        "updatedAt": draw(timestamps),
        "cursor": draw(st.integers(0, 2**53 - 1)),
    }
    if draw(st.booleans()):
        snapshot["activeTurn"] = {"turnId": draw(ids), "expiresAt": draw(st.integers(0, 2**40))}
    if draw(st.booleans()):
        turns = draw(st.lists(ids, max_size=5, unique=True))
        outcome = st.sampled_from(["completed", "indeterminate"])
        snapshot["terminalTurns"] = [{"turnId": t, "outcome": draw(outcome)} for t in turns]
    if draw(st.booleans()):
        decisions = [
            {
                "messageId": message_id,
                "input": draw(st.text(max_size=20)),
                "routeId": draw(ids),
                "kind": draw(st.sampled_from(["deterministic", "repaired", "fallback"])),
                "content": draw(st.text(max_size=20)),
                "fromState": draw(states),
                "toState": draw(states),
            }
            for message_id in draw(st.lists(ids, max_size=4, unique=True))
        ]
        snapshot["conversation"] = {"state": draw(states), "decisions": decisions}
    tokens = draw(st.lists(ids, max_size=4, unique=True))
    calls = draw(st.lists(ids, min_size=len(tokens), max_size=len(tokens), unique=True))
    snapshot["confirmations"] = [
        {
            "token": token,
            "action": draw(ids),
            "input": draw(inputs),
            "toolCallId": call,
            "expiresAt": draw(st.integers(0, 2**53 - 1)),
            "status": draw(statuses),
        }
        for token, call in zip(tokens, calls, strict=True)
    ]
    return snapshot


@settings(max_examples=150)
@given(snapshots())
def test_round_trip(snapshot: dict[str, Any]) -> None:
    decoded = decode_session_snapshot(snapshot)
    assert isinstance(decoded, Decoded)
    text = encode_session_snapshot(decoded.value)
    again = decode_session_snapshot(text)
    assert isinstance(again, Decoded)
    assert as_doubles(again.value.to_wire()) == as_doubles(decoded.value.to_wire())
    assert again.value.to_json() == text
    legacy = {k: v for k, v in snapshot.items() if k != "protocol"} | {"version": 0}
    migrated = decode_session_snapshot(legacy)
    assert isinstance(migrated, Decoded)
    assert migrated.value.to_json() == text


any_json = st.recursive(
    json_leaves | st.just(10**400) | st.just(float("inf")),
    lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=8), c, max_size=5),
    max_leaves=40,
)


@settings(max_examples=200)
@given(st.binary(max_size=200) | st.text(max_size=200) | any_json)
def test_decoder_never_raises(payload: Any) -> None:
    assert decode_session_snapshot(payload).ok in (True, False)


def test_decoder_never_raises_on_deep_or_huge_input() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = {"n": deep}
    for payload in (
        "[" * 100_000 + "]" * 100_000,
        deep,
        with_input(deep),
        snapshot_with(conversation=deep),
        snapshot_with(version=10**400),
        snapshot_with(cursor=10**400),
        "1e400",
    ):
        assert decode_session_snapshot(payload).ok is False


def marked(value: Any) -> Any:
    if isinstance(value, str):
        return MARKER + value
    if isinstance(value, list):
        return [marked(v) for v in value]
    if isinstance(value, dict):
        return {marked(k): marked(v) for k, v in value.items()}
    return value


@settings(max_examples=100)
@given(snapshots(), st.sampled_from(["keys", "values", "text"]))
def test_diagnostics_never_echo_input(snapshot: dict[str, Any], mode: str) -> None:
    if mode == "keys":
        payload: Any = marked(snapshot)
    elif mode == "values":
        payload = {k: marked(v) for k, v in snapshot.items()} | {"version": MARKER}
    else:
        payload = js_stringify(snapshot)[:-1] + ',"' + MARKER + '":' + MARKER + "}"
    result = decode_session_snapshot(payload)
    assert isinstance(result, Rejected)
    assert MARKER not in str(result.diagnostic.to_wire())
    assert parse_json_text(js_stringify(result.diagnostic.to_wire()))["retryable"] is False
