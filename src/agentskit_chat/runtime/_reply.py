"""The shortest way to a chat adapter: a function from the user's message to a reply.

:func:`reply_adapter` wraps ``reply(text, request)``, which returns the reply text, an
awaitable of it, or an async iterator of text pieces (streamed as they come). Use it for a
deterministic bot, a call to your own service, or a model client you already have; use
:func:`~agentskit_chat.agents.from_pydantic_ai` for a pydantic-ai agent with tools.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeAlias

from agentskit_chat.errors import ConfigurationError

from ._adapter import AdapterCapabilities
from ._chunks import AdapterRequest, StreamChunk

__all__ = ["ReplyFunction", "reply_adapter"]

#: ``(text, request)`` → the reply: text, an awaitable of text, or an async iterator of pieces.
#: ``text`` is the newest user message's content; ``request`` holds the whole conversation.
ReplyFunction: TypeAlias = Callable[
    [str, AdapterRequest], str | Awaitable[str] | AsyncIterator[str]
]


def _last_user_text(request: AdapterRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


class _ReplySource:
    __slots__ = ("_aborted", "_reply", "_request")

    def __init__(self, reply: ReplyFunction, request: AdapterRequest) -> None:
        self._reply = reply
        self._request = request
        self._aborted = False

    def abort(self) -> None:
        self._aborted = True

    async def stream(self) -> AsyncIterator[StreamChunk]:
        if self._aborted:
            return
        made = self._reply(_last_user_text(self._request), self._request)
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, str):
            yield StreamChunk("text", content=made)
        elif isinstance(made, AsyncIterator):
            try:
                async for piece in made:
                    if self._aborted:
                        return
                    if not isinstance(piece, str):
                        raise ConfigurationError("A reply function must stream strings.")
                    if piece:
                        yield StreamChunk("text", content=piece)
            finally:
                close = getattr(made, "aclose", None)
                if close is not None:
                    await close()
        else:
            raise ConfigurationError(
                "A reply function must return text, an awaitable of text, "
                "or an async iterator of text."
            )
        if not self._aborted:
            yield StreamChunk("done")


class ReplyAdapter:
    """A :class:`~agentskit_chat.runtime.ChatAdapter` over a reply function (see
    :func:`reply_adapter`)."""

    capabilities = AdapterCapabilities(streaming=True)

    def __init__(self, reply: ReplyFunction) -> None:
        self._reply = reply

    def create_source(self, request: AdapterRequest) -> _ReplySource:
        """A source that streams ``reply``'s answer to ``request``."""
        return _ReplySource(self._reply, request)


def reply_adapter(reply: ReplyFunction) -> ReplyAdapter:
    """A chat adapter whose answer is ``reply(text, request)``.

    ``reply`` may return the whole text, an awaitable of it (``async def``), or an async
    iterator of pieces (an ``async def`` with ``yield``), which stream to every interface as
    they come. Stopping the turn stops the iteration. An exception ends the turn in an error
    the user sees as a failed answer (its message is not shown).

    Raises:
        ConfigurationError: ``reply`` is not callable.

    Example:
        >>> from agentskit_chat.runtime import ChatConfig, reply_adapter
        >>> config = ChatConfig(adapter=reply_adapter(lambda text, request: f"You said: {text}"))
    """
    if not callable(reply):
        raise ConfigurationError("reply_adapter needs a function.")
    return ReplyAdapter(reply)
