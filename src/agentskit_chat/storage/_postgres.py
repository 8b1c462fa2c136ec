"""An Ask session store in one PostgreSQL table, for many workers on many machines.

psycopg 3 (async) with a ``psycopg_pool`` connection pool; both are imported when a store is
built, so the package works without the ``postgres`` extra. The compare-and-set is one
statement: ``INSERT ... ON CONFLICT DO UPDATE ... WHERE revision = 0`` when the caller expects
revision 0 (nothing stored, or a record stored at revision 0) and ``UPDATE ... WHERE revision =
%s`` otherwise. Under PostgreSQL's default isolation a concurrent writer waits for the row lock
and then re-checks the revision, so exactly one of two racing writers wins.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentskit_chat._drivers import require_extra
from agentskit_chat.protocol import AskSessionRecord
from agentskit_chat.service import SessionKey

from ._codec import ASK_STORE, check_save, decode_record
from ._keys import check_session_key
from ._postgres_table import PostgresTable
from ._sqlite import DEFAULT_TABLE, check_table_name

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresAskSessionStore"]

_BACKEND = "PostgreSQL"

_CREATE = """CREATE TABLE IF NOT EXISTS {table} (
    site_id text NOT NULL,
    subject_id text NOT NULL,
    session_id text NOT NULL,
    revision bigint NOT NULL,
    record text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site_id, subject_id, session_id)
)"""
_SELECT = (
    "SELECT revision, record FROM {table}"
    " WHERE site_id = %s AND subject_id = %s AND session_id = %s"
)
# Expecting revision 0 matches no row or a row still at revision 0 (a valid stored record).
_INSERT = (
    "INSERT INTO {table} AS stored (site_id, subject_id, session_id, revision, record)"
    " VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (site_id, subject_id, session_id) DO UPDATE SET"
    " revision = EXCLUDED.revision, record = EXCLUDED.record, updated_at = now()"
    " WHERE stored.revision = 0"
)
_UPDATE = (
    "UPDATE {table} SET revision = %s, record = %s, updated_at = now()"
    " WHERE site_id = %s AND subject_id = %s AND session_id = %s AND revision = %s"
)


class PostgresAskSessionStore:
    """Revisioned Ask sessions in a PostgreSQL table, shared by every worker.

    Built from a URL, the store owns a connection pool that it opens on first use and closes
    in :meth:`aclose`. Built from an ``AsyncConnectionPool`` you opened, it borrows the pool
    and leaves it open. The table is created on first use unless ``create_table=False``.

    Args:
        url_or_pool: A libpq connection URL (``postgresql://user:pass@host/db``) or an open
            ``psycopg_pool.AsyncConnectionPool``.
        table: The table name (a plain identifier).
        create_table: Run ``CREATE TABLE IF NOT EXISTS`` on first use.
        min_size: Connections an owned pool keeps open.
        max_size: Connections an owned pool may open.
        timeout: Seconds an operation waits for a pooled connection (an unreachable server
            fails after this long with a retryable :class:`~agentskit_chat.errors.StorageError`).

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        TypeError: ``url_or_pool`` is neither a string nor an ``AsyncConnectionPool``.
        ValueError: ``table`` is not a plain identifier.

    Example:
        >>> store = PostgresAskSessionStore("postgresql://app@127.0.0.1/app")  # doctest: +SKIP
        >>> async with store:  # doctest: +SKIP
        ...     await store.save(key, record, 0)
    """

    def __init__(
        self,
        url_or_pool: str | AsyncConnectionPool[Any],
        *,
        table: str = DEFAULT_TABLE,
        create_table: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
    ) -> None:
        name = check_table_name(table)
        require_extra("PostgresAskSessionStore", "postgres", "psycopg", "psycopg_pool")
        from psycopg import sql  # noqa: PLC0415

        identifier = sql.Identifier(name)
        self._select = sql.SQL(_SELECT).format(table=identifier)
        self._insert = sql.SQL(_INSERT).format(table=identifier)
        self._update = sql.SQL(_UPDATE).format(table=identifier)
        self._table = PostgresTable(
            url_or_pool,
            user="PostgresAskSessionStore",
            store=ASK_STORE,
            create=(sql.SQL(_CREATE).format(table=identifier),),
            create_table=create_table,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        """The stored record of ``key``, or ``None``.

        Raises:
            StorageError: the stored record is invalid (not retryable), the server is
                unreachable (retryable), or the store is closed.
        """
        check_session_key(key)
        from psycopg.rows import tuple_row  # noqa: PLC0415

        async def select(connection: AsyncConnection[Any]) -> Any:
            # Tuples whatever row factory a borrowed pool was configured with.
            async with connection.cursor(row_factory=tuple_row) as cursor:
                await cursor.execute(self._select, (key.site_id, key.subject_id, key.session_id))
                return await cursor.fetchone()

        row = await self._table.call(select)
        if row is None:
            return None
        revision, text = row
        return decode_record(_BACKEND, text, revision=revision)

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` iff the stored revision (0 when none) equals ``expected_revision``.

        Raises:
            ValueError: ``record.revision`` is not ``expected_revision + 1``.
            StorageError: the server is unreachable (retryable) or the store is closed.
        """
        text = check_save(key, record, expected_revision)
        parts = (key.site_id, key.subject_id, key.session_id)

        async def write(connection: AsyncConnection[Any]) -> bool:
            if expected_revision == 0:
                cursor = await connection.execute(self._insert, (*parts, record.revision, text))
            else:
                cursor = await connection.execute(
                    self._update, (record.revision, text, *parts, expected_revision)
                )
            return bool(cursor.rowcount == 1)

        return await self._table.call(write)

    async def open(self) -> None:
        """Connect and create the table now, so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached or the table cannot be created.
        """
        await self._table.open()

    async def aclose(self) -> None:
        """Stop using the pool, and close it if this store opened it. Idempotent."""
        await self._table.aclose()

    async def __aenter__(self) -> PostgresAskSessionStore:
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
