"""An Ask session store in process memory, for tests and single-process development."""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from types import TracebackType

import anyio.lowlevel

from agentskit_chat.protocol import AskSessionRecord
from agentskit_chat.service import SessionKey

from ._codec import check_save, closed_error, decode_record
from ._keys import check_session_key, storage_key

__all__ = ["MemoryAskSessionStore"]

_BACKEND = "memory"


class MemoryAskSessionStore:
    """Keeps each record as its compact JSON text in a mapping, keyed by ``storage_key``.

    Records are stored as text, not objects, so a load always returns a fresh, validated record
    and the store behaves like the persistent ones. Several stores built on the same mapping
    share their records, like workers sharing a database. The compare-and-set is atomic under
    a lock, so the store is also safe across threads.

    Args:
        data: The mapping to keep records in (``storage_key`` → JSON text). Pass your own to
            seed or inspect it; by default the store owns a new ``dict``.

    Example:
        >>> store = MemoryAskSessionStore()
        >>> # await store.save(key, AskSessionRecord(revision=1, messages=[...]), 0) -> True
    """

    def __init__(self, data: MutableMapping[str, str] | None = None) -> None:
        self._data: MutableMapping[str, str] = {} if data is None else data
        self._lock = threading.Lock()
        self._closed = False

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        """The stored record of ``key``, or ``None``.

        Raises:
            StorageError: the stored text is not a valid record, or the store is closed.
        """
        check_session_key(key)
        await anyio.lowlevel.checkpoint()
        if self._closed:
            closed_error(_BACKEND)
        with self._lock:
            text = self._data.get(storage_key(key))
        return None if text is None else decode_record(_BACKEND, text)

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` iff the stored revision (0 when none) equals ``expected_revision``.

        Raises:
            ValueError: ``record.revision`` is not ``expected_revision + 1``.
            StorageError: the stored text is not a valid record, or the store is closed.
        """
        text = check_save(key, record, expected_revision)
        await anyio.lowlevel.checkpoint()
        if self._closed:
            closed_error(_BACKEND)
        name = storage_key(key)
        with self._lock:
            current = self._data.get(name)
            revision = 0 if current is None else decode_record(_BACKEND, current).revision
            if revision != expected_revision:
                return False
            self._data[name] = text
            return True

    def close(self) -> None:
        """Refuse further use; the mapping is left as it is. Idempotent."""
        self._closed = True

    async def aclose(self) -> None:
        """Same as :meth:`close`, for symmetry with the pooled stores."""
        self.close()

    async def __aenter__(self) -> MemoryAskSessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
