"""Chat memory in a SQLite file: the embedded default of the ``ChatMemory`` port.

One row per message, keyed by conversation and position, holding the message's wire record as
compact JSON, and one header row per conversation (its row count and generation). A save
writes only the messages that changed since this memory last loaded or saved, in one
``BEGIN IMMEDIATE`` transaction, or the whole conversation when another writer saved in
between (:mod:`._memory_rows`), so a reader (or a second writer) sees the previous version or
the new one, never a mix, and a save's cost does not grow with the conversation.

The stdlib ``sqlite3`` driver blocks, so every call runs in a worker thread through anyio. A
call is never abandoned when cancelled: the thread finishes (or rolls back) its transaction and
the cancellation is delivered right after, which is what makes a cancelled ``save`` leave one
whole version.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from typing import Final

from agentskit_chat.runtime import ChatMessage

from ._memory_rows import Row, RowCache, SavePlan, decode_rows
from ._sqlite import check_table_name
from ._sqlite_file import SQLiteFile, SQLiteFileOwner, immediate_transaction

__all__ = ["DEFAULT_MEMORY_TABLE", "SQLiteChatMemory"]

#: The table a memory uses unless told otherwise (its headers are in ``<table>_heads``).
DEFAULT_MEMORY_TABLE: Final = "agentskit_chat_messages"

_BACKEND: Final = "SQLite"


def _encode(messages: Sequence[ChatMessage]) -> list[str]:
    """Each message's wire record as compact JSON, the whole list checked against the limits.

    Raises:
        ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
            conversation exceeds the memory record's structural limits.
    """
    return RowCache().plan(messages).texts


def _decode(rows: Sequence[str]) -> tuple[ChatMessage, ...]:
    """The messages of stored rows.

    Raises:
        StorageError: a row is not JSON, or the rows are not valid message records.
    """
    return tuple(row.message for row in decode_rows(rows, _BACKEND))


class SQLiteChatMemory(SQLiteFileOwner):
    """The messages of one conversation in a SQLite file (WAL mode).

    Several conversations (and several memories, in one process or many) may share a file:
    each memory reads and writes only the rows of its ``conversation_id``. The file and table
    are created on first use; ``":memory:"`` gives a private in-memory database.

    Args:
        path: The database file, or ``":memory:"``.
        conversation_id: The conversation this memory holds (any non-empty string).
        table: The table name (a plain identifier).
        busy_timeout: Seconds to wait for another connection's write lock before failing with
            a retryable :class:`~agentskit_chat.errors.StorageError`.

    Raises:
        ValueError: ``conversation_id`` is empty, ``table`` is not a plain identifier or
            ``busy_timeout`` is negative.

    Example:
        >>> async with SQLiteChatMemory("chat.db", "support-42") as memory:  # doctest: +SKIP
        ...     controller = ChatController(ChatConfig(adapter=adapter, memory=memory))
        ...     await controller.load()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        conversation_id: str,
        *,
        table: str = DEFAULT_MEMORY_TABLE,
        busy_timeout: float = 5.0,
    ) -> None:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ValueError("conversation_id must be a non-empty string")
        self._conversation_id = conversation_id
        self._table = check_table_name(table)
        self._heads = check_table_name(f"{self._table}_heads")
        self._cache = RowCache()
        self._file = SQLiteFile(
            path,
            name="SQLite chat memory",
            busy_timeout=busy_timeout,
            schema=(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                " conversation_id TEXT NOT NULL,"
                " position INTEGER NOT NULL,"
                " record TEXT NOT NULL,"
                " updated_at REAL NOT NULL,"
                " PRIMARY KEY (conversation_id, position))",
                f"CREATE TABLE IF NOT EXISTS {self._heads} ("
                " conversation_id TEXT PRIMARY KEY NOT NULL,"
                " generation TEXT NOT NULL,"
                " count INTEGER NOT NULL,"
                " updated_at REAL NOT NULL)",
            ),
        )

    @property
    def conversation_id(self) -> str:
        """The conversation this memory holds."""
        return self._conversation_id

    # --- the worker-thread side -------------------------------------------------------------

    def _load(self, connection: sqlite3.Connection) -> tuple[tuple[Row, ...], str | None]:
        head = connection.execute(
            f"SELECT generation, count FROM {self._heads} WHERE conversation_id = ?",
            (self._conversation_id,),
        ).fetchone()
        texts = [
            row[0]
            for row in connection.execute(
                f"SELECT record FROM {self._table} WHERE conversation_id = ? ORDER BY position",
                (self._conversation_id,),
            )
        ]
        rows = decode_rows(texts, _BACKEND)
        # A file written before headers existed, or a header that disagrees with the rows:
        # the next save rewrites the conversation whole.
        generation = str(head[0]) if head is not None and head[1] == len(rows) else None
        return rows, generation

    def _save(self, plan: SavePlan, connection: sqlite3.Connection) -> None:
        now = time.time()
        cid = self._conversation_id
        with immediate_transaction(connection):
            head = connection.execute(
                f"SELECT generation FROM {self._heads} WHERE conversation_id = ?", (cid,)
            ).fetchone()
            if head is not None and plan.continues(head[0]):
                written = [(cid, p, plan.rows[p].text, now) for p in plan.changed]
                if len(plan.rows) < plan.known_length:
                    connection.execute(
                        f"DELETE FROM {self._table} WHERE conversation_id = ? AND position >= ?",
                        (cid, len(plan.rows)),
                    )
            else:
                connection.execute(f"DELETE FROM {self._table} WHERE conversation_id = ?", (cid,))
                written = [(cid, p, text, now) for p, text in enumerate(plan.texts)]
            connection.executemany(
                f"INSERT OR REPLACE INTO {self._table}"
                " (conversation_id, position, record, updated_at) VALUES (?, ?, ?, ?)",
                written,
            )
            connection.execute(
                f"INSERT OR REPLACE INTO {self._heads}"
                " (conversation_id, generation, count, updated_at) VALUES (?, ?, ?, ?)",
                (cid, plan.generation, len(plan.rows), now),
            )

    # --- the async side ---------------------------------------------------------------------

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first (empty for a new conversation).

        Raises:
            StorageError: the stored rows are not valid message records (not retryable), the
                database is busy or cannot be opened (retryable), or the memory is closed.
        """
        rows, generation = await self._file.run(self._load)
        self._cache.remember(rows, generation)
        return tuple(row.message for row in rows)

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages with ``messages``, atomically, writing only the
        messages that changed since this memory last loaded or saved.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
                conversation exceeds the memory record's limits (nothing is written).
            StorageError: the database is busy or cannot be opened (retryable), or the memory
                is closed.
        """
        plan = self._cache.plan(tuple(messages))
        try:
            await self._file.run(lambda connection: self._save(plan, connection))
        except BaseException:
            self._cache.forget()
            raise
        self._cache.remember(plan.rows, plan.generation)
