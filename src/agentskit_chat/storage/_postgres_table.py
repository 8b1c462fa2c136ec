"""One PostgreSQL table behind async code: the pool, the schema and the error mapping.

A store built from a URL owns its pool (opened on first use, closed by ``aclose``); built from
an ``AsyncConnectionPool`` it borrows it. The table is created on first use unless told not to.
Every driver error becomes a :class:`~agentskit_chat.errors.StorageError`: retryable when the
server is unreachable or the pool timed out, not retryable otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agentskit_chat._drivers import postgres_pool

from ._codec import closed_error, failed_error, unavailable_error

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composable
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresTable"]

T = TypeVar("T")
_BACKEND = "PostgreSQL"


class PostgresTable:
    """A pool and the statements that create one store's table, used one call at a time.

    Args:
        url_or_pool: A libpq URL or an open ``psycopg_pool.AsyncConnectionPool``.
        user: The store's class name, for the missing-extra error.
        store: What the store's errors call it (``session storage``, ``chat memory``).
        create: The statements that create the table (and its indexes) if missing.
        create_table: Whether to run ``create`` on first use.
        min_size: Connections an owned pool keeps open.
        max_size: Connections an owned pool may open.
        timeout: Seconds a call waits for a pooled connection.

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        TypeError: ``url_or_pool`` is neither a string nor an ``AsyncConnectionPool``.
    """

    def __init__(
        self,
        url_or_pool: str | AsyncConnectionPool[Any],
        *,
        user: str,
        store: str,
        create: tuple[Composable, ...],
        create_table: bool,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        self._pool, self._owns_pool = postgres_pool(
            url_or_pool, user=user, min_size=min_size, max_size=max_size, timeout=timeout
        )
        self._store = store
        self._create = create if create_table else ()
        self._ready = False
        self._ready_lock = anyio.Lock()
        self._closed = False

    async def _ensure_ready(self) -> None:
        if self._closed:
            closed_error(_BACKEND, self._store)
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            if self._owns_pool:
                # Does not wait for a connection: the first call waits up to ``timeout``.
                await self._pool.open(wait=False)
            if self._create:
                await self._create_if_missing()
            self._ready = True

    async def _create_if_missing(self) -> None:
        from psycopg import errors  # noqa: PLC0415

        async with self._pool.connection() as connection:
            for statement in self._create:
                # Another worker may create it at the same moment (a known race of IF NOT
                # EXISTS): it exists then, so go on with the next statement.
                with contextlib.suppress(
                    errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject
                ):
                    await connection.execute(statement)

    async def call(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``work`` on a pooled connection (autocommit unless it opens a transaction).

        Raises:
            StorageError: the server is unreachable or the pool timed out (retryable), a
                statement failed (not retryable), or the store is closed.
        """
        import psycopg  # noqa: PLC0415

        try:
            await self._ensure_ready()
            async with self._pool.connection() as connection:
                return await work(connection)
        except psycopg.OperationalError:
            raise unavailable_error(_BACKEND, self._store) from None
        except psycopg.Error:
            raise failed_error(_BACKEND, self._store) from None

    async def open(self) -> None:
        """Open the pool and create the table now, so a bad configuration fails at startup."""

        async def nothing(connection: AsyncConnection[Any]) -> None:
            await connection.execute("SELECT 1")

        await self.call(nothing)

    async def aclose(self) -> None:
        """Stop using the pool, and close it if the store opened it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool:
            await self._pool.close()
