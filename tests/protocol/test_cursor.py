"""The turn-snapshot cursor: reconnects, duplicates and stale deliveries."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._cursor import TurnSnapshotCursor, create_turn_snapshot_cursor
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._turn import SnapshotEvent, decode_turn_event
from agentskit_chat.protocol.fixtures.turn import VALID_TURN_EVENT_FIXTURES

CURRENT = VALID_TURN_EVENT_FIXTURES["complete snapshot with tool call"]
SESSION = "session-conformance"


def current(**changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(CURRENT)
    event.update(changes)
    return event


def test_reference_sequence_step_by_step() -> None:
    cursor = TurnSnapshotCursor(SESSION)
    assert cursor.get_snapshot() is None
    assert cursor.apply(current(eventId="foreign-first", sessionId="other")) is False
    assert cursor.snapshot is None
    assert cursor.apply(current()) is True
    held = cursor.snapshot
    assert held is not None
    assert held.event_id == "event-complete"
    assert cursor.apply(current()) is False
    assert cursor.snapshot is held
    assert cursor.apply(current(eventId="stale", sequence=2)) is False
    assert cursor.snapshot is held
    assert cursor.apply(current(eventId="foreign", sessionId="other", sequence=4)) is False
    assert cursor.snapshot is held
    assert cursor.apply(current(eventId="next", sequence=4)) is True
    after = cursor.get_snapshot()
    assert after is not None
    assert after.event_id == "next"
    assert after.sequence == 4


def test_held_snapshot_is_frozen_and_stale_applies_still_fail() -> None:
    cursor = create_turn_snapshot_cursor(SESSION)
    assert cursor.apply(js_stringify(current()))
    held = cursor.get_snapshot()
    assert isinstance(held, SnapshotEvent)
    with pytest.raises(ValueError, match="frozen"):
        held.sequence = 0  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        held.payload.messages[0].content = "changed"  # type: ignore[misc]
    calls = held.payload.messages[0].tool_calls
    assert calls is not None
    args: Any = calls[0].args
    with pytest.raises(TypeError):
        args["query"] = "x"
    with pytest.raises(AttributeError):
        args.pop("query")
    messages: Any = held.payload.messages
    with pytest.raises(AttributeError):
        messages.append(messages[0])
    assert cursor.apply(current(eventId="stale", sequence=2)) is False
    assert cursor.get_snapshot() is held
    assert calls[0].args == {"query": "hello"}


def test_first_snapshot_may_have_any_sequence() -> None:
    cursor = TurnSnapshotCursor(SESSION)
    assert cursor.apply(current(sequence=9007199254740991))
    assert not cursor.apply(current(sequence=0))
    other = TurnSnapshotCursor(SESSION)
    assert other.apply(current(sequence=0))
    assert other.apply(current(sequence=1))


@pytest.mark.parametrize(
    "payload",
    [
        VALID_TURN_EVENT_FIXTURES["submit"],
        VALID_TURN_EVENT_FIXTURES["diagnostic"],
        {**CURRENT, "version": 2},
        {**CURRENT, "payload": {}},
        "{",
        b"\xff",
        None,
        [CURRENT],
    ],
)
def test_non_snapshots_are_ignored(payload: Any) -> None:
    cursor = TurnSnapshotCursor("session-conformance")
    assert cursor.apply(copy.deepcopy(payload)) is False
    assert cursor.get_snapshot() is None


class Hostile(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("hostile")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("hostile")

    def __len__(self) -> int:
        raise RuntimeError("hostile")


def test_hostile_payload_is_rejected_without_raising() -> None:
    cursor = TurnSnapshotCursor(SESSION)
    assert cursor.apply(current())
    held = cursor.snapshot
    assert cursor.apply(Hostile()) is False
    assert cursor.snapshot is held


def test_accepts_text_bytes_mappings_and_decoded_events() -> None:
    cursor = TurnSnapshotCursor(SESSION)
    assert cursor.apply(js_stringify(current(sequence=1)))
    assert cursor.apply(js_stringify(current(sequence=2)).encode())
    assert cursor.apply(current(sequence=3))
    decoded = decode_turn_event(current(sequence=4)).value
    assert cursor.apply(decoded)
    assert cursor.snapshot is decoded


@pytest.mark.parametrize("session_id", ["", "bad id", "a" * 129, "-leading", None, 1, "x\n"])
def test_session_id_must_be_safe(session_id: Any) -> None:
    with pytest.raises(ProtocolError) as caught:
        TurnSnapshotCursor(session_id)
    assert caught.value.code == "PROTOCOL_INVALID_PAYLOAD"
    assert caught.value.message == "Turn snapshot cursor session id is invalid."


def test_session_id_bounds() -> None:
    assert TurnSnapshotCursor("a" * 128).session_id == "a" * 128


@settings(max_examples=100)
@given(
    st.lists(
        st.tuples(st.sampled_from([SESSION, "other"]), st.integers(0, 20), st.booleans()),
        max_size=12,
    )
)
def test_held_sequence_is_the_newest_valid_snapshot(
    deliveries: list[tuple[str, int, bool]],
) -> None:
    cursor = TurnSnapshotCursor(SESSION)
    best: int | None = None
    for index, (session, sequence, valid) in enumerate(deliveries):
        event = current(eventId=f"e-{index}", sessionId=session, sequence=sequence)
        if not valid:
            event["payload"]["status"] = "waiting"
        accepted = cursor.apply(event)
        expected = valid and session == SESSION and (best is None or sequence > best)
        assert accepted is expected
        if expected:
            best = sequence
        held = cursor.snapshot
        assert (held.sequence if held is not None else None) == best
