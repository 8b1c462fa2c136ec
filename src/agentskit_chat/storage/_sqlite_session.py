"""Chat session snapshots in one SQLite table: the embedded :class:`SessionStorage`.

Like the SQLite Ask store (and on the same ``_sqlite_file`` connection): every call runs in a
worker thread through anyio, one at a time; the compare-and-set is one conditional statement
inside a ``BEGIN IMMEDIATE`` transaction, so several storages (or processes) can share a file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Final

from agentskit_chat.conversation._storage import check_snapshot_save
from agentskit_chat.protocol import SessionSnapshot

from ._sqlite import check_table_name
from ._sqlite_file import SQLiteFile, SQLiteFileOwner, immediate_transaction

__all__ = ["DEFAULT_SESSION_TABLE", "SQLiteSessionStorage"]

#: The table a storage uses unless told otherwise.
DEFAULT_SESSION_TABLE: Final = "agentskit_chat_sessions"


class SQLiteSessionStorage(SQLiteFileOwner):
    """Chat session snapshots in a SQLite file (WAL mode), or in memory with ``":memory:"``.

    The file and table are created on first use. Each row holds the session id, the cursor,
    the snapshot as compact JSON and the time of the last save (``updated_at``, Unix seconds),
    so an operator can prune old sessions with plain SQL.

    Args:
        path: The database file, or ``":memory:"`` for a private in-memory database.
        table: The table name (a plain identifier).
        busy_timeout: Seconds to wait for another connection's write lock before failing with
            a retryable :class:`~agentskit_chat.errors.StorageError`.

    Raises:
        ValueError: ``table`` is not a plain identifier or ``busy_timeout`` is negative.

    Example:
        >>> async with SQLiteSessionStorage("sessions.db") as storage:  # doctest: +SKIP
        ...     session = await resume_chat_session(definition, session_id=sid, storage=storage)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = DEFAULT_SESSION_TABLE,
        busy_timeout: float = 5.0,
    ) -> None:
        self._table = check_table_name(table)
        self._file = SQLiteFile(
            path,
            name="SQLite session storage",
            busy_timeout=busy_timeout,
            schema=(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                " session_id TEXT PRIMARY KEY NOT NULL,"
                " cursor INTEGER NOT NULL,"
                " snapshot TEXT NOT NULL,"
                " updated_at REAL NOT NULL)",
            ),
        )

    # --- the worker-thread side -------------------------------------------------------------

    def _load(self, session_id: str, connection: sqlite3.Connection) -> str | None:
        row = connection.execute(
            f"SELECT snapshot FROM {self._table} WHERE session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def _save(
        self,
        session_id: str,
        cursor_value: int,
        text: str,
        expected: int | None,
        connection: sqlite3.Connection,
    ) -> bool:
        with immediate_transaction(connection):
            if expected is None:
                cursor = connection.execute(
                    f"INSERT INTO {self._table} (session_id, cursor, snapshot, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (session_id, cursor_value, text, time.time()),
                )
            else:
                cursor = connection.execute(
                    f"UPDATE {self._table} SET cursor = ?, snapshot = ?, updated_at = ?"
                    " WHERE session_id = ? AND cursor = ?",
                    (cursor_value, text, time.time(), session_id, expected),
                )
            return cursor.rowcount == 1

    def _delete(self, session_id: str, connection: sqlite3.Connection) -> None:
        connection.execute(f"DELETE FROM {self._table} WHERE session_id = ?", (session_id,))

    # --- the async side ---------------------------------------------------------------------

    async def load(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or ``None``.

        Raises:
            StorageError: the database is busy or cannot be opened (retryable), or the
                storage is closed.
        """
        return await self._file.run(lambda connection: self._load(session_id, connection))

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored); ``False`` on conflict.

        Raises:
            StorageError: the database is busy or cannot be opened (retryable), or the
                storage is closed.
        """
        text = check_snapshot_save(snapshot, expected_cursor)
        return await self._file.run(
            lambda connection: self._save(
                snapshot.session_id, snapshot.cursor, text, expected_cursor, connection
            )
        )

    async def delete(self, session_id: str) -> None:
        """Forget the session's snapshot (nothing happens when there is none)."""
        await self._file.run(lambda connection: self._delete(session_id, connection))
