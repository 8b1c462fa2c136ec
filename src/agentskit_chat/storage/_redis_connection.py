"""One Redis client behind a store: ownership, the closed state and the error mapping.

A store built from a URL owns its client (closed by ``aclose``); built from a
``redis.asyncio.Redis`` client it borrows it. Every driver error becomes a
:class:`~agentskit_chat.errors.StorageError`: retryable when the server is unreachable or timed
out, the store's own "invalid" error when the key holds another type, not retryable otherwise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

from agentskit_chat._drivers import redis_client
from agentskit_chat.errors import StorageError

from ._codec import closed_error, failed_error, unavailable_error

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisConnection", "ttl_milliseconds"]

T = TypeVar("T")
_BACKEND: Final = "Redis"


def ttl_milliseconds(ttl_seconds: float | None) -> str:
    """A time to live as the scripts take it: milliseconds as text, ``""`` for none.

    Raises:
        ValueError: ``ttl_seconds`` is not positive.
    """
    if ttl_seconds is None:
        return ""
    if not ttl_seconds > 0:
        raise ValueError("ttl_seconds must be positive")
    return str(max(1, round(ttl_seconds * 1000)))


class RedisConnection:
    """A store's client, used one call at a time.

    Args:
        url_or_client: A Redis URL (``redis://``, ``rediss://``, ``unix://``) or a client.
        user: The store's class name, for the missing-extra error.
        store: What the store's errors call it (``session storage``, ``chat memory``).
        invalid: The store's error for a key that holds another type.
        connect_timeout: Seconds an owned client waits to connect (or for a free connection).
        max_connections: The size of an owned client's waiting connection pool.

    Raises:
        ImportError: the ``redis`` extra is not installed.
        TypeError: ``url_or_client`` is neither a string nor a ``redis.asyncio.Redis``.
    """

    def __init__(
        self,
        url_or_client: str | Redis,
        *,
        user: str,
        store: str,
        invalid: Callable[[], StorageError],
        connect_timeout: float,
        max_connections: int,
    ) -> None:
        self.client, self._owns_client = redis_client(
            url_or_client,
            user=user,
            max_connections=max_connections,
            connect_timeout=connect_timeout,
        )
        self._store = store
        self._invalid = invalid
        self._closed = False

    def _translate(self, exc: Exception) -> StorageError | None:
        from redis import exceptions  # noqa: PLC0415

        if isinstance(exc, exceptions.ConnectionError | exceptions.TimeoutError):
            return unavailable_error(_BACKEND, self._store)
        if isinstance(exc, exceptions.ResponseError) and str(exc).startswith("WRONGTYPE"):
            # Something other than the store's value lives under the key.
            return self._invalid()
        if isinstance(exc, exceptions.RedisError):
            return failed_error(_BACKEND, self._store)
        return None

    async def call(self, work: Callable[[Redis], Awaitable[T]]) -> T:
        """Run ``work`` on the client.

        Raises:
            StorageError: the server is unreachable (retryable), the key holds another type
                or the call failed (not retryable), or the store is closed.
        """
        if self._closed:
            closed_error(_BACKEND, self._store)
        try:
            return await work(self.client)
        except Exception as exc:
            error = self._translate(exc)
            if error is None:
                raise
            raise error from None

    async def ping(self) -> None:
        """Check the server now, so a bad configuration fails at startup."""
        await self.call(lambda client: client.ping())

    async def aclose(self) -> None:
        """Stop using the client, and close it if the store created it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self.client.aclose()
