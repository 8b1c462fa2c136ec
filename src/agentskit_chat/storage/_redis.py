"""An Ask session store in Redis, for many workers sharing one Redis.

redis-py's asyncio client, imported when a store is built (the ``redis`` extra). Each session
is one hash with two fields: ``revision`` (decimal text) and ``record`` (the compact JSON). The
compare-and-set is a Lua script, so it is one atomic step on the server and one round trip:
read the revision, compare it with the expected one, write both fields (and refresh the TTL).
The revision lives in its own field so the script never parses JSON (Lua's cjson rejects the
lone surrogates a message may legitimately hold). One key per call, so Redis Cluster works.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentskit_chat.protocol import AskSessionRecord
from agentskit_chat.service import SessionKey

from ._codec import ASK_STORE, check_save, decode_record, invalid_error
from ._keys import check_session_key, storage_key
from ._redis_connection import RedisConnection, ttl_milliseconds

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_PREFIX", "RedisAskSessionStore"]

_BACKEND = "Redis"
#: The key prefix a store uses unless told otherwise.
DEFAULT_PREFIX = "agentskit:ask:"

# KEYS[1] the session hash; ARGV: expected revision, new revision, record JSON, TTL in ms ("" =
# none). Returns 1 saved, 0 stale, -1 the key holds a hash with no revision (corrupt).
_CAS = """
local current = redis.call('HGET', KEYS[1], 'revision')
if not current then
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
  current = '0'
end
if current ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'record', ARGV[3])
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"""


class RedisAskSessionStore:
    """Revisioned Ask sessions in Redis hashes, with an optional time to live.

    Built from a URL, the store owns its client and closes it in :meth:`aclose`; built from a
    ``redis.asyncio.Redis`` client, it borrows it. Keys are ``prefix`` followed by the
    unambiguous :func:`~agentskit_chat.storage.storage_key` of the session
    (``agentskit:ask:docs:user-1:session-1``).

    Args:
        url_or_client: A Redis URL (``redis://``, ``rediss://``, ``unix://``) or a client.
        prefix: Prepended to every key, to share a Redis with other data.
        ttl_seconds: When set, a session expires this long after its last save.
        connect_timeout: Seconds an owned client waits to connect (or for a free connection).
        max_connections: The size of an owned client's waiting connection pool.

    Raises:
        ImportError: the ``redis`` extra is not installed.
        TypeError: ``url_or_client`` is neither a string nor a ``redis.asyncio.Redis``.
        ValueError: ``ttl_seconds`` is not positive.

    Example:
        >>> store = RedisAskSessionStore(  # doctest: +SKIP
        ...     "redis://127.0.0.1:6379/0", ttl_seconds=86400
        ... )
    """

    def __init__(
        self,
        url_or_client: str | Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: float | None = None,
        connect_timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a str")
        self._ttl_ms = ttl_milliseconds(ttl_seconds)
        self._redis = RedisConnection(
            url_or_client,
            user="RedisAskSessionStore",
            store=ASK_STORE,
            invalid=lambda: invalid_error(_BACKEND),
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )
        self._prefix = prefix
        self._cas = self._redis.client.register_script(_CAS)

    def _name(self, key: SessionKey) -> str:
        return self._prefix + storage_key(key)

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        """The stored record of ``key``, or ``None``.

        Raises:
            StorageError: the stored record is invalid (not retryable), the server is
                unreachable (retryable), or the store is closed.
        """
        check_session_key(key)
        name = self._name(key)
        revision, text = await self._redis.call(
            lambda client: client.hmget(name, ["revision", "record"])
        )
        if revision is None and text is None:
            return None
        if revision is None or text is None:
            raise invalid_error(_BACKEND)
        return decode_record(_BACKEND, text, revision=revision)

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` iff the stored revision (0 when none) equals ``expected_revision``.

        Raises:
            ValueError: ``record.revision`` is not ``expected_revision + 1``.
            StorageError: the key holds something else (not retryable), the server is
                unreachable (retryable), or the store is closed.
        """
        text = check_save(key, record, expected_revision)
        args: list[Any] = [str(expected_revision), str(record.revision), text, self._ttl_ms]
        name = self._name(key)
        outcome = await self._redis.call(lambda client: self._cas(keys=[name], args=args))
        if outcome == -1:
            raise invalid_error(_BACKEND)
        return bool(outcome == 1)

    async def open(self) -> None:
        """Connect now (one ``PING``), so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached.
        """
        await self._redis.ping()

    async def aclose(self) -> None:
        """Stop using the client, and close it if this store created it. Idempotent."""
        await self._redis.aclose()

    async def __aenter__(self) -> RedisAskSessionStore:
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
