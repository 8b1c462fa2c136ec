"""The three stores a served chat needs, on one backend named by a URL.

A chat server keeps Ask conversations (:class:`~agentskit_chat.service.AskSessionStore`), chat
session snapshots (:class:`~agentskit_chat.conversation.SessionStorage`) and each
conversation's messages (:class:`~agentskit_chat.runtime.ChatMemory`). Every worker of a
deployment must share all three, so they live on one backend and share its connections: one
SQLite file, one PostgreSQL pool or one Redis client.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio.to_thread

from agentskit_chat._drivers import postgres_pool, redis_client
from agentskit_chat.conversation import InMemorySessionStorage, SessionStorage
from agentskit_chat.errors import ConfigurationError, StorageError
from agentskit_chat.runtime import ChatMemory, InMemoryChatMemory
from agentskit_chat.service import AskSessionStore

from ._memory import MemoryAskSessionStore
from ._open import _scheme, _sqlite_path

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

__all__ = ["ChatStores", "open_chat_stores"]

Backend = Literal["memory", "sqlite", "postgresql", "redis"]
#: How long a SQLite ping waits for another connection's write lock, in seconds.
_PING_BUSY_S: Final = 1.0


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
    _prune: Callable[[float], Awaitable[int]] | None = None
    retention_days: float | None = None
    _ping: Callable[[], Awaitable[None]] = _nothing

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

    async def ping(self) -> None:
        """One cheap round trip to the backend: ``SELECT 1`` on PostgreSQL, ``PING`` on Redis,
        and on SQLite a fresh connection to the file that takes the write lock and gives it
        back (waiting a second at most); nothing to do in memory. Bound it with a deadline.

        Raises:
            StorageError: the backend cannot be reached or used.
        """
        await self._ping()

    async def prune(self, now: float | None = None) -> int:
        """Delete what has been idle longer than ``retention_days``; how many records went.

        On SQLite and PostgreSQL this deletes sessions, conversations (their messages) and Ask
        conversations whose last save is older than the cutoff; Redis expires its keys by
        itself (each save renews the key's time to live), so nothing is left to do there.
        Without a retention setting, nothing is deleted.

        Args:
            now: The current time in Unix seconds (the wall clock by default).

        Raises:
            StorageError: the backend cannot be reached or used.
        """
        if self.retention_days is None or self._prune is None:
            return 0
        moment = time.time() if now is None else now
        return await self._prune(moment - self.retention_days * 86400)

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
    import sqlite3  # noqa: PLC0415 - one backend per process

    from ._sqlite import DEFAULT_TABLE, SQLiteAskSessionStore  # noqa: PLC0415
    from ._sqlite_memory import DEFAULT_MEMORY_TABLE, SQLiteChatMemory  # noqa: PLC0415
    from ._sqlite_session import DEFAULT_SESSION_TABLE, SQLiteSessionStorage  # noqa: PLC0415

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

    def delete_idle(cutoff: float, connection: sqlite3.Connection) -> int:
        with connection:
            deleted = connection.execute(
                f"DELETE FROM {DEFAULT_MEMORY_TABLE} WHERE conversation_id IN (SELECT"
                f" conversation_id FROM {DEFAULT_MEMORY_TABLE}_heads WHERE updated_at < ?)",
                (cutoff,),
            ).rowcount
            for table in (f"{DEFAULT_MEMORY_TABLE}_heads", DEFAULT_SESSION_TABLE, DEFAULT_TABLE):
                deleted += connection.execute(
                    f"DELETE FROM {table} WHERE updated_at < ?", (cutoff,)
                ).rowcount
        return deleted

    async def prune(cutoff: float) -> int:
        await open_()
        return await sessions._file.run(lambda connection: delete_idle(cutoff, connection))

    def probe() -> None:
        # A fresh connection to the file where it should be, and a write lock taken and given
        # back at once: fails when the file or its folder went away (an open connection would
        # still read its unlinked file), or when a stuck writer holds the lock.
        try:
            connection = sqlite3.connect(
                f"{Path(path).resolve().as_uri()}?mode=rw",
                uri=True,
                timeout=_PING_BUSY_S,
                isolation_level=None,
            )
            try:
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("ROLLBACK")
            finally:
                connection.close()
        except sqlite3.Error:
            raise StorageError("The SQLite store is unavailable.", retryable=True) from None

    async def ping() -> None:
        await anyio.to_thread.run_sync(probe)

    return ChatStores(
        "sqlite",
        asks,
        sessions,
        lambda session_id: SQLiteChatMemory(path, session_id),
        open_,
        close,
        prune,
        _ping=ping,
    )


def _postgres_stores(url: str) -> ChatStores:
    from ._postgres import PostgresAskSessionStore  # noqa: PLC0415 - the postgres extra
    from ._postgres_memory import PostgresChatMemory  # noqa: PLC0415
    from ._postgres_session import PostgresSessionStorage  # noqa: PLC0415
    from ._sqlite import DEFAULT_TABLE  # noqa: PLC0415 - the same table names as SQLite
    from ._sqlite_memory import DEFAULT_MEMORY_TABLE  # noqa: PLC0415
    from ._sqlite_session import DEFAULT_SESSION_TABLE  # noqa: PLC0415

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

    heads = f"{DEFAULT_MEMORY_TABLE}_heads"
    statements = (
        f"DELETE FROM {DEFAULT_MEMORY_TABLE} WHERE conversation_id IN"
        f" (SELECT conversation_id FROM {heads} WHERE updated_at < to_timestamp(%s))",
        *(
            f"DELETE FROM {table} WHERE updated_at < to_timestamp(%s)"
            for table in (heads, DEFAULT_SESSION_TABLE, DEFAULT_TABLE)
        ),
    )

    async def prune(cutoff: float) -> int:
        async def delete_idle(connection: Any) -> int:
            deleted = 0
            async with connection.transaction():
                for statement in statements:
                    cursor = await connection.execute(statement, (cutoff,))
                    deleted += max(cursor.rowcount, 0)
            return deleted

        return await sessions._table.call(delete_idle)

    async def ping() -> None:
        async def select_one(connection: Any) -> None:
            await connection.execute("SELECT 1")

        await sessions._table.call(select_one)

    return ChatStores(
        "postgresql",
        asks,
        sessions,
        lambda session_id: PostgresChatMemory(pool, session_id, create_table=False),
        open_,
        close,
        prune,
        _ping=ping,
    )


def _redis_stores(url: str, ttl_seconds: float | None) -> ChatStores:
    from ._redis import RedisAskSessionStore  # noqa: PLC0415 - the redis extra
    from ._redis_memory import RedisChatMemory  # noqa: PLC0415
    from ._redis_session import RedisSessionStorage  # noqa: PLC0415

    client: Redis
    client, _ = redis_client(url, user="open_chat_stores", max_connections=64, connect_timeout=10)
    asks = RedisAskSessionStore(client, ttl_seconds=ttl_seconds)
    sessions = RedisSessionStorage(client, ttl_seconds=ttl_seconds)

    async def open_() -> None:
        await sessions.open()

    async def close() -> None:
        await client.aclose()

    return ChatStores(
        "redis",
        asks,
        sessions,
        lambda session_id: RedisChatMemory(client, session_id, ttl_seconds=ttl_seconds),
        open_,
        close,
        _ping=sessions.open,  # one PING
    )


def open_chat_stores(url: str, *, retention_days: float | None = None) -> ChatStores:
    """The stores a served chat needs, on the backend ``url`` names. Nothing connects yet.

    ======================================  ==================================================
    URL                                     Backend
    ======================================  ==================================================
    ``memory:``                             this process only (tests, one worker)
    ``sqlite:///chat.db``                   one SQLite file (relative or ``////absolute``)
    ``postgresql://`` / ``postgres://``     one PostgreSQL pool (extra ``postgres``)
    ``redis://`` / ``rediss://``            one Redis client (extra ``redis``)
    ======================================  ==================================================

    Args:
        url: The backend's URL. It may hold a password; it never appears in an error.
        retention_days: Delete sessions, their messages and Ask conversations idle longer
            than this many days: Redis expires them by itself, SQLite and PostgreSQL when
            :meth:`ChatStores.prune` runs (``serve`` runs it at start-up and every hour).
            ``None`` keeps everything.

    Raises:
        ConfigurationError: the scheme is unknown, the URL is malformed, or
            ``retention_days`` is not a positive number.
        ImportError: the backend's extra is not installed.

    Example:
        >>> stores = open_chat_stores("sqlite:///chat.db")
        >>> stores.backend
        'sqlite'
    """
    if not isinstance(url, str):
        raise ConfigurationError("The store URL must be a string.")
    if retention_days is not None and (
        isinstance(retention_days, bool)
        or not isinstance(retention_days, int | float)
        or not math.isfinite(retention_days)
        or retention_days <= 0
    ):
        raise ConfigurationError("retention_days must be a positive number of days.")
    scheme = _scheme(url)
    stores: ChatStores
    if scheme == "memory":
        if url.lower() not in ("memory:", "memory://"):
            raise ConfigurationError("A memory store URL is just memory:.")
        stores = _memory_stores()
    elif scheme == "sqlite":
        stores = _sqlite_stores(_sqlite_path(url))
    elif scheme in ("postgresql", "postgres"):
        stores = _postgres_stores(url)
    elif scheme in ("redis", "rediss"):
        ttl = None if retention_days is None else retention_days * 86400
        stores = _redis_stores(url, ttl)
    else:
        raise ConfigurationError(
            "The store URL scheme is not one of memory, sqlite, postgresql, redis."
        )
    stores.retention_days = retention_days
    return stores
