"""The canonical in-memory chat message and its conversion to the wire record.

A :class:`ChatMessage` is what the runtime passes around: ``created_at`` is a real ``datetime``
and collections are immutable. The wire form is the protocol's
:class:`~agentskit_chat.protocol.MessageRecord` (``createdAt`` as ``YYYY-MM-DDTHH:MM:SS.sssZ``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import (
    MessagePart,
    MessageRecord,
    ToolCall,
    validate_message_records,
)

__all__ = ["ChatMessage", "MessageRole", "MessageStatus"]

#: Who wrote a message.
MessageRole = Literal["user", "assistant", "system", "tool"]
#: Where a message is in its life: ``streaming`` while an assistant turn is running.
MessageStatus = Literal["pending", "streaming", "complete", "error"]

_INVALID_CODE: Final = "AK_CONFIG_INVALID"
_INVALID_MESSAGE: Final = "Serialized message record is invalid."
_ROLES: Final = frozenset({"user", "assistant", "system", "tool"})
_STATUSES: Final = frozenset({"pending", "streaming", "complete", "error"})


def _invalid() -> ProtocolError:
    return ProtocolError(_INVALID_CODE, _INVALID_MESSAGE)


def format_message_timestamp(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.sssZ`` in UTC, milliseconds truncated (JavaScript ``toISOString``)."""
    moment = value.astimezone(UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def parse_message_timestamp(value: str) -> datetime:
    """The aware UTC ``datetime`` of a validated ``YYYY-MM-DDTHH:MM:SS.sssZ`` timestamp.

    Raises:
        ValueError: when the instant is outside what ``datetime`` can hold (year 0000).
    """
    return datetime(
        int(value[0:4]),
        int(value[5:7]),
        int(value[8:10]),
        int(value[11:13]),
        int(value[14:16]),
        int(value[17:19]),
        int(value[20:23]) * 1000,
        tzinfo=UTC,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of a conversation, as the runtime holds it.

    Attributes:
        id: A non-empty identifier, unique within the conversation.
        role: ``user``, ``assistant``, ``system`` or ``tool``.
        content: The text; assistant messages may hold ordered assistant content.
        created_at: When the message was created; must be timezone-aware.
        status: ``pending``, ``streaming``, ``complete`` (the default) or ``error``.
        parts: Typed content parts (images, files, ...), when the message has any.
        tool_calls: Tool calls the message carries, when it has any.
        tool_call_id: For ``tool`` messages, the call this message answers.
        metadata: Free-form JSON metadata, held read-only.

    Raises:
        ValueError: when ``created_at`` is naive, or ``role``/``status`` is not one of the
            allowed values.

    Example:
        >>> from datetime import UTC, datetime
        >>> message = ChatMessage(
        ...     id="u1", role="user", content="install cli",
        ...     created_at=datetime(2026, 7, 13, tzinfo=UTC),
        ... )
        >>> message.to_record().created_at
        '2026-07-13T00:00:00.000Z'
    """

    id: str
    role: MessageRole
    content: str
    created_at: datetime
    status: MessageStatus = "complete"
    parts: tuple[MessagePart, ...] | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_call_id: str | None = None
    metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.created_at.tzinfo is None or self.created_at.utcoffset() is None:
            raise ValueError("created_at must be a timezone-aware datetime")
        if self.role not in _ROLES:
            raise ValueError("role must be user, assistant, system or tool")
        if self.status not in _STATUSES:
            raise ValueError("status must be pending, streaming, complete or error")
        if self.metadata is not None and not isinstance(self.metadata, MappingProxyType):
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def to_record(self) -> MessageRecord:
        """The validated wire record.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when the message does not satisfy the record
                schema or its structural limits (an empty id, non-JSON metadata, ...).
        """
        wire: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "status": self.status,
            "createdAt": format_message_timestamp(self.created_at),
        }
        if self.parts is not None:
            wire["parts"] = [part.to_wire() for part in self.parts]
        if self.tool_calls is not None:
            wire["toolCalls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            wire["toolCallId"] = self.tool_call_id
        if self.metadata is not None:
            wire["metadata"] = _plain(self.metadata)
        records = validate_message_records([wire])
        if records is None:
            raise _invalid()
        return records[0]

    def to_wire(self) -> dict[str, Any]:
        """The wire record as plain JSON data (camelCase keys, absent optionals omitted).

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when the message is not a valid record.
        """
        return self.to_record().to_wire()

    @classmethod
    def from_record(cls, record: MessageRecord | Mapping[str, Any]) -> ChatMessage:
        """A message from a wire record (a validated model or plain wire data).

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when ``record`` is not a valid message record.
        """
        if not isinstance(record, MessageRecord):
            validated = validate_message_records([_plain(record)])
            if validated is None:
                raise _invalid()
            record = validated[0]
        try:
            created_at = parse_message_timestamp(record.created_at)
        except ValueError:
            raise _invalid() from None
        return cls(
            id=record.id,
            role=record.role,
            content=record.content,
            created_at=created_at,
            status=record.status,
            parts=record.parts,
            tool_calls=record.tool_calls,
            tool_call_id=record.tool_call_id,
            metadata=record.metadata,
        )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value
