"""The runtime seam: messages, adapter requests, stream chunks and the adapter protocols.

An adapter turns an :class:`AdapterRequest` into a :class:`ChatSource`, whose ``stream()`` yields
:class:`StreamChunk` values and whose ``abort()`` cancels it. The chat controller is built on
exactly these types.
"""

from __future__ import annotations

from ._adapter import (
    UNSCOPED_SESSION_ID,
    AdapterCapabilities,
    ChatAdapter,
    ChatSource,
    SessionAwareChatAdapter,
    create_scoped_source,
)
from ._chunks import CHUNK_TYPES, AdapterContext, AdapterRequest, ChunkType, StreamChunk
from ._config import ChatConfig
from ._controller import ChatController
from ._controller_state import ChatState, ChatStatus
from ._memory import ChatMemory, InMemoryChatMemory
from ._messages import ChatMessage, MessageRole, MessageStatus
from ._tools import (
    AuthorizationPhase,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
    ToolAuthorizer,
    ToolExecutor,
    ToolRunner,
)

__all__ = [
    "CHUNK_TYPES",
    "UNSCOPED_SESSION_ID",
    "AdapterCapabilities",
    "AdapterContext",
    "AdapterRequest",
    "AuthorizationPhase",
    "ChatAdapter",
    "ChatConfig",
    "ChatController",
    "ChatMemory",
    "ChatMessage",
    "ChatSource",
    "ChatState",
    "ChatStatus",
    "ChatTool",
    "ChunkType",
    "InMemoryChatMemory",
    "MessageRole",
    "MessageStatus",
    "SessionAwareChatAdapter",
    "StreamChunk",
    "ToolAuthorization",
    "ToolAuthorizationContext",
    "ToolAuthorizer",
    "ToolExecutor",
    "ToolRunner",
    "create_scoped_source",
]
