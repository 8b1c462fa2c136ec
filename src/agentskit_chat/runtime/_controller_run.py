"""One assistant turn in flight: its source and cancel scope, how it is consumed and stopped."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Final

import anyio

from agentskit_chat.protocol import ToolCall

from ._adapter import ChatAdapter, ChatSource
from ._chunks import AdapterRequest, StreamChunk

__all__ = ["Proposal", "Run", "default_clock", "default_id", "is_blank"]

# Closing a source is bounded, so a misbehaving adapter cannot hold the next turn forever.
_CLOSE_TIMEOUT_S: Final = 5.0
# JavaScript's String.prototype.trim() whitespace: blank text is what it trims to nothing.
_BLANK: Final = " \t\n\r\v\f\u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(code) for code in range(0x2000, 0x200B)
)


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty once JavaScript whitespace is trimmed."""
    return not text.strip(_BLANK)


def default_id() -> str:
    """A random message id (UUID4, 32 hex digits)."""
    return uuid.uuid4().hex


def default_clock() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def _abort(source: ChatSource | None) -> None:
    if source is None:
        return
    with contextlib.suppress(Exception):
        source.abort()


async def _close(iterator: AsyncIterator[StreamChunk]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if not callable(aclose):
        return
    # The turn is over either way; a source that fails to close has nothing to tell us.
    with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True), contextlib.suppress(Exception):
        await aclose()


class Run:
    """One assistant turn in flight.

    Attributes:
        placeholder_id: The id of the assistant message the turn streams into.
        scope: The cancel scope the source is consumed in.
        source: The source, once the adapter has opened it.
        stopped: Whether :meth:`stop` was called; no chunk is applied afterwards.
        done: Set when the source is closed and the run is over.
    """

    __slots__ = ("done", "placeholder_id", "scope", "source", "stopped")

    def __init__(self, placeholder_id: str) -> None:
        self.placeholder_id = placeholder_id
        self.scope = anyio.CancelScope()
        self.source: ChatSource | None = None
        self.stopped = False
        self.done = anyio.Event()

    def stop(self) -> None:
        """Abort the source and cancel the consumer (synchronous; does nothing twice)."""
        if self.stopped:
            return
        self.stopped = True
        _abort(self.source)
        self.scope.cancel()

    async def consume(
        self,
        adapter: ChatAdapter,
        request: AdapterRequest,
        *,
        apply: Callable[[StreamChunk], Awaitable[bool]],
        finish: Callable[[bool], None],
        interrupted: Callable[[], None],
    ) -> None:
        """Open a source for ``request`` and feed its chunks to ``apply`` until the turn ends.

        Args:
            adapter: Opens the source.
            request: The adapter request.
            apply: Applies one chunk (it may first check the chunk's tool call); returns whether
                it ended the turn.
            finish: Called with ``False`` when the stream ended without ending the turn, and
                ``True`` when the adapter raised (never after :meth:`stop`).
            interrupted: Called when the consumer is cancelled from outside (not through
                :meth:`stop`), before the source is closed.

        The source's iterator is always closed (``aclose``), and ``done`` is set on the way out.
        """
        iterator: AsyncIterator[StreamChunk] | None = None
        settled = False
        try:
            with self.scope:
                try:
                    if self.stopped:
                        return  # stopped before the source was even opened
                    self.source = adapter.create_source(request)
                    iterator = self.source.stream()
                    async for chunk in iterator:
                        if self.stopped or await apply(chunk):
                            break
                    else:
                        if not self.stopped:
                            finish(False)
                except Exception:
                    if not self.stopped:
                        finish(True)
                settled = True
        finally:
            try:
                if not settled and not self.stopped:
                    interrupted()
                    self.stop()
                if iterator is not None:
                    await _close(iterator)
            finally:
                self.done.set()


class Proposal:
    """A tool-call proposal in flight, shared by concurrent proposals of the same id.

    Attributes:
        done: Set when the proposal ended.
        call: The proposed call, when it succeeded.
        error: The error it raised, when it failed (neither when it was cancelled).
    """

    __slots__ = ("call", "done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.call: ToolCall | None = None
        self.error: BaseException | None = None
