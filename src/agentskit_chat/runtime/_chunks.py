"""What flows through the adapter seam: requests in, stream chunks out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from agentskit_chat.protocol import TokenUsage, ToolCall

from ._messages import ChatMessage

if TYPE_CHECKING:
    from ._tools import ToolRunner

__all__ = ["CHUNK_TYPES", "AdapterContext", "AdapterRequest", "ChunkType", "StreamChunk"]

#: The kinds of chunk a source can yield.
ChunkType = Literal["text", "reasoning", "tool_call", "tool_result", "usage", "error", "done"]
CHUNK_TYPES: Final = ("text", "reasoning", "tool_call", "tool_result", "usage", "error", "done")
_CHUNK_TYPES: Final = frozenset(CHUNK_TYPES)
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return value if isinstance(value, MappingProxyType) else MappingProxyType(dict(value))


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One chunk of an assistant turn.

    How a consumer (the chat controller) reads a stream: the ``content`` of every non-empty
    ``text`` chunk is appended to the assistant message; the first ``done`` chunk ends the turn
    (nothing after it is read); an ``error`` chunk ends the turn in error with ``content`` as
    the error text.

    Attributes:
        type: ``text``, ``reasoning``, ``tool_call``, ``tool_result``, ``usage``, ``error`` or
            ``done``.
        content: Text of ``text``, ``reasoning`` and ``error`` chunks.
        metadata: Free-form data riding along, held read-only (for example the deterministic
            answer envelope at ``metadata["answer"]``).
        tool_call: The call a ``tool_call`` or ``tool_result`` chunk is about.
        usage: Token counts of a ``usage`` chunk.

    Raises:
        ValueError: when ``type`` is not one of the chunk types.

    Example:
        >>> StreamChunk("text", content="Hello").content
        'Hello'
    """

    type: ChunkType
    _: KW_ONLY
    content: str | None = None
    metadata: Mapping[str, Any] | None = None
    tool_call: ToolCall | None = None
    usage: TokenUsage | None = None

    def __post_init__(self) -> None:
        if self.type not in _CHUNK_TYPES:
            raise ValueError("unknown chunk type")
        if self.metadata is not None:
            object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterContext:
    """What an adapter knows about a request besides the messages.

    Attributes:
        system_prompt: The system prompt, when the chat has one.
        tools: Tool definitions the chat offers to the model (their type belongs to the chat
            runtime; adapters pass them through).
        tool_runner: The chat's tool checks for this request, when a chat controller sent it:
            an adapter whose agent runs tools itself authorizes each execution with it, and runs
            the chat's own tools through it (see :class:`~agentskit_chat.runtime.ToolRunner`).
        metadata: Free-form request metadata, held read-only. The deterministic answer adapter
            puts its escalation envelope at ``metadata["agentskit.chat.escalation"]``.
    """

    system_prompt: str | None = None
    tools: tuple[Any, ...] = ()
    tool_runner: ToolRunner | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterRequest:
    """One request to an adapter: the whole conversation so far, and its context.

    Attributes:
        messages: The history, oldest first, ending with the newest messages of the turn.
        context: System prompt, tools and metadata.
    """

    messages: tuple[ChatMessage, ...]
    context: AdapterContext = field(default_factory=AdapterContext)

    def with_metadata(self, key: str, value: Any) -> AdapterRequest:
        """A copy whose context metadata also holds ``key`` (replacing an existing value)."""
        metadata = {**self.context.metadata, key: value}
        return replace(self, context=replace(self.context, metadata=metadata))
