"""The chat memory port: where a conversation's messages live between turns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._messages import ChatMessage

__all__ = ["ChatMemory", "InMemoryChatMemory"]


@runtime_checkable
class ChatMemory(Protocol):
    """Loads and saves the messages of one conversation.

    Both methods are cancellable (anyio cancellation). ``load`` returns validated messages,
    oldest first, or an empty sequence for a new conversation; it raises
    :class:`~agentskit_chat.errors.StorageError` when the stored records are not valid message
    records. ``save`` replaces the stored conversation with ``messages`` as a whole.
    """

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first."""
        ...

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages."""
        ...


class InMemoryChatMemory:
    """A :class:`ChatMemory` held in this process (tests, single-process hosts).

    Example:
        >>> memory = InMemoryChatMemory()
    """

    __slots__ = ("_messages",)

    def __init__(self, messages: Sequence[ChatMessage] = ()) -> None:
        self._messages: tuple[ChatMessage, ...] = tuple(messages)

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first."""
        return self._messages

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages."""
        self._messages = tuple(messages)
