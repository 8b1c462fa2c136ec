"""Adapter scoping and the conversation wrapper.

A session never hands its adapter out as is. The *scoped* adapter opens sources through the
adapter's session-aware entry point with the session's id. With a conversation, the *wrapper*
runs deterministic dispatch and uses the scoped adapter as the agentic fallback.

Both forward every other attribute to the original adapter (so, for example,
``session.chat.adapter.resolve_choice_submission`` reaches the deterministic answer adapter),
except ``create_source_for_session``, which would bypass the session. Both remember the original
adapter, and a session unwraps any such adapter before scoping it again: passing a config that
came from one session to ``update_chat`` of the same or another session never wraps twice. (The
reference keeps a process-wide weak registry for this; here the wrappers carry the original.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatAdapter,
    ChatSource,
    create_scoped_source,
)

__all__ = ["ConversationAdapter", "ScopedAdapter", "unwrap_adapter"]

_HIDDEN = "create_source_for_session"


class _Forwarding:
    """Forwards unknown public attributes to the original adapter."""

    __slots__ = ("_original",)

    def __init__(self, original: ChatAdapter) -> None:
        self._original = original

    @property
    def original(self) -> ChatAdapter:
        """The adapter this one wraps."""
        return self._original

    @property
    def capabilities(self) -> AdapterCapabilities | None:
        """The original adapter's capabilities."""
        return getattr(self._original, "capabilities", None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == _HIDDEN:
            raise AttributeError(name)
        return getattr(self._original, name)


class ScopedAdapter(_Forwarding):
    """Opens sources of ``original`` within one chat session."""

    __slots__ = ("_session_id",)

    def __init__(self, original: ChatAdapter, session_id: str) -> None:
        super().__init__(original)
        self._session_id = session_id

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """``original.create_source_for_session(request, session_id)`` when it has that entry
        point, else ``original.create_source(request)``; the request is passed unchanged."""
        return create_scoped_source(self._original, request, self._session_id)


class ConversationAdapter(_Forwarding):
    """Runs a session's deterministic dispatch; unknown input goes to the scoped original."""

    __slots__ = ("_dispatch", "_scoped")

    def __init__(
        self,
        original: ChatAdapter,
        scoped: ScopedAdapter,
        dispatch: Callable[[AdapterRequest, Callable[[AdapterRequest], ChatSource]], ChatSource],
    ) -> None:
        super().__init__(original)
        self._scoped = scoped
        self._dispatch = dispatch

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """Dispatch ``request``: replay, a route, or the scoped original adapter."""
        return self._dispatch(request, self._scoped.create_source)


def unwrap_adapter(adapter: ChatAdapter) -> ChatAdapter:
    """The original adapter behind any session's scoped adapter or conversation wrapper."""
    while isinstance(adapter, _Forwarding):
        adapter = adapter.original
    return adapter
