"""The chat configuration a :class:`~agentskit_chat.runtime.ChatController` is built from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ._adapter import ChatAdapter
from ._memory import ChatMemory
from ._messages import ChatMessage
from ._tools import ChatTool, ToolAuthorizer

__all__ = ["ChatConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatConfig:
    """Everything a chat controller needs; immutable, so a copy with changes is cheap.

    Attributes:
        adapter: Streams each assistant turn.
        memory: Where messages are loaded from and saved to; ``None`` keeps them in memory.
        initial_messages: Messages the conversation starts with (when memory holds none).
        tools: Tools the chat offers, with unique names.
        authorize_tool_call: Decides, in phases ``propose`` and ``execute``, whether a call
            may run. No model output can grant what it denies.
        validate_args: Validate call arguments against each tool's JSON Schema.
        system_prompt: Passed to the adapter in the request context.
        id_factory: Makes message ids; defaults to random UUID4 hex strings.
        clock: Timestamps new messages; defaults to the current UTC time.

    Example:
        >>> from agentskit_chat.runtime import ChatConfig
        >>> config = ChatConfig(adapter=my_adapter)  # doctest: +SKIP
        >>> config.with_changes(system_prompt="Be brief.")  # doctest: +SKIP
    """

    adapter: ChatAdapter
    memory: ChatMemory | None = None
    initial_messages: tuple[ChatMessage, ...] = ()
    tools: tuple[ChatTool, ...] = ()
    authorize_tool_call: ToolAuthorizer | None = None
    validate_args: bool = True
    system_prompt: str | None = None
    id_factory: Callable[[], str] | None = None
    clock: Callable[[], datetime] | None = None

    def with_changes(self, **changes: Any) -> ChatConfig:
        """A copy with the given fields replaced."""
        return replace(self, **changes)
