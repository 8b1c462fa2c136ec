"""The CAS session storage port and its in-memory implementation.

A store keeps one ``agentskit.chat.session`` snapshot per session id. ``save`` is an atomic
compare-and-set on the snapshot's cursor: with ``expected_cursor=None`` it only creates (and
fails when a record exists); otherwise it replaces the record only while the stored cursor still
equals ``expected_cursor``. A conflict returns ``False``; only failures raise. A last-write-wins
store is unsafe: two clients would silently overwrite each other's turns.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping
from typing import Any, Protocol, runtime_checkable

import anyio.lowlevel

from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import Decoded, SessionSnapshot, decode_session_snapshot

__all__ = ["InMemorySessionStorage", "SessionStorage", "check_snapshot_save"]


@runtime_checkable
class SessionStorage(Protocol):
    """Where chat sessions keep their snapshot, with compare-and-set saves.

    ``delete(session_id)`` is optional (sessions never call it); both stores here have it.
    """

    async def load(self, session_id: str) -> str | Mapping[str, Any] | None:
        """The stored snapshot (JSON text or a parsed object), or ``None`` when there is none."""
        ...

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored). ``False`` on conflict."""
        ...


def check_snapshot_save(snapshot: SessionSnapshot, expected_cursor: int | None) -> str:
    """Validate the arguments of ``save`` and return the snapshot's compact JSON.

    Raises:
        TypeError: ``snapshot`` is not a ``SessionSnapshot``, or ``expected_cursor`` is neither
            ``None`` nor an ``int``.
        ValueError: ``expected_cursor`` is negative.
    """
    if not isinstance(snapshot, SessionSnapshot):
        raise TypeError("expected a SessionSnapshot")
    if expected_cursor is not None:
        if type(expected_cursor) is not int:
            raise TypeError("expected_cursor must be an int or None")
        if expected_cursor < 0:
            raise ValueError("expected_cursor must be >= 0")
    return snapshot.to_json()


class InMemorySessionStorage:
    """Session snapshots in process memory, as compact JSON text keyed by session id.

    Records are kept as text, so a load always returns what a persistent store would. Several
    storages built on one mapping share their records, like workers sharing a database. The
    compare-and-set runs under a lock, so it is safe across threads too.

    Args:
        data: The mapping to keep records in (session id → JSON text); pass your own to seed
            or inspect it.

    Example:
        >>> storage = InMemorySessionStorage()
        >>> # session = create_chat_session(definition, storage=storage)
    """

    def __init__(self, data: MutableMapping[str, str] | None = None) -> None:
        self._data: MutableMapping[str, str] = {} if data is None else data
        self._lock = threading.Lock()

    def _cursor(self, text: str) -> int:
        result = decode_session_snapshot(text)
        if not isinstance(result, Decoded):
            raise StorageError(
                "The memory session storage holds an invalid record.", retryable=False
            )
        return result.value.cursor

    async def load(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or ``None``."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            return self._data.get(session_id)

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored).

        Raises:
            StorageError: the stored record is not a valid snapshot.
        """
        text = check_snapshot_save(snapshot, expected_cursor)
        await anyio.lowlevel.checkpoint()
        with self._lock:
            current = self._data.get(snapshot.session_id)
            if expected_cursor is None:
                if current is not None:
                    return False
            elif current is None or self._cursor(current) != expected_cursor:
                return False
            self._data[snapshot.session_id] = text
            return True

    async def delete(self, session_id: str) -> None:
        """Forget the session's snapshot (nothing happens when there is none)."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            self._data.pop(session_id, None)
