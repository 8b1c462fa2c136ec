"""Chat memory in a SQLite file: the embedded default of the ``ChatMemory`` port.

One row per message, keyed by conversation and position, holding the message's wire record as
compact JSON. ``save`` replaces a conversation's rows in one ``BEGIN IMMEDIATE`` transaction,
so a reader (or a second writer) sees the previous version or the new one, never a mix.

The stdlib ``sqlite3`` driver blocks, so every call, encoding and decoding included, runs in a
worker thread through anyio. A call is never abandoned when cancelled: the thread finishes (or
rolls back) its transaction and the cancellation is delivered right after, which is what makes
a cancelled ``save`` leave one whole version.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio
import anyio.to_thread
import orjson

from agentskit_chat.errors import ProtocolError, StorageError
from agentskit_chat.protocol import validate_message_records
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.runtime import ChatMessage

from ._sqlite import check_table_name

__all__ = ["DEFAULT_MEMORY_TABLE", "SQLiteChatMemory"]

T = TypeVar("T")

#: The table a memory uses unless told otherwise.
DEFAULT_MEMORY_TABLE: Final = "agentskit_chat_messages"

_INVALID: Final = "The SQLite chat memory holds invalid messages."
_UNAVAILABLE: Final = "The SQLite chat memory is unavailable."
_FAILED: Final = "The SQLite chat memory failed."
_CLOSED: Final = "The SQLite chat memory is closed."
_TOO_LARGE: Final = "The messages exceed the limits of a memory record."


def _encode(messages: Sequence[ChatMessage]) -> list[str]:
    """Each message's wire record as compact JSON, the whole list checked against the limits.

    Raises:
        ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
            conversation exceeds the memory record's structural limits.
    """
    wire = [message.to_wire() for message in messages]
    if validate_message_records(wire) is None:
        raise ProtocolError("AK_CONFIG_INVALID", _TOO_LARGE)
    return [_dumps(record) for record in wire]


def _dumps(record: dict[str, Any]) -> str:
    try:
        return orjson.dumps(record).decode()
    except orjson.JSONEncodeError:
        # A lone surrogate (valid in a record, as in JavaScript) is written as a \u escape.
        return js_stringify(record)


def _reject_constant(name: str) -> Any:
    raise ValueError("not JSON")


def _loads(row: str) -> Any:
    try:
        return orjson.loads(row)
    except orjson.JSONDecodeError:
        # orjson refuses escaped lone surrogates; the standard parser keeps them.
        return json.loads(row, parse_constant=_reject_constant)


def _decode(rows: Sequence[str]) -> tuple[ChatMessage, ...]:
    """The messages of stored rows.

    Raises:
        StorageError: a row is not JSON, or the rows are not valid message records.
    """
    try:
        wire = [_loads(row) for row in rows]
    except (ValueError, RecursionError):
        raise StorageError(_INVALID, retryable=False) from None
    records = validate_message_records(wire)
    if records is None:
        raise StorageError(_INVALID, retryable=False)
    try:
        return tuple(ChatMessage.from_record(record) for record in records)
    except ProtocolError:
        raise StorageError(_INVALID, retryable=False) from None


class SQLiteChatMemory:
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
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be >= 0")
        self._path = os.fspath(path)
        self._conversation_id = conversation_id
        self._table = check_table_name(table)
        self._busy_timeout = float(busy_timeout)
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)

    @property
    def conversation_id(self) -> str:
        """The conversation this memory holds."""
        return self._conversation_id

    # --- the worker-thread side -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StorageError(_CLOSED, retryable=False)
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
                    " conversation_id TEXT NOT NULL,"
                    " position INTEGER NOT NULL,"
                    " record TEXT NOT NULL,"
                    " updated_at REAL NOT NULL,"
                    " PRIMARY KEY (conversation_id, position))"
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
            except sqlite3.OperationalError:
                raise StorageError(_UNAVAILABLE, retryable=True) from None
            except sqlite3.Error:
                raise StorageError(_FAILED, retryable=False) from None

    def _load(self, connection: sqlite3.Connection) -> tuple[ChatMessage, ...]:
        rows = connection.execute(
            f"SELECT record FROM {self._table} WHERE conversation_id = ? ORDER BY position",
            (self._conversation_id,),
        ).fetchall()
        if not all(type(row[0]) is str for row in rows):
            raise StorageError(_INVALID, retryable=False)
        return _decode([row[0] for row in rows])

    def _save(self, messages: Sequence[ChatMessage], connection: sqlite3.Connection) -> None:
        rows = _encode(messages)
        now = time.time()
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(
                f"DELETE FROM {self._table} WHERE conversation_id = ?", (self._conversation_id,)
            )
            connection.executemany(
                f"INSERT INTO {self._table} (conversation_id, position, record, updated_at)"
                " VALUES (?, ?, ?, ?)",
                [(self._conversation_id, index, row, now) for index, row in enumerate(rows)],
            )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    # --- the async side ---------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._locked, work, limiter=self._limiter)

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first (empty for a new conversation).

        Raises:
            StorageError: the stored rows are not valid message records (not retryable), the
                database is busy or cannot be opened (retryable), or the memory is closed.
        """
        return await self._run(self._load)

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages with ``messages``, atomically.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
                conversation exceeds the memory record's limits (nothing is written).
            StorageError: the database is busy or cannot be opened (retryable), or the memory
                is closed.
        """
        snapshot = tuple(messages)
        await self._run(lambda connection: self._save(snapshot, connection))

    def close(self) -> None:
        """Close the connection (blocking; use :meth:`aclose` from async code). Idempotent."""
        self._close()

    async def aclose(self) -> None:
        """Close the connection from a worker thread. Idempotent."""
        await anyio.to_thread.run_sync(self._close, limiter=self._limiter)

    async def __aenter__(self) -> SQLiteChatMemory:
        await self._run(lambda connection: None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
