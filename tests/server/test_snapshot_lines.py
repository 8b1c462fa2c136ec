"""The stream's snapshot lines: each message encoded once, the same bytes as the protocol's
encoder, the same refusals at the record limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import (
    MESSAGE_MAX_NODES,
    MessageTextPart,
    TokenUsage,
    ToolCall,
    create_snapshot_event,
)
from agentskit_chat.runtime import ChatMessage
from agentskit_chat.server._snapshot_lines import SnapshotLines

NOW = datetime(2026, 7, 13, 9, 30, 15, 123456, tzinfo=UTC)
USAGE = TokenUsage(prompt_tokens=3, completion_tokens=5, total_tokens=8)
FAILED = {"version": 1, "code": "CHAT_TURN_FAILED", "message": "Failed.", "retryable": True}


def conversation() -> list[ChatMessage]:
    """Messages with every optional field the wire record has, and text JSON must escape."""
    return [
        ChatMessage(id="s1", role="system", content="Be brief.", created_at=NOW),
        ChatMessage(
            id="u1",
            role="user",
            content='Quote " backslash \\ tab \t line\n emoji \U0001f600 \u2028',
            created_at=NOW + timedelta(seconds=1),
            parts=(MessageTextPart(type="text", text="part ü"),),
            metadata={"agentskit.chat.choice": "pick-1", "nested": {"n": [1, 2.5, None, True]}},
        ),
        ChatMessage(
            id="a1",
            role="assistant",
            content="",
            created_at=NOW + timedelta(seconds=2),
            status="complete",
            tool_calls=(
                ToolCall(id="c1", name="lookup", args={"q": "x", "n": 1e21}, status="complete"),
            ),
        ),
        ChatMessage(
            id="t1",
            role="tool",
            content="42",
            created_at=NOW + timedelta(seconds=3),
            tool_call_id="c1",
        ),
        ChatMessage(
            id="a2",
            role="assistant",
            content="Stream",
            created_at=NOW + timedelta(seconds=4),
            status="streaming",
        ),
    ]


def arguments(messages: list[ChatMessage], **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "event_id": "event-1",
        "session_id": "session-1",
        "turn_id": "turn-1",
        "sequence": 7,
        "emitted_at": NOW,
        "messages": messages,
        "status": "streaming",
        "usage": USAGE,
        "lineage": {"operation": "submit"},
        "error": None,
    }
    values.update(changes)
    return values


def reference(messages: list[ChatMessage], **changes: Any) -> str:
    values = arguments(messages, **changes)
    values["messages"] = [message.to_record() for message in messages]
    return create_snapshot_event(**values).to_json()


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": "complete", "lineage": None},
        {"status": "error", "error": FAILED},
        {"lineage": {"operation": "retry", "parentTurnId": "t0", "sourceMessageId": "a1"}},
    ],
)
def test_a_line_is_byte_for_byte_the_protocol_encoders_line(changes: dict[str, Any]) -> None:
    messages = conversation()
    assert SnapshotLines().encode(**arguments(messages, **changes)) == reference(
        messages, **changes
    )


def test_an_empty_conversation_encodes_like_the_protocol_encoder() -> None:
    assert SnapshotLines().encode(**arguments([], status="idle")) == reference([], status="idle")


def test_the_lines_of_a_stream_follow_each_new_message_and_reuse_the_others() -> None:
    lines = SnapshotLines()
    messages = conversation()
    streamed = []
    for text in ("Stream", "Stream more", "Stream more words"):
        newest = ChatMessage(
            id="a2", role="assistant", content=text, created_at=NOW, status="streaming"
        )
        messages = [*messages[:-1], newest]
        streamed.append(lines.encode(**arguments(messages)))
        assert streamed[-1] == reference(messages)
    assert len(set(streamed)) == 3
    # A history message is encoded once: a line is made without calling its encoder again.
    history = messages[0]
    encoded = lines._encoded(history)
    assert lines._encoded(history) is encoded
    # An equal but new message object is encoded for itself.
    assert lines._encoded(ChatMessage(**vars_of(history))) is not encoded


def vars_of(message: ChatMessage) -> dict[str, Any]:
    return {name: getattr(message, name) for name in ChatMessage.__slots__}


def test_messages_past_the_record_limits_are_refused_as_the_protocol_encoder_refuses() -> None:
    # Each message counts 6 JSON values plus its metadata's: this many pass the bound.
    per_message = 6 + 1 + 400
    count = MESSAGE_MAX_NODES // per_message + 1
    messages = [
        ChatMessage(
            id=f"m{index}",
            role="user",
            content="x",
            created_at=NOW,
            metadata={f"k{key}": key for key in range(400)},
        )
        for index in range(count)
    ]
    with pytest.raises(ProtocolError) as ours:
        SnapshotLines().encode(**arguments(messages))
    with pytest.raises(ProtocolError) as protocol:
        reference(messages)
    assert ours.value.code == protocol.value.code == "PROTOCOL_INVALID_PAYLOAD"
    # One message fewer fits, and both encoders agree on it byte for byte.
    fewer = messages[: count - 1]
    assert SnapshotLines().encode(**arguments(fewer)) == reference(fewer)


def test_an_invalid_message_is_refused_before_any_line_is_made() -> None:
    bad = ChatMessage(id="", role="user", content="x", created_at=NOW)
    with pytest.raises(ProtocolError):
        SnapshotLines().encode(**arguments([bad]))


def test_lines_whose_id_sequence_time_and_usage_change_match_the_protocol_encoder() -> None:
    lines = SnapshotLines()
    messages = conversation()
    cases = [
        {"event_id": "e-1", "sequence": 0, "emitted_at": NOW},
        {"event_id": "e.2:x_y", "sequence": 9007199254740991, "emitted_at": NOW},
        {
            "event_id": "E3",
            "sequence": 12,
            "emitted_at": datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        },
        {
            "event_id": "e4",
            "sequence": 13,
            "usage": TokenUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
        },
        {"event_id": "e5", "sequence": 14, "status": "complete", "lineage": None},
        {"event_id": "e6", "sequence": 15, "status": "error", "error": FAILED},
    ]
    assert cases
    for changes in cases:
        assert lines.encode(**arguments(messages, **changes)) == reference(messages, **changes)


@pytest.mark.parametrize(
    "changes",
    [
        {"event_id": "bad id"},
        {"event_id": ""},
        {"sequence": -1},
        {"sequence": 9007199254740992},
        {"emitted_at": datetime(2026, 7, 13)},  # naive
        {"status": "waiting"},
        {"session_id": "not safe"},
    ],
)
def test_an_invalid_envelope_is_refused_as_the_protocol_encoder_refuses(
    changes: dict[str, Any],
) -> None:
    lines = SnapshotLines()
    messages = conversation()
    lines.encode(**arguments(messages))  # a checked envelope is known: it must not be reused
    with pytest.raises(ProtocolError) as ours:
        lines.encode(**arguments(messages, **changes))
    with pytest.raises(ProtocolError) as protocol:
        reference(messages, **changes)
    assert ours.value.code == protocol.value.code


def test_a_lineage_changed_in_place_is_a_new_envelope_not_the_checked_one() -> None:
    lines = SnapshotLines()
    messages = conversation()
    lineage = {"operation": "submit"}
    assert lines.encode(**arguments(messages, lineage=lineage)) == reference(
        messages, lineage={"operation": "submit"}
    )
    lineage.update(operation="retry", parentTurnId="t0", sourceMessageId="a1")
    assert lines.encode(**arguments(messages, lineage=lineage)) == reference(
        messages, lineage=dict(lineage)
    )
