"""The sources a conversation dispatch returns, each saving the session when its turn ends.

A route's reply is a :class:`~agentskit_chat.runtime._sources.TextReplySource` that flushes
``before`` its text; a failed route streams :class:`RouteErrorSource`; a model turn goes through
:class:`SavingSource`.

A dispatch changes the conversation synchronously and schedules a save. anyio has no
fire-and-forget tasks, so the save is *carried by the source*: it runs (shielded from
cancellation, serialized with every other save of the session) before a route's reply is
streamed, or before the model's ``done``/``error`` chunk (or when its stream ends or fails), so
when a controller's ``send`` returns, the session is stored. A source that is aborted before it
starts, or a model turn stopped midway, leaves its changes for the next save. No task outlives
a source.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from agentskit_chat.runtime import ChatSource, StreamChunk

__all__ = [
    "ROUTE_FAILED_MESSAGE",
    "RouteErrorSource",
    "SavingSource",
]

#: The text of the single ``error`` chunk a failed route streams.
ROUTE_FAILED_MESSAGE: Final = "Deterministic route failed."
_TERMINAL: Final = frozenset({"done", "error"})

#: Saves the session if a dispatch scheduled it; never raises.
Flush = Callable[[], Awaitable[None]]


class RouteErrorSource:
    """Streams exactly one ``error`` chunk, "Deterministic route failed."; abort is a no-op."""

    __slots__ = ("_flush",)

    def __init__(self, flush: Flush) -> None:
        self._flush = flush

    def abort(self) -> None:
        """Nothing to stop."""

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The one ``error`` chunk."""
        await self._flush()
        yield StreamChunk("error", content=ROUTE_FAILED_MESSAGE)


class SavingSource:
    """Passes an adapter's source through unchanged, saving the session before the first
    ``done`` or ``error`` chunk (or when the stream ends or fails without one)."""

    __slots__ = ("_flush", "_inner")

    def __init__(self, inner: ChatSource, flush: Flush) -> None:
        self._inner = inner
        self._flush = flush

    def abort(self) -> None:
        """Abort the adapter's source."""
        self._inner.abort()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The adapter's chunks, in order."""
        flushed = False
        iterator = self._inner.stream()
        try:
            async for chunk in iterator:
                if not flushed and chunk.type in _TERMINAL:
                    flushed = True
                    await self._flush()
                yield chunk
        except Exception:
            if not flushed:
                flushed = True
                await self._flush()
            raise
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()
        if not flushed:
            await self._flush()
