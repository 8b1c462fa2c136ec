"""The three stores a served chat needs, on one backend named by a URL.

A chat server keeps Ask conversations (:class:`~agentskit_chat.service.AskSessionStore`), chat
session snapshots (:class:`~agentskit_chat.conversation.SessionStorage`) and each
conversation's messages (:class:`~agentskit_chat.runtime.ChatMemory`). Every worker of a
deployment must share all three, so they live on one backend and share its connections: one
SQLite file, one PostgreSQL pool or one Redis client.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentskit_chat._drivers import postgres_pool, redis_client
from agentskit_chat.conversation import InMemorySessionStorage, SessionStorage
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import ChatMemory, InMemoryChatMemory
from agentskit_chat.service import AskSessionStore

from ._memory import MemoryAskSessionStore
from ._open import _scheme, _sqlite_path

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

__all__ = ["ChatStores", "open_chat_stores"]

Backend = Literal["memory", "sqlite", "postgresql", "redis"]


async def _nothing() -> None:
    return None


@dataclass(eq=False)
class ChatStores:
    """Ask sessions, chat sessions and chat memories on one backend.

    Build it with :func:`open_chat_stores`, then :meth:`open` it (or ``async with`` it) before
    use: that connects and creates the tables, so a bad URL fails at start-up; :meth:`aclose`
    closes what it opened.

    Attributes:
        backend: ``memory``, ``sqlite``, ``postgresql`` or ``redis``.
        ask_sessions: The Ask service's conversation store.
        sessions: The chat session storage (compare-and-set on the cursor).
    """

    backend: Backend
    ask_sessions: AskSessionStore
    sessions: SessionStorage
    _memory: Callable[[str], ChatMemory]
    _open: Callable[[], Awaitable[None]] = _nothing
    _close: Callable[[], Awaitable[None]] = _nothing

    def memory(self, session_id: str) -> ChatMemory:
        """A chat memory of conversation ``session_id`` for one request; close it after use
        (``aclose``, when it has one). It shares the stores' connections."""
        return self._memory(session_id)

    async def open(self) -> None:
        """Connect and create the tables now.

        Raises:
            StorageError: the backend cannot be reached or used.
        """
        await self._open()

    async def aclose(self) -> None:
        """Close the connections these stores opened. Idempotent."""
        await self._close()

    async def __aenter__(self) -> ChatStores:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _memory_stores() -> ChatStores:
    memories: dict[str, InMemoryChatMemory] = {}

    def memory(session_id: str) -> ChatMemory:
        return memories.setdefault(session_id, InMemoryChatMemory())

    return ChatStores("memory", MemoryAskSessionStore(), InMemorySessionStorage(), memory)


def _sqlite_stores(path: str) -> ChatStores:
    from ._sqlite import SQLiteAskSessionStore  # noqa: PLC0415 - one backend per process
    from ._sqlite_memory import SQLiteChatMemory  # noqa: PLC0415
    from ._sqlite_session import SQLiteSessionStorage  # noqa: PLC0415

    if path == ":memory:":
        raise ConfigurationError(
            "An in-memory SQLite database is private to one connection: use memory: instead."
        )
    parent = Path(path).parent
    asks = SQLiteAskSessionStore(path)
    sessions = SQLiteSessionStorage(path)

    async def open_() -> None:
        os.makedirs(parent, exist_ok=True)
        await sessions.open()
        await asks.open()
        probe = SQLiteChatMemory(path, "agentskit-probe")
        try:
            await probe.open()
        finally:
            await probe.aclose()

    async def close() -> None:
        await sessions.aclose()
        await asks.aclose()

    return ChatStores(
        "sqlite",
        asks,
        sessions,
        lambda session_id: SQLiteChatMemory(path, session_id),
        open_,
        close,
    )


def _postgres_stores(url: str) -> ChatStores:
    from ._postgres import PostgresAskSessionStore  # noqa: PLC0415 - the postgres extra
    from ._postgres_memory import PostgresChatMemory  # noqa: PLC0415
    from ._postgres_session import PostgresSessionStorage  # noqa: PLC0415

    pool: AsyncConnectionPool[Any]
    pool, _ = postgres_pool(url, user="open_chat_stores", min_size=1, max_size=20, timeout=10.0)
    asks = PostgresAskSessionStore(pool)
    sessions = PostgresSessionStorage(pool)

    async def open_() -> None:
        await pool.open(wait=False)
        await sessions.open()
        await asks.open()
        await PostgresChatMemory(pool, "agentskit-probe").open()

    async def close() -> None:
        await pool.close()

    return ChatStores(
        "postgresql",
        asks,
        sessions,
        lambda session_id: PostgresChatMemory(pool, session_id, create_table=False),
        open_,
        close,
    )


def _redis_stores(url: str) -> ChatStores:
    from ._redis import RedisAskSessionStore  # noqa: PLC0415 - the redis extra
    from ._redis_memory import RedisChatMemory  # noqa: PLC0415
    from ._redis_session import RedisSessionStorage  # noqa: PLC0415

    client: Redis
    client, _ = redis_client(url, user="open_chat_stores", max_connections=64, connect_timeout=10)
    asks = RedisAskSessionStore(client)
    sessions = RedisSessionStorage(client)

    async def open_() -> None:
        await sessions.open()

    async def close() -> None:
        await client.aclose()

    return ChatStores(
        "redis",
        asks,
        sessions,
        lambda session_id: RedisChatMemory(client, session_id),
        open_,
        close,
    )


def open_chat_stores(url: str) -> ChatStores:
    """The stores a served chat needs, on the backend ``url`` names. Nothing connects yet.

    ======================================  ==================================================
    URL                                     Backend
    ======================================  ==================================================
    ``memory:``                             this process only (tests, one worker)
    ``sqlite:///chat.db``                   one SQLite file (relative or ``////absolute``)
    ``postgresql://`` / ``postgres://``     one PostgreSQL pool (extra ``postgres``)
    ``redis://`` / ``rediss://``            one Redis client (extra ``redis``)
    ======================================  ==================================================

    Raises:
        ConfigurationError: the scheme is unknown or the URL is malformed (the URL may hold a
            password; it never appears in the error).
        ImportError: the backend's extra is not installed.

    Example:
        >>> stores = open_chat_stores("sqlite:///chat.db")
        >>> stores.backend
        'sqlite'
    """
    if not isinstance(url, str):
        raise ConfigurationError("The store URL must be a string.")
    scheme = _scheme(url)
    if scheme == "memory":
        if url.lower() not in ("memory:", "memory://"):
            raise ConfigurationError("A memory store URL is just memory:.")
        return _memory_stores()
    if scheme == "sqlite":
        return _sqlite_stores(_sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        return _postgres_stores(url)
    if scheme in ("redis", "rediss"):
        return _redis_stores(url)
    raise ConfigurationError(
        "The store URL scheme is not one of memory, sqlite, postgresql, redis."
    )
