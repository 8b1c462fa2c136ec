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

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from agentskit_chat.runtime import ChatSource, StreamChunk

__all__ = [
    "ROUTE_FAILED_MESSAGE",
    "AwaitedRouteSource",
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


class AwaitedRouteSource:
    """A route whose response is awaitable: awaited when the turn streams, then answered.

    ``finish`` takes the awaited value and returns the route's reply source (or its error
    source); ``fail`` gives the route error source when the awaitable raises. A source aborted
    before or while it waits changes nothing: an unstarted coroutine is closed, a started one is
    cancelled with the stream, and its value, if it still arrives, is dropped.
    """

    __slots__ = ("_aborted", "_awaitable", "_fail", "_finish", "_started")

    def __init__(
        self,
        awaitable: Awaitable[object],
        finish: Callable[[object], ChatSource],
        fail: Callable[[], ChatSource],
    ) -> None:
        self._awaitable = awaitable
        self._finish = finish
        self._fail = fail
        self._aborted = False
        self._started = False

    def abort(self) -> None:
        """Drop the response: nothing is recorded, an unstarted coroutine is closed."""
        self._aborted = True
        if not self._started and inspect.iscoroutine(self._awaitable):
            self._awaitable.close()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The route's reply (or its one ``error`` chunk) once the response has answered."""
        if self._aborted:
            return
        self._started = True
        try:
            value = await self._awaitable
        except Exception:
            if self._aborted:
                return
            source = self._fail()
        else:
            if self._aborted:
                return
            source = self._finish(value)
        async for chunk in source.stream():
            yield chunk
