"""Chat memory in PostgreSQL: the ``ChatMemory`` port for many workers on many machines.

Rows (conversation, position → the message's compact JSON) and one header per conversation
(row count, generation), as in the SQLite memory (:mod:`._memory_rows`). A save runs in one
transaction under a transaction-scoped advisory lock on the conversation, so two writers of one
conversation take turns; it writes only the changed rows when the stored generation is the one
this memory remembers, and the whole conversation otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.runtime import ChatMessage

from ._memory_rows import Row, RowCache, SavePlan, decode_rows
from ._postgres_table import PostgresTable
from ._sqlite import check_table_name
from ._sqlite_memory import DEFAULT_MEMORY_TABLE

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresChatMemory"]

_BACKEND: Final = "PostgreSQL"

_CREATE_ROWS: Final = """CREATE TABLE IF NOT EXISTS {rows} (
    conversation_id text NOT NULL,
    position integer NOT NULL,
    record text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, position)
)"""
_CREATE_HEADS: Final = """CREATE TABLE IF NOT EXISTS {heads} (
    conversation_id text PRIMARY KEY,
    generation text NOT NULL,
    count integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)"""
_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_HEAD: Final = "SELECT generation, count FROM {heads} WHERE conversation_id = %s"
_ROWS: Final = "SELECT record FROM {rows} WHERE conversation_id = %s ORDER BY position"
_UPSERT_ROW: Final = (
    "INSERT INTO {rows} (conversation_id, position, record) VALUES (%s, %s, %s)"
    " ON CONFLICT (conversation_id, position) DO UPDATE"
    " SET record = EXCLUDED.record, updated_at = now()"
)
_TRUNCATE: Final = "DELETE FROM {rows} WHERE conversation_id = %s AND position >= %s"
_UPSERT_HEAD: Final = (
    "INSERT INTO {heads} (conversation_id, generation, count) VALUES (%s, %s, %s)"
    " ON CONFLICT (conversation_id) DO UPDATE"
    " SET generation = EXCLUDED.generation, count = EXCLUDED.count, updated_at = now()"
)


class PostgresChatMemory:
    """The messages of one conversation in PostgreSQL, shared by every worker.

    Many conversations (and memories) share the two tables: ``table`` for the messages and
    ``<table>_heads`` for each conversation's header. Built from a URL, the memory owns a pool
    (opened on first use, closed by :meth:`aclose`); built from an ``AsyncConnectionPool`` it
    borrows it, which is how many conversations share connections.

    Args:
        url_or_pool: A libpq URL or an open ``psycopg_pool.AsyncConnectionPool``.
        conversation_id: The conversation this memory holds (any non-empty string).
        table: The messages table's name (a plain identifier).
        create_table: Run ``CREATE TABLE IF NOT EXISTS`` on first use.
        min_size: Connections an owned pool keeps open.
        max_size: Connections an owned pool may open.
        timeout: Seconds a call waits for a pooled connection.

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        TypeError: ``url_or_pool`` is neither a string nor an ``AsyncConnectionPool``.
        ValueError: ``conversation_id`` is empty or ``table`` is not a plain identifier.
    """

    def __init__(
        self,
        url_or_pool: str | AsyncConnectionPool[Any],
        conversation_id: str,
        *,
        table: str = DEFAULT_MEMORY_TABLE,
        create_table: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ValueError("conversation_id must be a non-empty string")
        rows_name = check_table_name(table)
        heads_name = check_table_name(f"{rows_name}_heads")
        require_extra("PostgresChatMemory", "postgres", "psycopg", "psycopg_pool")
        from psycopg import sql  # noqa: PLC0415

        names = {"rows": sql.Identifier(rows_name), "heads": sql.Identifier(heads_name)}
        self._head = sql.SQL(_HEAD).format(**names)
        self._rows = sql.SQL(_ROWS).format(**names)
        self._upsert_row = sql.SQL(_UPSERT_ROW).format(**names)
        self._truncate = sql.SQL(_TRUNCATE).format(**names)
        self._upsert_head = sql.SQL(_UPSERT_HEAD).format(**names)
        self._conversation_id = conversation_id
        self._cache = RowCache()
        self._table = PostgresTable(
            url_or_pool,
            store="chat memory",
            user="PostgresChatMemory",
            create=(
                sql.SQL(_CREATE_ROWS).format(**names),
                sql.SQL(_CREATE_HEADS).format(**names),
            ),
            create_table=create_table,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )

    @property
    def conversation_id(self) -> str:
        """The conversation this memory holds."""
        return self._conversation_id

    async def _select(self, connection: AsyncConnection[Any]) -> tuple[str | None, list[Any]]:
        cursor = await connection.execute(self._head, (self._conversation_id,))
        head = await cursor.fetchone()
        cursor = await connection.execute(self._rows, (self._conversation_id,))
        texts = [row[0] for row in await cursor.fetchall()]
        generation = str(head[0]) if head is not None and head[1] == len(texts) else None
        return generation, texts

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first (empty for a new conversation).

        Raises:
            StorageError: the stored rows are not valid message records (not retryable), the
                server is unreachable (retryable), or the memory is closed.
        """

        async def read(connection: AsyncConnection[Any]) -> tuple[str | None, list[Any]]:
            # One snapshot of the header and the rows.
            async with connection.transaction():
                return await self._select(connection)

        generation, texts = await self._table.call(read)
        rows = decode_rows(texts, _BACKEND)
        self._cache.remember(rows, generation)
        return tuple(row.message for row in rows)

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages with ``messages``, atomically, writing only the
        messages that changed since this memory last loaded or saved.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
                conversation exceeds the memory record's limits (nothing is written).
            StorageError: the server is unreachable (retryable), or the memory is closed.
        """
        plan = self._cache.plan(tuple(messages))
        try:
            await self._table.call(lambda connection: self._write(plan, connection))
        except BaseException:
            self._cache.forget()
            raise
        self._cache.remember(plan.rows, plan.generation)

    async def _write(self, plan: SavePlan, connection: AsyncConnection[Any]) -> None:
        cid = self._conversation_id
        async with connection.transaction():
            await connection.execute(_LOCK, (cid,))
            cursor = await connection.execute(self._head, (cid,))
            head = await cursor.fetchone()
            incremental = (
                plan.expected is not None and head is not None and head[0] == plan.expected
            )
            positions: Sequence[int] = plan.changed if incremental else range(len(plan.rows))
            rows: tuple[Row, ...] = plan.rows
            if positions:
                async with connection.cursor() as writer:
                    await writer.executemany(
                        self._upsert_row, [(cid, p, rows[p].text) for p in positions]
                    )
            if not incremental or len(rows) < plan.known_length:
                await connection.execute(self._truncate, (cid, len(rows)))
            await connection.execute(self._upsert_head, (cid, plan.generation, len(rows)))

    async def open(self) -> None:
        """Connect and create the table now, so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached or the table cannot be created.
        """
        await self._table.open()

    async def aclose(self) -> None:
        """Stop using the pool, and close it if this memory opened it. Idempotent."""
        await self._table.aclose()

    async def __aenter__(self) -> PostgresChatMemory:
        """Open the pool and create the tables now, so a bad configuration fails at startup."""
        await self._table.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
