"""What a chat memory stores, one row per message, and the least a save must write.

Every backend keeps a conversation as rows (position → the message's wire record as compact
JSON) beside a header: the row count and a *generation*, a random token replaced by every save.
A memory remembers the rows and generation it last loaded or saved (:class:`RowCache`), so a
save encodes only the messages that changed and writes only their rows, the new length and the
new generation, when the stored generation is still the one it remembers. When it is not
(another writer saved since, or nothing was loaded), the save rewrites the whole conversation
from the rows it has, still without encoding unchanged messages again. Either way a reader sees
one whole version: each backend writes a save in one transaction (or one script).

The memory record's limits are checked message by message (:func:`message_record_nodes`) and
summed, so a save's cost does not grow with the length of the conversation. Decoded rows are
kept in a small process-wide cache keyed by their text (rows are immutable), so a load decodes
and validates only the rows this process has not seen: a turn's load costs a lookup per
message, not a parse.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agentskit_chat.errors import ConversationTooLargeError, ProtocolError, StorageError
from agentskit_chat.protocol import validate_message_records
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._message import (
    MEMORY_RECORD_WRAPPER_NODES,
    MESSAGE_MAX_CONTAINER_SIZE,
    MESSAGE_MAX_NODES,
    message_record_nodes,
)
from agentskit_chat.runtime import ChatMessage

__all__ = ["Row", "RowCache", "SavePlan", "decode_rows", "encode_row", "invalid_memory"]

_TOO_LARGE: Final = "The messages exceed the limits of a memory record."
#: How much row text the decoded-row cache holds, in characters, before it forgets the oldest:
#: one long conversation at its compaction bound (1,000,000 characters), about 3 MB of a
#: worker's memory once full. Larger caches kept a soaked worker growing for minutes (16 Mi
#: characters took ~48 MB and more than ten minutes to fill; 4 Mi, ~13 MB and five minutes).
_CACHE_CHARS: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    """One stored message: the message, its compact JSON row and its node count."""

    message: ChatMessage
    text: str
    nodes: int


@dataclass(frozen=True, slots=True)
class SavePlan:
    """What one save writes.

    Attributes:
        rows: Every message's row, in order.
        changed: The positions whose rows differ from what the memory remembers.
        known_length: How many rows the memory remembers being stored.
        expected: The generation the memory remembers (``None``: it knows nothing).
        generation: The generation this save writes.
    """

    rows: tuple[Row, ...]
    changed: tuple[int, ...]
    known_length: int
    expected: str | None
    generation: str

    def continues(self, stored_generation: object) -> bool:
        """Whether the stored conversation is the version the memory remembers, so writing
        the changed rows alone is enough."""
        return self.expected is not None and stored_generation == self.expected

    @property
    def texts(self) -> list[str]:
        """Every row's text, in order (for a whole rewrite)."""
        return [row.text for row in self.rows]


class _Decoded:
    """Rows this process decoded or encoded, by text, least recently used first (thread-safe:
    SQLite loads run in worker threads)."""

    def __init__(self, limit: int) -> None:
        self._rows: OrderedDict[str, Row] = OrderedDict()
        self._chars = 0
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, text: str) -> Row | None:
        with self._lock:
            row = self._rows.get(text)
            if row is not None:
                self._rows.move_to_end(text)
            return row

    def put(self, row: Row) -> None:
        if len(row.text) > self._limit:
            return
        with self._lock:
            if row.text in self._rows:
                self._rows.move_to_end(row.text)
                return
            self._rows[row.text] = row
            self._chars += len(row.text)
            while self._chars > self._limit:
                _, old = self._rows.popitem(last=False)
                self._chars -= len(old.text)


_DECODED: Final = _Decoded(_CACHE_CHARS)


def invalid_memory(backend: str) -> StorageError:
    """The error of a stored conversation that is not valid message records."""
    return StorageError(f"The {backend} chat memory holds invalid messages.", retryable=False)


def _dumps(record: dict[str, Any]) -> str:
    try:
        return orjson.dumps(record).decode()
    except orjson.JSONEncodeError:
        # A lone surrogate (valid in a record, as in JavaScript) is written as a \u escape.
        return js_stringify(record)


