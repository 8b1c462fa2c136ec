"""How much of a conversation one turn carries: the newest messages, within fixed bounds.

A turn snapshot carries the whole conversation, and the turn protocol bounds it: at most 10,000
JSON values (``MESSAGE_MAX_NODES``, counted on the memory record). A conversation that only
grows would pass that bound after a few hundred turns, and from then on no turn could be shown
or saved. So the chat handler compacts the conversation a turn starts from: when it holds more
than :data:`HISTORY_MAX_MESSAGES` messages, :data:`HISTORY_MAX_NODES` JSON values or
:data:`HISTORY_MAX_CHARS` characters of text, its oldest turns are dropped until it is within
three quarters of each bound (so the next compaction is many turns away), and the turn saves
the compacted conversation. What one turn adds then always has at least 4,000 JSON values of
room below the protocol's bound; a turn larger than that is refused with a typed, non-retryable
diagnostic (:class:`~agentskit_chat.errors.ConversationTooLargeError`), and the stored
conversation stays as it was.

The cut is made at a user message, so the kept history never starts with an answer whose
question is gone; system messages at the very start (a system prompt) are always kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from agentskit_chat.protocol._message import (
    MEMORY_RECORD_WRAPPER_NODES,
    MESSAGE_MAX_CONTAINER_SIZE,
    MESSAGE_MAX_NODES,
)
from agentskit_chat.runtime import ChatMessage

__all__ = [
    "HISTORY_MAX_CHARS",
    "HISTORY_MAX_MESSAGES",
    "HISTORY_MAX_NODES",
    "compact_history",
    "exceeds_record_limits",
    "message_nodes",
]

#: A conversation with more messages than this is compacted before a turn.
HISTORY_MAX_MESSAGES: Final = 200
#: A conversation counting more JSON values than this (as in its memory record) is compacted.
HISTORY_MAX_NODES: Final = 6000
#: A conversation with more characters of message text than this is compacted.
HISTORY_MAX_CHARS: Final = 1_000_000
#: Compaction keeps the newest turns within this fraction of each bound.
_KEEP: Final = 0.75
#: JSON values of a message record that every message has: the object and its five fields.
_BASE_NODES: Final = 6


def _json_nodes(value: Any) -> int:
    kind = type(value)
    if kind is MappingProxyType or kind is dict:
        items = value.values()
    elif kind is tuple or kind is list:
        items = value
    elif isinstance(value, Mapping):
        items = value.values()
    else:
        return 1
    nodes = 1
    for item in items:
        nodes += _json_nodes(item)
    return nodes


def message_nodes(message: ChatMessage) -> int:
    """How many JSON values ``message`` counts in a memory record (as
    :func:`~agentskit_chat.protocol.message_record_nodes` counts its wire form), without
    encoding the common fields."""
    nodes = _BASE_NODES
    if message.parts is not None:
        nodes += 1 + sum(_json_nodes(part.to_wire()) for part in message.parts)
    if message.tool_calls is not None:
        nodes += 1 + sum(_json_nodes(call.to_wire()) for call in message.tool_calls)
    if message.tool_call_id is not None:
        nodes += 1
    if message.metadata is not None:
        nodes += _json_nodes(message.metadata)
    return nodes


def exceeds_record_limits(messages: Sequence[ChatMessage]) -> bool:
    """Whether ``messages`` are too many, or count too many JSON values, for one memory
    record (and so for one snapshot)."""
    if len(messages) > MESSAGE_MAX_CONTAINER_SIZE:
        return True
    return MEMORY_RECORD_WRAPPER_NODES + sum(message_nodes(m) for m in messages) > MESSAGE_MAX_NODES


def compact_history(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """``messages`` as a turn starts from them: unchanged while within every bound, otherwise
    the leading system messages and the newest turns that fit three quarters of each bound
    (see the module documentation)."""
    kept = tuple(messages)
    nodes = [message_nodes(message) for message in kept]
    chars = [len(message.content) for message in kept]
    if (
        len(kept) <= HISTORY_MAX_MESSAGES
        and sum(nodes) <= HISTORY_MAX_NODES
        and sum(chars) <= HISTORY_MAX_CHARS
    ):
        return kept
    pinned = 0
    while pinned < len(kept) and kept[pinned].role == "system":
        pinned += 1
    room_messages = int(HISTORY_MAX_MESSAGES * _KEEP) - pinned
    room_nodes = int(HISTORY_MAX_NODES * _KEEP) - sum(nodes[:pinned])
    room_chars = int(HISTORY_MAX_CHARS * _KEEP) - sum(chars[:pinned])
    used_nodes = used_chars = 0
    cut = len(kept)
    for index in range(len(kept) - 1, pinned - 1, -1):
        used_nodes += nodes[index]
        used_chars += chars[index]
        if len(kept) - index > room_messages or used_nodes > room_nodes or used_chars > room_chars:
            break
        if kept[index].role == "user":
            cut = index  # a turn boundary within every bound
    return kept[:pinned] + kept[cut:]
