"""Chat session snapshots in one PostgreSQL table: :class:`SessionStorage` for many workers.

The compare-and-set is one statement: ``INSERT ... ON CONFLICT DO NOTHING`` to create, and
``UPDATE ... WHERE cursor = %s`` to replace. Under PostgreSQL's default isolation a concurrent
writer waits for the row lock and then re-checks the cursor, so exactly one of two racing
writers wins.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.conversation._storage import check_snapshot_save
from agentskit_chat.protocol import SessionSnapshot

from ._postgres_table import PostgresTable
from ._sqlite import check_table_name
from ._sqlite_session import DEFAULT_SESSION_TABLE

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresSessionStorage"]

_CREATE: Final = """CREATE TABLE IF NOT EXISTS {table} (
    session_id text PRIMARY KEY,
    cursor bigint NOT NULL,
    snapshot text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)"""
_SELECT: Final = "SELECT snapshot FROM {table} WHERE session_id = %s"
_INSERT: Final = (
    "INSERT INTO {table} (session_id, cursor, snapshot) VALUES (%s, %s, %s)"
    " ON CONFLICT (session_id) DO NOTHING"
)
_UPDATE: Final = (
    "UPDATE {table} SET cursor = %s, snapshot = %s, updated_at = now()"
    " WHERE session_id = %s AND cursor = %s"
)
_DELETE: Final = "DELETE FROM {table} WHERE session_id = %s"


class PostgresSessionStorage:
    """Chat session snapshots in a PostgreSQL table, shared by every worker.

    Each row holds the session id, the cursor, the snapshot as compact JSON and the time of the
    last save (``updated_at``), so an operator can prune old sessions with plain SQL.

    Args:
        url_or_pool: A libpq URL (``postgresql://user:pass@host/db``) or an open
            ``psycopg_pool.AsyncConnectionPool`` (borrowed, left open).
        table: The table name (a plain identifier).
        create_table: Run ``CREATE TABLE IF NOT EXISTS`` on first use.
        min_size: Connections an owned pool keeps open.
        max_size: Connections an owned pool may open.
        timeout: Seconds a call waits for a pooled connection (an unreachable server fails
            after this long with a retryable :class:`~agentskit_chat.errors.StorageError`).

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        TypeError: ``url_or_pool`` is neither a string nor an ``AsyncConnectionPool``.
        ValueError: ``table`` is not a plain identifier.

    Example:
        >>> storage = PostgresSessionStorage("postgresql://app@db/app")  # doctest: +SKIP
        >>> async with storage:  # doctest: +SKIP
        ...     session = await resume_chat_session(definition, session_id=sid, storage=storage)
    """

    def __init__(
        self,
        url_or_pool: str | AsyncConnectionPool[Any],
        *,
        table: str = DEFAULT_SESSION_TABLE,
        create_table: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
    ) -> None:
        name = check_table_name(table)
        require_extra("PostgresSessionStorage", "postgres", "psycopg", "psycopg_pool")
        from psycopg import sql  # noqa: PLC0415

        identifier = sql.Identifier(name)
        self._select = sql.SQL(_SELECT).format(table=identifier)
        self._insert = sql.SQL(_INSERT).format(table=identifier)
        self._update = sql.SQL(_UPDATE).format(table=identifier)
        self._delete = sql.SQL(_DELETE).format(table=identifier)
        self._table = PostgresTable(
            url_or_pool,
            store="session storage",
            user="PostgresSessionStorage",
            create=(sql.SQL(_CREATE).format(table=identifier),),
            create_table=create_table,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )

    async def load(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or ``None``.

        Raises:
            StorageError: the server is unreachable (retryable), or the storage is closed.
        """

        async def select(connection: AsyncConnection[Any]) -> str | None:
            cursor = await connection.execute(self._select, (session_id,))
            row = await cursor.fetchone()
            return None if row is None else str(row[0])

        return await self._table.call(select)

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored); ``False`` on conflict.

        Raises:
            StorageError: the server is unreachable (retryable), or the storage is closed.
        """
        text = check_snapshot_save(snapshot, expected_cursor)

        async def write(connection: AsyncConnection[Any]) -> bool:
            if expected_cursor is None:
                cursor = await connection.execute(
                    self._insert, (snapshot.session_id, snapshot.cursor, text)
                )
            else:
                cursor = await connection.execute(
                    self._update, (snapshot.cursor, text, snapshot.session_id, expected_cursor)
                )
            return bool(cursor.rowcount == 1)

        return await self._table.call(write)

    async def delete(self, session_id: str) -> None:
        """Forget the session's snapshot (nothing happens when there is none)."""

        async def remove(connection: AsyncConnection[Any]) -> None:
            await connection.execute(self._delete, (session_id,))

        await self._table.call(remove)

    async def open(self) -> None:
        """Connect and create the table now, so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached or the table cannot be created.
        """
        await self._table.open()

    async def aclose(self) -> None:
        """Stop using the pool, and close it if this storage opened it. Idempotent."""
        await self._table.aclose()

    async def __aenter__(self) -> PostgresSessionStorage:
        """Open the pool and create the table now, so a bad configuration fails at startup."""
        await self._table.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
