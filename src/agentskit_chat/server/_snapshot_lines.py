"""The snapshot lines of one turn's stream, each message encoded once.

Every line of a turn's stream carries the whole conversation, and from one line to the next
only the newest messages change. :class:`SnapshotLines` keeps each message's validated wire JSON,
and what it counts toward the memory record's limits, for as long as the turn shows that same
message object, so a line costs its envelope and the messages that changed rather than the
whole conversation. A line is byte for byte what
:func:`~agentskit_chat.protocol.create_snapshot_event` makes of the same arguments: the
envelope is built and validated by it, each message was validated by ``to_record``, and the
record's structural limits are checked on the totals (they add up message by message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import TokenUsage, create_snapshot_event
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._message import (
    MESSAGE_MAX_CONTAINER_SIZE,
    MESSAGE_MAX_NODES,
    message_record_nodes,
)
from agentskit_chat.runtime import ChatMessage

__all__ = ["SnapshotLines"]

#: The JSON values of the memory record around its messages: the wrapper, its version, the
#: array.
_WRAPPER_NODES: Final = 3
#: Where the messages go in a snapshot line built with none (the payload's first key).
_EMPTY: Final = '"payload":{"messages":[]'
_LIMITS_MESSAGE: Final = "Turn snapshot messages exceed the record limits."


class _Encoded(NamedTuple):
    message: ChatMessage  # kept, so that its id is not reused while it is known
    text: str
    nodes: int


class SnapshotLines:
    """Encodes the snapshot lines of one turn, remembering the messages of the last line."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[int, _Encoded] = {}

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
        nodes = _WRAPPER_NODES + sum(entry.nodes for entry in encoded)
        if nodes > MESSAGE_MAX_NODES or len(encoded) > MESSAGE_MAX_CONTAINER_SIZE:
            raise ProtocolError("PROTOCOL_INVALID_PAYLOAD", _LIMITS_MESSAGE)
        envelope = create_snapshot_event(
            event_id=event_id,
            session_id=session_id,
            turn_id=turn_id,
            sequence=sequence,
            emitted_at=emitted_at,
            messages=[],
            status=status,
            usage=usage,
            lineage=lineage,
            error=error,
        ).to_json()
        head, found, tail = envelope.partition(_EMPTY)
        if not found:  # pragma: no cover - the payload's first key is always its messages
            raise ProtocolError("PROTOCOL_INVALID_PAYLOAD", _LIMITS_MESSAGE)
        texts = ",".join(entry.text for entry in encoded)
        return f'{head}"payload":{{"messages":[{texts}]{tail}'