def _reject_constant(name: str) -> Any:
    raise ValueError("not JSON")


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses escaped lone surrogates; the standard parser keeps them.
        return json.loads(text, parse_constant=_reject_constant)


def encode_row(message: ChatMessage) -> Row:
    """The row of one message.

    Raises:
        ProtocolError: ``AK_CONFIG_INVALID`` when the message is not a valid record or breaks
            the memory record's limits on its own.
    """
    wire = message.to_wire()
    nodes = message_record_nodes(wire)
    if nodes is None or validate_message_records([wire]) is None:
        raise ProtocolError("AK_CONFIG_INVALID", _TOO_LARGE)
    row = Row(message, _dumps(wire), nodes)
    _DECODED.put(row)  # the next load of this text (in any memory) needs no parse
    return row


def decode_rows(texts: Sequence[object], backend: str) -> tuple[Row, ...]:
    """The rows of stored texts, in order.

    Raises:
        StorageError: a text is not JSON, or the texts are not valid message records.
    """
    if len(texts) > MESSAGE_MAX_CONTAINER_SIZE or not all(type(text) is str for text in texts):
        raise invalid_memory(backend)
    strings: list[str] = [str(text) for text in texts]
    rows: list[Row | None] = [_DECODED.get(text) for text in strings]
    missing = [position for position, row in enumerate(rows) if row is None]
    if missing:
        try:
            wire = [_loads(strings[position]) for position in missing]
        except (ValueError, RecursionError):
            raise invalid_memory(backend) from None
        records = validate_message_records(wire)
        if records is None:
            raise invalid_memory(backend)
        try:
            messages = [ChatMessage.from_record(record) for record in records]
        except ProtocolError:
            raise invalid_memory(backend) from None
        for position, message, record in zip(missing, messages, wire, strict=True):
            nodes = message_record_nodes(record)
            if nodes is None:  # pragma: no cover - validate_message_records checked the limits
                raise invalid_memory(backend)
            row = Row(message, strings[position], nodes)
            _DECODED.put(row)
            rows[position] = row
    decoded = tuple(row for row in rows if row is not None)
    # The limits of the record as a whole (each row passed its own when it was decoded).
    if MEMORY_RECORD_WRAPPER_NODES + sum(row.nodes for row in decoded) > MESSAGE_MAX_NODES:
        raise invalid_memory(backend)
    return decoded


class RowCache:
    """The rows and generation a memory last loaded or saved (nothing, at first)."""

    __slots__ = ("generation", "rows")

    def __init__(self) -> None:
        self.rows: tuple[Row, ...] = ()
        self.generation: str | None = None

    def plan(self, messages: Sequence[ChatMessage]) -> SavePlan:
        """The rows of ``messages``, encoding only those the cache does not hold.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record, or
                (:class:`~agentskit_chat.errors.ConversationTooLargeError`) the conversation
                exceeds the memory record's limits (nothing is written).
        """
        if len(messages) > MESSAGE_MAX_CONTAINER_SIZE:
            raise ConversationTooLargeError(_TOO_LARGE)
        known = self.rows
        rows: list[Row] = []
        changed: list[int] = []
        nodes = MEMORY_RECORD_WRAPPER_NODES
        for position, message in enumerate(messages):
            cached = known[position] if position < len(known) else None
            if cached is not None and (cached.message is message or cached.message == message):
                row = cached
            else:
                row = encode_row(message)
                changed.append(position)
            nodes += row.nodes
            rows.append(row)
        if nodes > MESSAGE_MAX_NODES:
            raise ConversationTooLargeError(_TOO_LARGE)
        return SavePlan(
            rows=tuple(rows),
            changed=tuple(changed),
            known_length=len(known),
            expected=self.generation,
            generation=uuid.uuid4().hex,
        )

    def remember(self, rows: Sequence[Row], generation: str | None) -> None:
        """What is stored now (after a load or a save)."""
        self.rows = tuple(rows)
        self.generation = generation

    def forget(self) -> None:
        """The stored version is unknown (after a failed or cancelled save): the next save
        rewrites the whole conversation. The rows stay, as encodings to reuse."""
        self.generation = None
