"""Component interactions as turns: the user message that stands for one, and the
definition's ``on_interaction`` hook that answers it.

A host that accepted an interaction (the chat server checks it against the frame this
session's assistant showed) sends it as a user message: its content a short text that reads
well in history, its metadata the typed event under :data:`INTERACTION_METADATA_KEY`
(:func:`interaction_metadata`). The session's adapter then hands a request that answers such a
message to the hook; everything else, and a ``None`` from the hook, goes on to the routes and
the adapter unchanged.

The event travels in the message itself, so a retry or a regeneration of the answer (the same
user message) reaches the hook again with the same event and message id, on any worker. An
edit changes the content, and an edited message is plain text: the hook only answers a message
whose content is still the text it was sent with.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from agentskit_chat.protocol import ComponentInteractEvent
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.runtime import AdapterRequest, ChatAdapter, ChatMessage, ChatSource, StreamChunk
from agentskit_chat.runtime._sources import TextReplySource

from ._adapters import _Forwarding
from ._definition import InteractionHandler, RouteContext
from ._dispatch import MAX_REPLY_UNITS

__all__ = [
    "INTERACTION_FAILED_MESSAGE",
    "INTERACTION_METADATA_KEY",
    "InteractionAdapter",
    "interaction_instance",
    "interaction_metadata",
    "message_interaction",
]

#: The user-message metadata key of an interaction: ``{"event": <the component interact
#: event, wire form>, "text": <the content the message was sent with>}``.
INTERACTION_METADATA_KEY: Final = "agentskit.chat.interaction"
#: The text of the single ``error`` chunk streamed when ``on_interaction`` raises or answers
#: something that is not text (or text longer than 65,536 UTF-16 units).
INTERACTION_FAILED_MESSAGE: Final = "The interaction handler failed."


def interaction_metadata(event: ComponentInteractEvent, text: str) -> dict[str, Any]:
    """The metadata of the user message that stands for ``event``, sent as ``text``.

    Example:
        >>> controller.send(text, metadata=interaction_metadata(event, text))  # doctest: +SKIP
    """
    return {INTERACTION_METADATA_KEY: {"event": event.to_wire(), "text": text}}


def _marker(message: ChatMessage) -> Mapping[str, Any] | None:
    if message.role != "user" or message.metadata is None:
        return None
    marker = message.metadata.get(INTERACTION_METADATA_KEY)
    return marker if isinstance(marker, Mapping) else None


def interaction_instance(message: ChatMessage) -> str | None:
    """The instance id of the component a user message answered through an interaction (also
    after an edit: the component was used), or ``None``."""
    marker = _marker(message)
    event = marker.get("event") if marker is not None else None
    instance = event.get("instanceId") if isinstance(event, Mapping) else None
    return instance if isinstance(instance, str) else None


def message_interaction(message: ChatMessage) -> ComponentInteractEvent | None:
    """The interaction a user message stands for, while its content is still the text it was
    sent with; ``None`` for any other message. Never raises."""
    marker = _marker(message)
    if marker is None or marker.get("text") != message.content:
        return None
    return validate_model(ComponentInteractEvent, marker.get("event"))


def _answered(messages: Sequence[ChatMessage]) -> tuple[ComponentInteractEvent, str] | None:
    """The interaction a request answers, with its message id: the last user message stands
    for one and nothing but the empty answer being written follows it (a tool call's
    follow-up answers the model, not the interaction)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            event = message_interaction(message)
            return None if event is None else (event, message.id)
        if message.role != "assistant" or message.content or message.tool_calls:
            return None
    return None


class _FailedSource:
    """Streams exactly one ``error`` chunk, :data:`INTERACTION_FAILED_MESSAGE`."""

    __slots__ = ()

    def abort(self) -> None:
        """Nothing to stop."""

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The one ``error`` chunk."""
        yield StreamChunk("error", content=INTERACTION_FAILED_MESSAGE)


def _reply(value: object) -> ChatSource:
    if not isinstance(value, str) or utf16_len(value) > MAX_REPLY_UNITS:
        return _FailedSource()
    return TextReplySource(value)


class _AwaitedSource:
    """An ``async`` hook, awaited when the turn streams: its reply, or the chat's own answer
    when it gives ``None``. Aborted before it starts, an unstarted coroutine is closed;
    aborted later, the awaited value (if it still arrives) is dropped, or the chat's source is
    aborted."""

    __slots__ = ("_aborted", "_awaitable", "_fallback", "_inner", "_started")

    def __init__(self, awaitable: Awaitable[object], fallback: Callable[[], ChatSource]) -> None:
        self._awaitable = awaitable
        self._fallback = fallback
        self._inner: ChatSource | None = None
        self._aborted = False
        self._started = False

    def abort(self) -> None:
        """Stop: drop the hook's answer, or abort the chat's source."""
        self._aborted = True
        if not self._started and inspect.iscoroutine(self._awaitable):
            self._awaitable.close()
        if self._inner is not None:
            self._inner.abort()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The hook's reply, its one ``error`` chunk, or the chat's chunks."""
        if self._aborted:
            return
        self._started = True
        source: ChatSource
        try:
            value = await self._awaitable
        except Exception:
            if self._aborted:
                return
            source = _FailedSource()
        else:
            if self._aborted:
                return
            if value is None:
                source = self._inner = self._fallback()
            else:
                source = _reply(value)
        async for chunk in source.stream():
            yield chunk


class InteractionAdapter(_Forwarding):
    """Answers a request for an interaction's user message with the definition's hook; every
    other request (and a ``None`` from the hook) goes to ``inner`` unchanged.

    Args:
        original: The adapter the session wraps (other attributes are forwarded to it).
        inner: The session's own adapter (scoped, or running the conversation's routes).
        handler: The definition's ``on_interaction``.
        session_id: The session (for the hook's :class:`RouteContext`).
    """

    __slots__ = ("_handler", "_inner", "_session_id")

    def __init__(
        self,
        original: ChatAdapter,
        inner: ChatAdapter,
        handler: InteractionHandler,
        session_id: str,
    ) -> None:
        super().__init__(original)
        self._inner = inner
        self._handler = handler
        self._session_id = session_id

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """The hook's reply for an interaction's message, else ``inner``'s source.

        Never raises for a failing hook (its one ``error`` chunk is streamed instead).
        """
        answered = _answered(request.messages)
        if answered is None:
            return self._inner.create_source(request)
        event, message_id = answered
        try:
            context = RouteContext(self._session_id, message_id, tuple(request.messages))
            reply = self._handler(event, context)
        except Exception:
            return _FailedSource()
        if reply is None:
            return self._inner.create_source(request)
        if inspect.isawaitable(reply):
            # Awaited inside the turn's stream, so stopping the turn cancels it.
            return _AwaitedSource(reply, lambda: self._inner.create_source(request))
        return _reply(reply)
