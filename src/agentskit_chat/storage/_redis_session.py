"""Chat session snapshots in Redis: :class:`SessionStorage` for many workers sharing one Redis.

Each session is one hash with two fields, ``cursor`` (decimal text) and ``snapshot`` (the
compact JSON). The compare-and-set is a Lua script, one atomic step and one round trip: read
the cursor, compare it with the expected one (or require no key), write both fields and
refresh the time to live. One key per call, so Redis Cluster works.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Final

from agentskit_chat.conversation._storage import check_snapshot_save
from agentskit_chat.protocol import SessionSnapshot

from ._codec import invalid_error
from ._redis_connection import RedisConnection, ttl_milliseconds

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_SESSION_PREFIX", "RedisSessionStorage"]


_BACKEND: Final = "Redis"
_STORE: Final = "session storage"
#: The key prefix a storage uses unless told otherwise.
DEFAULT_SESSION_PREFIX: Final = "agentskit:session:"

# KEYS[1] the session hash; ARGV: expected cursor ("" = create only), new cursor, snapshot,
# TTL in ms ("" = none). Returns 1 saved, 0 conflict, -1 a hash without a cursor (corrupt).
_CAS: Final = """
local current = redis.call('HGET', KEYS[1], 'cursor')
if not current and redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if ARGV[1] == '' then
  if current then return 0 end
elseif current ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2], 'snapshot', ARGV[3])
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"""


class RedisSessionStorage:
    """Chat session snapshots in Redis hashes, with an optional time to live.

    Built from a URL, the storage owns its client and closes it in :meth:`aclose`; built from a
    ``redis.asyncio.Redis`` client, it borrows it. A session's key is ``prefix`` + its id.

    Args:
        url_or_client: A Redis URL (``redis://``, ``rediss://``, ``unix://``) or a client.
        prefix: Prepended to every key, to share a Redis with other data.
        ttl_seconds: When set, a session is forgotten this long after its last save (the
            retention of idle sessions).
        connect_timeout: Seconds an owned client waits to connect (or for a free connection).
        max_connections: The size of an owned client's waiting connection pool.

    Raises:
        ImportError: the ``redis`` extra is not installed.
        TypeError: ``url_or_client`` is neither a string nor a ``redis.asyncio.Redis``.
        ValueError: ``ttl_seconds`` is not positive.

    Example:
        >>> storage = RedisSessionStorage("redis://127.0.0.1:6379/0", ttl_seconds=30 * 86400)
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        url_or_client: str | Redis,
        *,
        prefix: str = DEFAULT_SESSION_PREFIX,
        ttl_seconds: float | None = None,
        connect_timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a str")
        self._ttl_ms = ttl_milliseconds(ttl_seconds)
        self._redis = RedisConnection(
            url_or_client,
            user="RedisSessionStorage",
            store=_STORE,
            invalid=lambda: invalid_error(_BACKEND, _STORE),
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )
        self._prefix = prefix
        self._cas = self._redis.client.register_script(_CAS)

    async def load(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or ``None``.

        Raises:
            StorageError: the key holds something else or a hash without a snapshot (not
                retryable), the server is unreachable (retryable), or the storage is closed.
        """
        name = self._prefix + session_id
        cursor, text = await self._redis.call(
            lambda client: client.hmget(name, ["cursor", "snapshot"])
        )
        if cursor is None and text is None:
            return None
        if cursor is None or text is None:
            raise invalid_error(_BACKEND, _STORE)
        return text.decode() if isinstance(text, bytes) else str(text)

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        """Store ``snapshot`` iff the stored cursor equals ``expected_cursor`` (``None``: only
        if nothing is stored); ``False`` on conflict.

        Raises:
            StorageError: the key holds something else (not retryable), the server is
                unreachable (retryable), or the storage is closed.
        """
        text = check_snapshot_save(snapshot, expected_cursor)
        expected = "" if expected_cursor is None else str(expected_cursor)
        args = [expected, str(snapshot.cursor), text, self._ttl_ms]
        name = self._prefix + snapshot.session_id
        outcome = await self._redis.call(lambda client: self._cas(keys=[name], args=args))
        if outcome == -1:
            raise invalid_error(_BACKEND, _STORE)
        return bool(outcome == 1)

    async def delete(self, session_id: str) -> None:
        """Forget the session's snapshot (nothing happens when there is none)."""
        name = self._prefix + session_id
        await self._redis.call(lambda client: client.delete(name))

    async def open(self) -> None:
        """Connect now (one ``PING``), so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached.
        """
        await self._redis.ping()

    async def aclose(self) -> None:
        """Stop using the client, and close it if this storage created it. Idempotent."""
        await self._redis.aclose()

    async def __aenter__(self) -> RedisSessionStorage:
        """Check the server now (``PING``), so a bad configuration fails at startup."""
        await self._redis.ping()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
