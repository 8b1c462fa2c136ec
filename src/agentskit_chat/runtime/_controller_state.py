"""The chat controller's state, and how one stream chunk changes it (pure functions, no IO)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from pydantic import BaseModel

from agentskit_chat.protocol import TokenUsage, ToolCall

from ._chunks import StreamChunk
from ._messages import ChatMessage

__all__ = [
    "STREAM_ERROR_MESSAGE",
    "STREAM_FAILED_MESSAGE",
    "ZERO_USAGE",
    "ChatState",
    "ChatStatus",
    "awaiting_siblings",
    "complete_streaming",
    "end_stream",
    "find_call",
    "fold_chunk",
    "replace_call",
]

#: ``idle`` between turns, ``streaming`` while an assistant turn runs, ``error`` after a turn
#: that ended in error (until the next turn starts).
ChatStatus = Literal["idle", "streaming", "error"]

ZERO_USAGE: Final = TokenUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
#: ``state.error`` after an ``error`` chunk without text.
STREAM_ERROR_MESSAGE: Final = "The assistant turn failed."
#: ``state.error`` when the adapter raised (its exception text is never shown: it may hold data).
STREAM_FAILED_MESSAGE: Final = "The chat adapter failed."
_MAX_METADATA_DEPTH: Final = 32


@dataclass(frozen=True, slots=True)
class ChatState:
    """An immutable snapshot of a chat; the controller replaces it on every change.

    Attributes:
        messages: The conversation, oldest first.
        status: ``idle``, ``streaming`` or ``error``.
        input: The text being typed (see :meth:`ChatController.set_input`).
        error: What went wrong in the last turn (or the last save), or ``None``.
        usage: Token counts reported by the adapter, summed over the controller's life.

    Example:
        >>> ChatState().status
        'idle'
    """

    messages: tuple[ChatMessage, ...] = ()
    status: ChatStatus = "idle"
    input: str = ""
    error: str | None = None
    usage: TokenUsage = ZERO_USAGE


class _NotJson(Exception):
    """Internal signal: a metadata value is not JSON."""


def _plain(value: Any, depth: int) -> Any:
    if depth > _MAX_METADATA_DEPTH:
        raise _NotJson
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(float(value)):
            raise _NotJson
        return value
    to_wire = getattr(value, "to_wire", None)
    if callable(to_wire):
        return _plain(to_wire(), depth)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json", by_alias=True), depth)
    if isinstance(value, Mapping):
        plain: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJson
            plain[key] = _plain(item, depth + 1)
        return plain
    if isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    raise _NotJson


def _merge_metadata(message: ChatMessage, metadata: Mapping[str, Any]) -> ChatMessage:
    # Messages are saved as wire records, so metadata is kept as plain JSON: wire models (the
    # answer envelope) become their wire form, and values that are not JSON are left out.
    merged = dict(message.metadata or {})
    for key, value in metadata.items():
        try:
            merged[key] = _plain(value, 1)
        except Exception:
            continue
    return replace(message, metadata=merged)


def _add_usage(total: TokenUsage, more: TokenUsage) -> TokenUsage:
    return TokenUsage(
        prompt_tokens=total.prompt_tokens + more.prompt_tokens,
        completion_tokens=total.completion_tokens + more.completion_tokens,
        total_tokens=total.total_tokens + more.total_tokens,
    )


def find_call(messages: tuple[ChatMessage, ...], call_id: str) -> ToolCall | None:
    """The tool call with ``call_id`` in the newest message that carries it, or ``None``."""
    for message in reversed(messages):
        for call in message.tool_calls or ():
            if call.id == call_id:
                return call
    return None


def awaiting_siblings(messages: tuple[ChatMessage, ...], call_id: str) -> bool:
    """Whether the newest message carrying ``call_id`` has another call awaiting confirmation."""
    for message in reversed(messages):
        calls = message.tool_calls or ()
        if any(call.id == call_id for call in calls):
            return any(
                call.id != call_id and call.status == "requires_confirmation" for call in calls
            )
    return False


def replace_call(messages: tuple[ChatMessage, ...], call: ToolCall) -> tuple[ChatMessage, ...]:
    """``messages`` with the newest call of ``call.id`` replaced by ``call`` (same if absent)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        calls = message.tool_calls or ()
        if any(existing.id == call.id for existing in calls):
            updated = tuple(call if existing.id == call.id else existing for existing in calls)
            return (*messages[:index], replace(message, tool_calls=updated), *messages[index + 1 :])
    return messages


