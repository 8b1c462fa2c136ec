"""The snapshot lines of one turn's stream, each message encoded once.

Every line of a turn's stream carries the whole conversation, and from one line to the next
only the newest messages change. :class:`SnapshotLines` keeps each message's validated wire JSON,
and what it counts toward the memory record's limits, for as long as the turn shows that same
message object, so a line costs its envelope and the messages that changed rather than the
whole conversation. The envelope is validated by
:func:`~agentskit_chat.protocol.create_snapshot_event` whenever what it carries besides its id,
sequence and time changes (status, usage, lineage, error: a few times a turn); each line then
checks those three itself. A line is byte for byte what ``create_snapshot_event`` makes of the
same arguments: each message was validated by ``to_record``, and the record's structural
limits are checked on the totals (they add up message by message).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import TokenUsage, create_snapshot_event
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER, js_stringify
from agentskit_chat.protocol._message import (
    MEMORY_RECORD_WRAPPER_NODES,
    MESSAGE_MAX_CONTAINER_SIZE,
    MESSAGE_MAX_NODES,
    message_record_nodes,
)
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import ChatMessage
from agentskit_chat.runtime._messages import format_message_timestamp

__all__ = ["SnapshotLines"]

#: Where the messages go in a snapshot line built with none (the payload's first key).
_EMPTY: Final = '"payload":{"messages":[]'
_LIMITS_MESSAGE: Final = "Turn snapshot messages exceed the record limits."
#: The id, sequence and time a checked envelope is built with (replaced in each line).
_PLACEHOLDER_ID: Final = "placeholder"
_PLACEHOLDER_AT: Final = datetime(2026, 1, 1, tzinfo=UTC)


def _head(event_id: str, session_id: str, turn_id: str, sequence: int, emitted_at: str) -> str:
    """A snapshot line up to its messages, in the protocol's key order."""
    return (
        f'{{"protocol":"agentskit.chat.turn","version":1,"eventId":{js_stringify(event_id)},'
        f'"sessionId":{js_stringify(session_id)},"turnId":{js_stringify(turn_id)},'
        f'"sequence":{sequence},"emittedAt":"{emitted_at}","event":"server.turn.snapshot",'
        f"{_EMPTY[:-1]}"
    )


class _Frame(NamedTuple):
    """What a line carries besides its messages, its id, its sequence and its time."""

    session_id: str
    turn_id: str
    status: str
    usage: TokenUsage
    lineage: Mapping[str, Any] | None
    error: Mapping[str, Any] | None

    def envelope(self, event_id: str, sequence: int, emitted_at: datetime) -> str:
        """The protocol's own line of this frame, without messages (validated by it)."""
        return create_snapshot_event(
            event_id=event_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            sequence=sequence,
            emitted_at=emitted_at,
            messages=[],
            status=self.status,
            usage=self.usage,
            lineage=self.lineage,
            error=self.error,
        ).to_json()


class _Encoded(NamedTuple):
    message: ChatMessage  # kept, so that its id is not reused while it is known
    text: str
    nodes: int


class SnapshotLines:
    """Encodes the snapshot lines of one turn, remembering the messages of the last line."""

    __slots__ = ("_frame", "_known")

    def __init__(self) -> None:
        self._known: dict[int, _Encoded] = {}
        #: The frame last checked, and the line's end after the messages.
        self._frame: tuple[_Frame, str] | None = None

    def _tail(self, frame: _Frame) -> str | None:
        """The end of a line after its messages, for this frame (validated once); ``None``
        when the line's layout is not the expected one."""
        known = self._frame
        if known is not None and known[0] == frame:
            return known[1]
        envelope = frame.envelope(_PLACEHOLDER_ID, 0, _PLACEHOLDER_AT)
        at = format_message_timestamp(_PLACEHOLDER_AT)
        head = _head(_PLACEHOLDER_ID, frame.session_id, frame.turn_id, 0, at)
        if not envelope.startswith(head + "]"):  # pragma: no cover - the protocol's layout
            return None
        tail = envelope[len(head) + 1 :]
        # A copy: a lineage or error mapping the caller changes in place is a new frame.
        self._frame = (copy.deepcopy(frame), tail)
        return tail

    def _encoded(self, message: ChatMessage) -> _Encoded:
        known = self._known.get(id(message))
        if known is not None and known.message is message:
            return known
        wire = message.to_record().to_wire()
        nodes = message_record_nodes(wire)
        if nodes is None:
            raise ProtocolError("PROTOCOL_INVALID_PAYLOAD", _LIMITS_MESSAGE)
        return _Encoded(message, js_stringify(wire), nodes)

    def encode(
        self,
        *,
        event_id: str,
        session_id: str,
        turn_id: str,
        sequence: int,
        emitted_at: datetime,
        messages: Sequence[ChatMessage],
        status: str,
        usage: TokenUsage,
        lineage: Mapping[str, Any] | None,
        error: Mapping[str, Any] | None,
    ) -> str:
        """One ``server.turn.snapshot`` line (compact JSON, without its line feed).

        Raises:
            ProtocolError: a message is not a valid record (``AK_CONFIG_INVALID``), or the
                messages exceed the memory record's limits or the envelope is invalid
                (``PROTOCOL_INVALID_PAYLOAD``), as ``create_snapshot_event`` would.
        """
        encoded = [self._encoded(message) for message in messages]
        self._known = {id(entry.message): entry for entry in encoded}
        nodes = MEMORY_RECORD_WRAPPER_NODES + sum(entry.nodes for entry in encoded)
        if nodes > MESSAGE_MAX_NODES or len(encoded) > MESSAGE_MAX_CONTAINER_SIZE:
            raise ProtocolError("PROTOCOL_INVALID_PAYLOAD", _LIMITS_MESSAGE)
        texts = ",".join(entry.text for entry in encoded)
        frame = _Frame(session_id, turn_id, status, usage, lineage, error)
        tail = self._tail(frame)
        if (
            tail is None
            or not is_safe_id(event_id)
            or type(sequence) is not int
            or not 0 <= sequence <= MAX_SAFE_INTEGER
            or not isinstance(emitted_at, datetime)
            or emitted_at.utcoffset() is None
        ):
            # What the checks above do not cover is refused (or built) by the protocol itself.
            envelope = frame.envelope(event_id, sequence, emitted_at)
            head, _, tail = envelope.partition(_EMPTY)
            return f"{head}{_EMPTY[:-1]}{texts}]{tail}"
        at = format_message_timestamp(emitted_at)
        return f"{_head(event_id, session_id, turn_id, sequence, at)}{texts}]{tail}"
