"""Which messages a host's Retry, Regenerate and Edit controls act on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentskit_chat.runtime import ChatMessage

__all__ = ["LifecycleTargets", "get_lifecycle_targets"]


@dataclass(frozen=True, slots=True)
class LifecycleTargets:
    """The messages lifecycle controls act on; both ``None`` when there are none.

    Attributes:
        user_id: The last user message (what Retry re-sends and Edit changes).
        assistant_id: The last message, an assistant reply (what Regenerate replaces).
    """

    user_id: str | None = None
    assistant_id: str | None = None


def get_lifecycle_targets(messages: Sequence[ChatMessage]) -> LifecycleTargets:
    """The targets when the last message is an assistant reply to some earlier user message.

    Show Retry, Regenerate and Edit only when ``user_id`` is set and the chat is not streaming.

    Example:
        >>> get_lifecycle_targets([]).user_id is None
        True
    """
    if not messages or messages[-1].role != "assistant":
        return LifecycleTargets()
    for message in reversed(messages[:-1]):
        if message.role == "user":
            return LifecycleTargets(user_id=message.id, assistant_id=messages[-1].id)
    return LifecycleTargets()