def _upsert_call(message: ChatMessage, call: ToolCall) -> ChatMessage:
    calls = message.tool_calls or ()
    if any(existing.id == call.id for existing in calls):
        updated = tuple(call if existing.id == call.id else existing for existing in calls)
    else:
        updated = (*calls, call)
    return replace(message, tool_calls=updated)


def _with_outcome(call: ToolCall, reported: ToolCall) -> ToolCall:
    fields: dict[str, Any] = {
        "id": call.id,
        "name": call.name,
        "args": call.args,
        "status": reported.status,
    }
    if reported.result is not None:
        fields["result"] = reported.result
    if reported.error is not None:
        fields["error"] = reported.error
    return ToolCall.model_validate(fields)


def complete_streaming(messages: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
    """``messages`` with every ``streaming`` message marked ``complete``."""
    if not any(message.status == "streaming" for message in messages):
        return messages
    return tuple(
        replace(message, status="complete") if message.status == "streaming" else message
        for message in messages
    )


def _update_placeholder(
    messages: tuple[ChatMessage, ...], placeholder_id: str, chunk: StreamChunk, ended: str | None
) -> tuple[ChatMessage, ...]:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.id != placeholder_id:
            continue
        if chunk.type == "text" and chunk.content:
            message = replace(message, content=message.content + chunk.content)
        elif chunk.type == "tool_call" and chunk.tool_call is not None:
            message = _upsert_call(message, chunk.tool_call)
        elif chunk.type == "tool_result" and chunk.tool_call is not None:
            # A result for a call no message carries is kept on the turn's own message.
            message = _upsert_call(message, chunk.tool_call)
        if chunk.metadata:
            message = _merge_metadata(message, chunk.metadata)
        if ended is not None:
            message = replace(message, status="error" if ended == "error" else "complete")
        return (*messages[:index], message, *messages[index + 1 :])
    return messages


def fold_chunk(state: ChatState, placeholder_id: str, chunk: StreamChunk) -> tuple[ChatState, bool]:
    """Apply one chunk of the turn whose assistant message is ``placeholder_id``.

    ``text`` appends its content; ``reasoning`` changes no content; ``usage`` adds to the
    totals; ``tool_call`` adds or replaces the call (by id) on the turn's message;
    ``tool_result`` updates the call with that id wherever it is; ``error`` and ``done`` end the
    turn. Chunk metadata is merged into the turn's message metadata.

    Returns:
        The new state, and whether the chunk ended the turn.
    """
    messages = state.messages
    if chunk.type == "tool_result" and chunk.tool_call is not None:
        existing = find_call(messages, chunk.tool_call.id)
        if existing is not None:
            messages = replace_call(messages, _with_outcome(existing, chunk.tool_call))
            chunk = replace(chunk, tool_call=None)
    ended = chunk.type if chunk.type in ("done", "error") else None
    messages = _update_placeholder(messages, placeholder_id, chunk, ended)
    if chunk.type == "usage" and chunk.usage is not None:
        return replace(state, messages=messages, usage=_add_usage(state.usage, chunk.usage)), False
    if ended == "done":
        return replace(state, messages=messages, status="idle", error=None), True
    if ended == "error":
        error = chunk.content or STREAM_ERROR_MESSAGE
        return replace(state, messages=messages, status="error", error=error), True
    return replace(state, messages=messages), False


def end_stream(state: ChatState, placeholder_id: str, *, failed: bool) -> ChatState:
    """The state after the stream ended without ``done``: ``failed`` when the adapter raised."""
    marker = StreamChunk("error" if failed else "done")
    messages = _update_placeholder(state.messages, placeholder_id, marker, marker.type)
    if failed:
        return replace(state, messages=messages, status="error", error=STREAM_FAILED_MESSAGE)
    return replace(state, messages=messages, status="idle", error=None)
