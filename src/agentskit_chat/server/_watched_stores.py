"""The chat stores as the served app uses them: every failed call logged and counted.

:func:`~agentskit_chat.server.create_app` hands the chat turn handler these wrappers around
its :class:`~agentskit_chat.storage.ChatStores`' session storage and chat memories, so that
every store call that fails (on every backend, on every path: loading a session, claiming or
releasing a lease, saving messages) is one ``agentskit_chat.store`` log record and one
``agentskit_chat_store_errors_total`` sample, with its operation's name:

``session_load``, ``session_save``, ``memory_load``, ``memory_save``, ``memory_close``,
``ask_session_load`` and ``ask_session_save`` (the docs assistant's Ask conversations, see
:func:`~agentskit_chat.server.create_docs_assistant_app`), and ``ping`` (the ``/healthz``
round trip). The calls themselves are unchanged: what they return and raise passes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentskit_chat.conversation import SessionStorage
from agentskit_chat.protocol import AskSessionRecord, SessionSnapshot
from agentskit_chat.runtime import ChatMemory, ChatMessage
from agentskit_chat.service import AskSessionStore, SessionKey
from agentskit_chat.storage import (
    ChatStores,
    MemoryAskSessionStore,
    PostgresAskSessionStore,
    RedisAskSessionStore,
    SQLiteAskSessionStore,
)

from ._observe import Watch

__all__ = ["WatchedAskSessions", "WatchedMemory", "WatchedSessions", "ping_store"]


class WatchedSessions:
    """A :class:`~agentskit_chat.conversation.SessionStorage` whose failures are reported.

    Args:
        inner: The storage.
        watch: Where failures go.
    """

    def __init__(self, inner: SessionStorage, watch: Watch) -> None:
        self._inner = inner
        self._watch = watch

    async def load(self, session_id: str) -> str | Mapping[str, Any] | None:
        """The stored snapshot (see the port)."""
        return await self._watch.call("session_load", self._inner.load(session_id))

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Compare-and-set save (see the port)."""
        return await self._watch.call("session_save", self._inner.save(snapshot, expected_cursor))


class WatchedMemory:
    """A :class:`~agentskit_chat.runtime.ChatMemory` whose failures are reported.

    Args:
        inner: The memory of one conversation.
        watch: Where failures go.
    """

    def __init__(self, inner: ChatMemory, watch: Watch) -> None:
        self._inner = inner
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        # Only ``conversation_id``, when the memory has one (see ``check_memory_for``).
        if name == "conversation_id":
            return getattr(self._inner, name)
        raise AttributeError(name)

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages (see the port)."""
        return await self._watch.call("memory_load", self._inner.load())

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages (see the port)."""
        await self._watch.call("memory_save", self._inner.save(messages))

    async def aclose(self) -> None:
        """Close the memory, when it has anything to close."""
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await self._watch.call("memory_close", close())


class WatchedAskSessions:
    """An :class:`~agentskit_chat.service.AskSessionStore` whose failures are reported.

    Args:
        inner: The store of Ask conversations.
        watch: Where failures go.
    """

    def __init__(self, inner: AskSessionStore, watch: Watch) -> None:
        self._inner = inner
        self._watch = watch
        self._kind = _ask_store_kind(inner)

    async def load(self, key: SessionKey) -> AskSessionRecord | Mapping[str, Any] | None:
        """The stored conversation (see the port)."""
        return await self._watch.call("ask_session_load", self._inner.load(key), store=self._kind)

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Compare-and-set save (see the port)."""
        saved = self._inner.save(key, record, expected_revision)
        return await self._watch.call("ask_session_save", saved, store=self._kind)


def _ask_store_kind(store: AskSessionStore) -> str:
    """The ``store`` label of a store's failures: its backend, or ``custom`` for a store of
    the host's own."""
    for kind, backend in (
        (MemoryAskSessionStore, "memory"),
        (SQLiteAskSessionStore, "sqlite"),
        (PostgresAskSessionStore, "postgresql"),
        (RedisAskSessionStore, "redis"),
    ):
        if isinstance(store, kind):
            return backend
    return "custom"


async def ping_store(stores: ChatStores, watch: Watch) -> None:
    """One round trip to the stores' backend (see :meth:`ChatStores.ping`), reported.

    Raises:
        StorageError: the backend cannot be reached or used.
    """
    await watch.call("ping", stores.ping())
