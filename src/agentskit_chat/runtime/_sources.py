"""A source that streams one reply known up front: a ``text`` chunk, then ``done``.

Private helper of the adapters that answer locally (conversation routes, deterministic
answers); not part of the public runtime API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ._chunks import StreamChunk

__all__ = ["TextReplySource"]


class TextReplySource:
    """Streams one ``text`` chunk, then ``done``; a :class:`~agentskit_chat.runtime.ChatSource`.

    Aborted before iteration, it yields nothing (``before`` is not run and ``text`` is not
    called); aborted after the text, it yields no ``done``.

    Args:
        text: The reply, or a function that makes it when iteration starts.
        before: Awaited when iteration starts, before the text is made (e.g. to save state).
        metadata: Carried on the ``text`` chunk.
    """

    __slots__ = ("_aborted", "_before", "_metadata", "_text")

    def __init__(
        self,
        text: str | Callable[[], str],
        *,
        before: Callable[[], Awaitable[None]] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self._text = text
        self._before = before
        self._metadata = metadata
        self._aborted = False

    def abort(self) -> None:
        """Stop before the next chunk."""
        self._aborted = True

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """``text`` with the reply, then ``done``."""
        if self._aborted:
            return
        if self._before is not None:
            await self._before()
        content = self._text if isinstance(self._text, str) else self._text()
        yield StreamChunk("text", content=content, metadata=self._metadata)
        if not self._aborted:
            yield StreamChunk("done")
