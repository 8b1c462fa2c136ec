"""The canonical message record and its wire conversion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import MessageRecord, MessageTextPart, ToolCall
from agentskit_chat.runtime import ChatMessage

WHEN = datetime(2026, 7, 13, 12, 30, 45, 123456, tzinfo=UTC)


def message(**changes: Any) -> ChatMessage:
    fields: dict[str, Any] = {"id": "m1", "role": "user", "content": "hi", "created_at": WHEN}
    fields.update(changes)
    return ChatMessage(**fields)


def test_minimal_message_to_wire() -> None:
    assert message().to_wire() == {
        "id": "m1",
        "role": "user",
        "content": "hi",
        "status": "complete",
        "createdAt": "2026-07-13T12:30:45.123Z",
    }


def test_full_message_round_trips_through_the_record() -> None:
    full = message(
        role="assistant",
        status="streaming",
        parts=(MessageTextPart(type="text", text="part"),),
        tool_calls=(ToolCall(id="c1", name="search", args={"q": "x"}, status="pending"),),
        tool_call_id="c0",
        metadata={"tenant": "docs", "nested": {"a": [1, 2]}},
    )
    record = full.to_record()
    assert isinstance(record, MessageRecord)
    wire = full.to_wire()
    assert list(wire) == [
        "id",
        "role",
        "content",
        "status",
        "createdAt",
        "parts",
        "toolCalls",
        "toolCallId",
        "metadata",
    ]
    back = ChatMessage.from_record(record)
    assert back.to_wire() == wire
    assert ChatMessage.from_record(wire).to_wire() == wire
    # Milliseconds survive; microseconds below them are truncated, as toISOString does.
    assert back.created_at == WHEN.replace(microsecond=123000)


def test_other_timezones_are_written_in_utc() -> None:
    plus_two = WHEN.astimezone(timezone(timedelta(hours=2)))
    assert message(created_at=plus_two).to_wire()["createdAt"] == "2026-07-13T12:30:45.123Z"


def test_metadata_is_copied_and_read_only() -> None:
    source = {"k": "v"}
    held = message(metadata=source)
    source["k"] = "changed"
    assert held.metadata == {"k": "v"}
    assert isinstance(held.metadata, MappingProxyType)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"created_at": datetime(2026, 7, 13)}, "timezone-aware"),
        ({"role": "owner"}, "role"),
        ({"status": "waiting"}, "status"),
    ],
)
def test_invalid_construction_raises(changes: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        message(**changes)


@pytest.mark.parametrize(
    "changes",
    [{"id": ""}, {"metadata": {"bad": {1, 2}}}, {"metadata": {"n": float("nan")}}],
)
def test_invalid_records_raise_the_fixed_error(changes: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        message(**changes).to_wire()
    assert caught.value.code == "AK_CONFIG_INVALID"
    assert caught.value.message == "Serialized message record is invalid."


@pytest.mark.parametrize(
    "wire",
    [
        {"id": "m", "role": "user", "content": "x", "status": "complete"},
        {
            "id": "m",
            "role": "user",
            "content": "x",
            "status": "complete",
            "createdAt": "2026-07-13T12:30:45Z",
        },
        {
            "id": "m",
            "role": "user",
            "content": "x",
            "status": "complete",
            "createdAt": "0000-01-01T00:00:00.000Z",
        },
    ],
)
def test_from_record_rejects_invalid_wire(wire: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        ChatMessage.from_record(wire)
    assert caught.value.message == "Serialized message record is invalid."


@settings(max_examples=100)
@given(
    st.datetimes(
        min_value=datetime(1000, 1, 1),
        max_value=datetime(9998, 12, 31),
        timezones=st.just(UTC),
    ),
    st.text(max_size=20),
)
def test_created_at_round_trips_to_the_millisecond(when: datetime, content: str) -> None:
    back = ChatMessage.from_record(message(created_at=when, content=content).to_record())
    assert back.created_at == when.replace(microsecond=when.microsecond // 1000 * 1000)
    assert back.content == content
