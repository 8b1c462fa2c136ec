"""The adapter seam: an adapter opens a cancellable source that streams an assistant turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from ._chunks import AdapterRequest, StreamChunk

__all__ = [
    "UNSCOPED_SESSION_ID",
    "AdapterCapabilities",
    "ChatAdapter",
    "ChatSource",
    "SessionAwareChatAdapter",
    "create_scoped_source",
]

#: The session id a plain ``create_source`` stands for on session-aware adapters.
UNSCOPED_SESSION_ID: Final = "unscoped"


@dataclass(frozen=True, slots=True)
class AdapterCapabilities:
    """What an adapter can do.

    Attributes:
        streaming: It yields text as it is produced.
        structured_output: It can produce ordered assistant content (text and components).
    """

    streaming: bool = True
    structured_output: bool = False


@runtime_checkable
class ChatSource(Protocol):
    """One assistant turn in progress.

    ``stream()`` is an async iterator of :class:`StreamChunk`; ``abort()`` is synchronous and
    asks the source to stop (a source aborted before iteration yields nothing). A consumer that
    is cancelled closes the iterator (``aclose``), which must release whatever the source holds.
    """

    def stream(self) -> AsyncIterator[StreamChunk]:
        """The chunks of the turn, in order."""
        ...

    def abort(self) -> None:
        """Stop producing chunks as soon as possible. Never raises."""
        ...


@runtime_checkable
class ChatAdapter(Protocol):
    """Opens a :class:`ChatSource` for a request.

    ``capabilities`` may be ``None`` when the adapter does not describe itself.
    """

    @property
    def capabilities(self) -> AdapterCapabilities | None:
        """What the adapter can do, or ``None``."""
        ...

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """A source for one turn of ``request``."""
        ...


@runtime_checkable
class SessionAwareChatAdapter(ChatAdapter, Protocol):
    """An adapter that also accepts the chat session's id (e.g. to keep server-side memory).

    For such an adapter, ``create_source(request)`` means
    ``create_source_for_session(request, UNSCOPED_SESSION_ID)``.
    """

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        """A source for one turn of ``request`` within the session ``session_id``."""
        ...


def create_scoped_source(
    adapter: ChatAdapter, request: AdapterRequest, session_id: str
) -> ChatSource:
    """Open a source through the session-aware entry point when the adapter has one.

    Calls ``adapter.create_source_for_session(request, session_id)`` when that method exists,
    otherwise ``adapter.create_source(request)``. The request is passed unchanged.
    """
    scoped = getattr(adapter, "create_source_for_session", None)
    if callable(scoped):
        source: ChatSource = scoped(request, session_id)
        return source
    return adapter.create_source(request)
