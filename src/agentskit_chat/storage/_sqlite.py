"""An Ask session store in one SQLite table: the embedded default.

The connection is the one every SQLite store shares (``_sqlite_file``): each call runs in a
worker thread, one at a time, and the event loop never waits on disk. Several stores (or
processes) may share one file: the compare-and-set is a single conditional statement inside a
``BEGIN IMMEDIATE`` transaction, and a busy file is waited on for ``busy_timeout`` seconds
before the call fails as retryable.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time

from agentskit_chat.protocol import AskSessionRecord
from agentskit_chat.service import SessionKey

from ._codec import check_save, decode_record
from ._keys import check_session_key
from ._sqlite_file import SQLiteFile, SQLiteFileOwner, immediate_transaction

__all__ = ["DEFAULT_TABLE", "SQLiteAskSessionStore", "check_table_name"]

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


class SQLiteAskSessionStore(SQLiteFileOwner):
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
        self._table = check_table_name(table)
        self._file = SQLiteFile(
            path,
            name=f"{_BACKEND} Ask session store",
            busy_timeout=busy_timeout,
            schema=(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                " site_id TEXT NOT NULL,"
                " subject_id TEXT NOT NULL,"
                " session_id TEXT NOT NULL,"
                " revision INTEGER NOT NULL,"
                " record TEXT NOT NULL,"
                " updated_at REAL NOT NULL,"
                " PRIMARY KEY (site_id, subject_id, session_id))",
            ),
        )

    # --- the worker-thread side -------------------------------------------------------------

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
        with immediate_transaction(connection):
            if expected_revision == 0:
                # Expecting 0 means "nothing stored, or a record at revision 0": insert, or
                # update a row only while its revision is still 0.
                cursor = connection.execute(
                    f"INSERT INTO {self._table}"
                    " (site_id, subject_id, session_id, revision, record, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (site_id, subject_id, session_id) DO UPDATE SET"
                    " revision = excluded.revision, record = excluded.record,"
                    " updated_at = excluded.updated_at"
                    f" WHERE {self._table}.revision = 0",
                    (*parts, revision, text, time.time()),
                )
            else:
                cursor = connection.execute(
                    f"UPDATE {self._table} SET revision = ?, record = ?, updated_at = ?"
                    " WHERE site_id = ? AND subject_id = ? AND session_id = ? AND revision = ?",
                    (revision, text, time.time(), *parts, expected_revision),
                )
            return cursor.rowcount == 1

    # --- the async side ---------------------------------------------------------------------

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        """The stored record of ``key``, or ``None``.

        Raises:
            StorageError: the stored record is invalid (not retryable), the database is busy
                or cannot be opened (retryable), or the store is closed.
        """
        check_session_key(key)
        row = await self._file.run(lambda connection: self._load(key, connection))
        if row is None:
            return None
        return decode_record(_BACKEND, row[1], revision=row[0])

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` iff the stored revision (0 when none) equals ``expected_revision``.

        Raises:
            ValueError: ``record.revision`` is not ``expected_revision + 1``.
            StorageError: the database is busy or cannot be opened (retryable), or the store
                is closed.
        """
        text = check_save(key, record, expected_revision)
        return await self._file.run(
            lambda connection: self._save(key, record.revision, text, expected_revision, connection)
        )
