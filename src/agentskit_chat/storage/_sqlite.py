"""An Ask session store in one SQLite table: the embedded default.

The stdlib ``sqlite3`` driver blocks, so every call runs in a worker thread through anyio and
the event loop never waits on disk. One connection per store, serialized: a ``CapacityLimiter``
keeps waiting callers in the event loop rather than in threads, and a ``threading.Lock`` guards
the connection itself. Several stores (or processes) may share one file: the compare-and-set is
a single conditional statement inside a ``BEGIN IMMEDIATE`` transaction, and a busy file is
waited on for ``busy_timeout`` seconds before the call fails as retryable.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

import anyio
import anyio.to_thread

from agentskit_chat.ask import SessionKey
from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import AskSessionRecord

from ._codec import (
    check_save,
    closed_error,
    decode_record,
    failed_error,
    unavailable_error,
)
from ._keys import check_session_key

__all__ = ["DEFAULT_TABLE", "SQLiteAskSessionStore", "check_table_name"]

T = TypeVar("T")

_BACKEND = "SQLite"
#: The table a store uses unless told otherwise (shared by the SQL backends).
DEFAULT_TABLE = "agentskit_ask_sessions"
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_table_name(table: str) -> str:
    """Return ``table`` if it is a plain SQL identifier (letters, digits, ``_``; ≤ 63).

    Raises:
        ValueError: it is not; the name is interpolated into SQL, so nothing else is accepted.
    """
    if not isinstance(table, str) or _TABLE_NAME.fullmatch(table) is None:
        raise ValueError("table must be a plain SQL identifier of at most 63 characters")
    return table


class SQLiteAskSessionStore:
    """Revisioned Ask sessions in a SQLite file (WAL mode), or in memory with ``":memory:"``.

    The file and table are created on first use. Each row holds the three key parts, the
    revision, the record as compact JSON and the time of the last save (``updated_at``, Unix
    seconds), so an operator can prune old sessions with plain SQL.

    Args:
        path: The database file, or ``":memory:"`` for a private in-memory database (gone when
            the store is closed).
        table: The table name (a plain identifier).
        busy_timeout: Seconds to wait for another connection's write lock before failing with
            a retryable :class:`~agentskit_chat.errors.StorageError`.

    Raises:
        ValueError: ``table`` is not a plain identifier or ``busy_timeout`` is negative.

    Example:
        >>> async with SQLiteAskSessionStore("sessions.db") as store:  # doctest: +SKIP
        ...     record = await store.load(key)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = DEFAULT_TABLE,
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
            closed_error(_BACKEND)
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
                    # WAL's recommended level: never corrupts; a power cut may drop the last
                    # few commits, which costs a chat one answer, not a session.
                    connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._table} ("
                    " site_id TEXT NOT NULL,"
                    " subject_id TEXT NOT NULL,"
                    " session_id TEXT NOT NULL,"
                    " revision INTEGER NOT NULL,"
                    " record TEXT NOT NULL,"
                    " updated_at REAL NOT NULL,"
                    " PRIMARY KEY (site_id, subject_id, session_id))"
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
                # Busy or locked files, a full disk, a file that cannot be opened right now.
                raise unavailable_error(_BACKEND) from None
            except sqlite3.Error:
                raise failed_error(_BACKEND) from None

    def _load(self, key: SessionKey, connection: sqlite3.Connection) -> tuple[int, str] | None:
        row = connection.execute(
            f"SELECT revision, record FROM {self._table}"
            " WHERE site_id = ? AND subject_id = ? AND session_id = ?",
            (key.site_id, key.subject_id, key.session_id),
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def _save(
        self,
        key: SessionKey,
        revision: int,
        text: str,
        expected_revision: int,
        connection: sqlite3.Connection,
    ) -> bool:
        parts = (key.site_id, key.subject_id, key.session_id)
        connection.execute("BEGIN IMMEDIATE")
        try:
            if expected_revision == 0:
                cursor = connection.execute(
                    f"INSERT INTO {self._table}"
                    " (site_id, subject_id, session_id, revision, record, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (*parts, revision, text, time.time()),
                )
            else:
                cursor = connection.execute(
                    f"UPDATE {self._table} SET revision = ?, record = ?, updated_at = ?"
                    " WHERE site_id = ? AND subject_id = ? AND session_id = ? AND revision = ?",
                    (revision, text, time.time(), *parts, expected_revision),
                )
            saved = cursor.rowcount == 1
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return saved

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    # --- the async side ---------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        # Not abandoned on cancellation: the thread finishes its statement (milliseconds) and
        # the cancellation is delivered right after, so a transaction is never left half done.
        return await anyio.to_thread.run_sync(self._locked, work, limiter=self._limiter)

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        """The stored record of ``key``, or ``None``.

        Raises:
            StorageError: the stored record is invalid (not retryable), the database is busy
                or cannot be opened (retryable), or the store is closed.
        """
        check_session_key(key)
        row = await self._run(lambda connection: self._load(key, connection))
        if row is None:
            return None
        return decode_record(_BACKEND, row[1], revision=row[0])

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` iff the stored revision equals ``expected_revision`` (0: none).

        Raises:
            ValueError: ``record.revision`` is not ``expected_revision + 1``.
            StorageError: the database is busy or cannot be opened (retryable), or the store
                is closed.
        """
        text = check_save(key, record, expected_revision)
        return await self._run(
            lambda connection: self._save(key, record.revision, text, expected_revision, connection)
        )

    def close(self) -> None:
        """Close the connection (blocking; use :meth:`aclose` from async code). Idempotent."""
        self._close()

    async def aclose(self) -> None:
        """Close the connection from a worker thread. Idempotent."""
        await anyio.to_thread.run_sync(self._close, limiter=self._limiter)

    async def __aenter__(self) -> SQLiteAskSessionStore:
        await self._run(lambda connection: None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
