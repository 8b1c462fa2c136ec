"""The runtime seam: messages, adapter requests, stream chunks and the adapter protocols.

An adapter turns an :class:`AdapterRequest` into a :class:`ChatSource`, whose ``stream()`` yields
:class:`StreamChunk` values and whose ``abort()`` cancels it. The chat controller is built on
exactly these types. A host that owns the chat state elsewhere uses the controlled driver
(:func:`create_controlled_chat_driver`) instead.
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
from ._controlled import (
    ControlledChatActions,
    ControlledChatDriver,
    ControlledChatError,
    ControlledChatSnapshot,
    ControlledChatStatus,
    create_controlled_chat_driver,
    parse_controlled_chat_snapshot,
)
from ._controller import ChatController
from ._controller_state import ChatState, ChatStatus
from ._memory import ChatMemory, InMemoryChatMemory
from ._messages import ChatMessage, MessageRole, MessageStatus
from ._reply import ReplyAdapter, ReplyFunction, reply_adapter
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
    "ControlledChatActions",
    "ControlledChatDriver",
    "ControlledChatError",
    "ControlledChatSnapshot",
    "ControlledChatStatus",
    "InMemoryChatMemory",
    "MessageRole",
    "MessageStatus",
    "ReplyAdapter",
    "ReplyFunction",
    "SessionAwareChatAdapter",
    "StreamChunk",
    "ToolAuthorization",
    "ToolAuthorizationContext",
    "ToolAuthorizer",
    "ToolExecutor",
    "ToolRunner",
    "create_controlled_chat_driver",
    "create_scoped_source",
    "parse_controlled_chat_snapshot",
    "reply_adapter",
]
