"""Chat session snapshots in one SQLite table: the embedded :class:`SessionStorage`.

Like the SQLite Ask store: the stdlib driver blocks, so every call runs in a worker thread
through anyio; one connection per storage, serialized; the compare-and-set is one conditional
statement inside a ``BEGIN IMMEDIATE`` transaction, so several storages (or processes) can share
a file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from agentskit_chat.conversation._storage import check_snapshot_save
from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import SessionSnapshot

from ._sqlite import check_table_name

__all__ = ["DEFAULT_SESSION_TABLE", "SQLiteSessionStorage"]

T = TypeVar("T")

#: The table a storage uses unless told otherwise.
DEFAULT_SESSION_TABLE: Final = "agentskit_chat_sessions"


def _error(reason: str, *, retryable: bool) -> StorageError:
    return StorageError(f"The SQLite session storage {reason}.", retryable=retryable)


class SQLiteSessionStorage:
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
        self._path = os.fspath(path)
        self._table = check_table_name(table)
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be >= 0")
        self._busy_timeout = float(busy_timeout)
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)

    # --- the worker-thread side -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise _error("is closed", retryable=False)
        if self._connection is None:
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                if self._path != ":memory:":
                    connection.execute("PRAGMA journal_mode=WAL")
                    connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._table} ("
                    " session_id TEXT PRIMARY KEY NOT NULL,"
                    " cursor INTEGER NOT NULL,"
                    " snapshot TEXT NOT NULL,"
                    " updated_at REAL NOT NULL)"
                )
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._connect())
            except StorageError:
                raise
            except sqlite3.OperationalError:
                raise _error("is unavailable", retryable=True) from None
            except sqlite3.Error:
                raise _error("failed", retryable=False) from None

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
        connection.execute("BEGIN IMMEDIATE")
        try:
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
            saved = cursor.rowcount == 1
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return saved

    def _delete(self, session_id: str, connection: sqlite3.Connection) -> None:
        connection.execute(f"DELETE FROM {self._table} WHERE session_id = ?", (session_id,))

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    # --- the async side ---------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        # Not abandoned on cancellation: the statement finishes (milliseconds), then the
        # cancellation is delivered, so a transaction is never left half done.
        return await anyio.to_thread.run_sync(self._locked, work, limiter=self._limiter)

    async def load(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or ``None``.

        Raises:
            StorageError: the database is busy or cannot be opened (retryable), or the
                storage is closed.
        """
        return await self._run(lambda connection: self._load(session_id, connection))

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored); ``False`` on conflict.

        Raises:
            StorageError: the database is busy or cannot be opened (retryable), or the
                storage is closed.
        """
        text = check_snapshot_save(snapshot, expected_cursor)
        return await self._run(
            lambda connection: self._save(
                snapshot.session_id, snapshot.cursor, text, expected_cursor, connection
            )
        )

    async def delete(self, session_id: str) -> None:
        """Forget the session's snapshot (nothing happens when there is none)."""
        await self._run(lambda connection: self._delete(session_id, connection))

    def close(self) -> None:
        """Close the connection (blocking; use :meth:`aclose` from async code). Idempotent."""
        self._close()

    async def aclose(self) -> None:
        """Close the connection from a worker thread. Idempotent."""
        await anyio.to_thread.run_sync(self._close, limiter=self._limiter)

    async def __aenter__(self) -> SQLiteSessionStorage:
        await self._run(lambda connection: None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
