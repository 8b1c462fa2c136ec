"""One SQLite file behind async code: what every SQLite store does with its connection.

The stdlib ``sqlite3`` driver blocks, so every call runs in a worker thread through anyio and
the event loop never waits on disk. One connection per store, opened on first use (with WAL
and the store's schema) and serialized: a ``CapacityLimiter`` keeps waiting callers in the
event loop rather than in threads, and a ``threading.Lock`` guards the connection itself. A
busy file is waited on for ``busy_timeout`` seconds before the call fails as retryable.
Several stores (or processes) may share one file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Self, TypeVar

import anyio
import anyio.to_thread

from agentskit_chat.errors import StorageError

__all__ = ["SQLiteFile", "SQLiteFileOwner", "immediate_transaction"]

T = TypeVar("T")

_WAL_RETRY_S = 0.005


def _nothing(connection: sqlite3.Connection) -> None:
    return None


class SQLiteFile:
    """A lazily opened, serialized SQLite connection, used from worker threads.

    Args:
        path: The database file, or ``":memory:"`` for a private in-memory database (gone when
            the connection is closed).
        name: What the store is called in its errors: ``"SQLite chat memory"`` gives "The
            SQLite chat memory is closed.", "... is unavailable." (retryable) and "... failed.".
        schema: Statements run once the connection is open (``CREATE TABLE IF NOT EXISTS``).
        busy_timeout: Seconds to wait for another connection's write lock.

    Raises:
        ValueError: ``busy_timeout`` is negative.
    """

    __slots__ = (
        "_busy_timeout",
        "_closed",
        "_connection",
        "_limiter",
        "_lock",
        "_name",
        "_path",
        "_schema",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str,
        schema: Sequence[str],
        busy_timeout: float,
    ) -> None:
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be >= 0")
        self._path = os.fspath(path)
        self._name = name
        self._schema = tuple(schema)
        self._busy_timeout = float(busy_timeout)
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)

    def _error(self, reason: str, *, retryable: bool) -> StorageError:
        return StorageError(f"The {self._name} {reason}.", retryable=retryable)

    # --- the worker-thread side -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise self._error("is closed", retryable=False)
        if self._connection is None:
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                if self._path != ":memory:":
                    self._enable_wal(connection)
                    # WAL's recommended level: never corrupts; a power cut may drop the last
                    # few commits, which costs a chat one answer, not a session.
                    connection.execute("PRAGMA synchronous=NORMAL")
                for statement in self._schema:
                    connection.execute(statement)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _enable_wal(self, connection: sqlite3.Connection) -> None:
        # Switching the journal mode does not wait in SQLite's busy handler: when several
        # connections open the same new file at once, all but one fail at once. Wait here for
        # up to the busy timeout instead, as any other statement would.
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as error:
                if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(_WAL_RETRY_S)

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._connect())
            except sqlite3.OperationalError:
                # Busy or locked files, a full disk, a file that cannot be opened right now.
                raise self._error("is unavailable", retryable=True) from None
            except sqlite3.Error:
                raise self._error("failed", retryable=False) from None

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    # --- the async side ---------------------------------------------------------------------

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection in a worker thread, one call at a time.

        Not abandoned on cancellation: the thread finishes its statement (milliseconds) and
        the cancellation is delivered right after, so a transaction is never left half done.

        Raises:
            StorageError: the database is busy or cannot be opened (retryable), a statement
                failed (not retryable), or the file is closed. Other exceptions of ``work``
                pass through.
        """
        return await anyio.to_thread.run_sync(self._locked, work, limiter=self._limiter)

    async def open(self) -> None:
        """Open the connection and create the schema now rather than on first use.

        Raises:
            StorageError: as :meth:`run`.
        """
        await self.run(_nothing)

    def close(self) -> None:
        """Close the connection (blocking). Idempotent; later calls raise "is closed"."""
        self._close()

    async def aclose(self) -> None:
        """Close the connection from a worker thread. Idempotent."""
        await anyio.to_thread.run_sync(self._close, limiter=self._limiter)


@contextmanager
def immediate_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back when the body raises (or is interrupted).

    Taking the write lock first makes a compare-and-set one atomic step across connections.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


class SQLiteFileOwner:
    """The closing side of a store that keeps its :class:`SQLiteFile` in ``_file``."""

    _file: SQLiteFile

    def close(self) -> None:
        """Close the connection (blocking; use :meth:`aclose` from async code). Idempotent."""
        self._file.close()

    async def open(self) -> None:
        """Open the file and create the tables now, so a bad path fails at start-up.

        Raises:
            StorageError: the file cannot be opened or used.
        """
        await self._file.open()

    async def aclose(self) -> None:
        """Close the connection from a worker thread. Idempotent."""
        await self._file.aclose()

    async def __aenter__(self) -> Self:
        await self._file.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
