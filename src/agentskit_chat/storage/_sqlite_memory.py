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
import time
from collections.abc import Sequence
from typing import Any, Final

import orjson

from agentskit_chat.errors import ProtocolError, StorageError
from agentskit_chat.protocol import validate_message_records
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.runtime import ChatMessage

from ._sqlite import check_table_name
from ._sqlite_file import SQLiteFile, SQLiteFileOwner, immediate_transaction

__all__ = ["DEFAULT_MEMORY_TABLE", "SQLiteChatMemory"]

#: The table a memory uses unless told otherwise.
DEFAULT_MEMORY_TABLE: Final = "agentskit_chat_messages"

_INVALID: Final = "The SQLite chat memory holds invalid messages."
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
            ),
        )

    @property
    def conversation_id(self) -> str:
        """The conversation this memory holds."""
        return self._conversation_id

    # --- the worker-thread side -------------------------------------------------------------

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
        with immediate_transaction(connection):
            connection.execute(
                f"DELETE FROM {self._table} WHERE conversation_id = ?", (self._conversation_id,)
            )
            connection.executemany(
                f"INSERT INTO {self._table} (conversation_id, position, record, updated_at)"
                " VALUES (?, ?, ?, ?)",
                [(self._conversation_id, index, row, now) for index, row in enumerate(rows)],
            )

    # --- the async side ---------------------------------------------------------------------

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first (empty for a new conversation).

        Raises:
            StorageError: the stored rows are not valid message records (not retryable), the
                database is busy or cannot be opened (retryable), or the memory is closed.
        """
        return await self._file.run(self._load)

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages with ``messages``, atomically.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
                conversation exceeds the memory record's limits (nothing is written).
            StorageError: the database is busy or cannot be opened (retryable), or the memory
                is closed.
        """
        snapshot = tuple(messages)
        await self._file.run(lambda connection: self._save(snapshot, connection))
