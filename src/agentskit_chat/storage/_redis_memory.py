"""Chat memory in Redis: the ``ChatMemory`` port for many workers sharing one Redis.

A conversation is one hash: ``g`` (the generation), ``n`` (the row count) and one field per
message position (``"0"``, ``"1"``, ...) holding its compact JSON (:mod:`._memory_rows`). A
save is one Lua script, so one atomic step: it writes the changed rows when the stored
generation is the one this memory remembers, and reports a conflict otherwise, after which the
memory rewrites the whole conversation (the script deletes the hash first). The time to live,
when set, is refreshed by every save. One key per call, so Redis Cluster works.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Final

from agentskit_chat.runtime import ChatMessage

from ._memory_rows import RowCache, SavePlan, decode_rows, invalid_memory
from ._redis_connection import RedisConnection, ttl_milliseconds

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_MEMORY_PREFIX", "RedisChatMemory"]

_BACKEND: Final = "Redis"
_STORE: Final = "chat memory"
#: The key prefix a memory uses unless told otherwise.
DEFAULT_MEMORY_PREFIX: Final = "agentskit:messages:"

# KEYS[1] the conversation hash. ARGV: mode ('i' incremental, 'w' whole), expected generation,
# new generation, new count, TTL in ms ('' = none), then position/text pairs. Returns 1 saved,
# 0 the stored generation is not the expected one (nothing written).
_SAVE: Final = """
local old = 0
if ARGV[1] == 'i' then
  if redis.call('HGET', KEYS[1], 'g') ~= ARGV[2] then return 0 end
  old = tonumber(redis.call('HGET', KEYS[1], 'n') or '0') or 0
else
  redis.call('DEL', KEYS[1])
end
for i = 6, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
local count = tonumber(ARGV[4])
for position = count, old - 1 do
  redis.call('HDEL', KEYS[1], tostring(position))
end
redis.call('HSET', KEYS[1], 'g', ARGV[3], 'n', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return 1
"""


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisChatMemory:
    """The messages of one conversation in a Redis hash, with an optional time to live.

    Built from a URL, the memory owns its client and closes it in :meth:`aclose`; built from a
    ``redis.asyncio.Redis`` client, it borrows it (how many conversations share connections).

    Args:
        url_or_client: A Redis URL (``redis://``, ``rediss://``, ``unix://``) or a client.
        conversation_id: The conversation this memory holds (any non-empty string).
        prefix: Prepended to the conversation id to make its key.
        ttl_seconds: When set, the conversation is forgotten this long after its last save.
        connect_timeout: Seconds an owned client waits to connect (or for a free connection).
        max_connections: The size of an owned client's waiting connection pool.

    Raises:
        ImportError: the ``redis`` extra is not installed.
        TypeError: ``url_or_client`` is neither a string nor a ``redis.asyncio.Redis``.
        ValueError: ``conversation_id`` is empty or ``ttl_seconds`` is not positive.
    """

    def __init__(
        self,
        url_or_client: str | Redis,
        conversation_id: str,
        *,
        prefix: str = DEFAULT_MEMORY_PREFIX,
        ttl_seconds: float | None = None,
        connect_timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ValueError("conversation_id must be a non-empty string")
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a str")
        self._ttl_ms = ttl_milliseconds(ttl_seconds)
        self._redis = RedisConnection(
            url_or_client,
            user="RedisChatMemory",
            store=_STORE,
            invalid=lambda: invalid_memory(_BACKEND),
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )
        self._conversation_id = conversation_id
        self._key = prefix + conversation_id
        self._script = self._redis.client.register_script(_SAVE)
        self._cache = RowCache()

    @property
    def conversation_id(self) -> str:
        """The conversation this memory holds."""
        return self._conversation_id

    async def load(self) -> Sequence[ChatMessage]:
        """The stored messages, oldest first (empty for a new conversation).

        Raises:
            StorageError: the stored hash is not valid message records (not retryable), the
                server is unreachable (retryable), or the memory is closed.
        """
        fields = await self._redis.call(lambda client: client.hgetall(self._key))
        stored = {_text(name): value for name, value in fields.items()}
        if not stored:
            self._cache.remember((), None)
            return ()
        count = _text(stored.get("n", ""))
        if not count.isdigit() or "g" not in stored or len(stored) != int(count) + 2:
            raise invalid_memory(_BACKEND)
        try:
            texts = [_text(stored[str(position)]) for position in range(int(count))]
        except KeyError:
            raise invalid_memory(_BACKEND) from None
        rows = decode_rows(texts, _BACKEND)
        self._cache.remember(rows, _text(stored["g"]))
        return tuple(row.message for row in rows)

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages with ``messages``, atomically, writing only the
        messages that changed since this memory last loaded or saved.

        Raises:
            ProtocolError: ``AK_CONFIG_INVALID`` when a message is not a valid record or the
                conversation exceeds the memory record's limits (nothing is written).
            StorageError: the key holds something else (not retryable), the server is
                unreachable (retryable), or the memory is closed.
        """
        plan = self._cache.plan(tuple(messages))
        try:
            if plan.expected is None or not await self._run(plan, whole=False):
                await self._run(plan, whole=True)
        except BaseException:
            self._cache.forget()
            raise
        self._cache.remember(plan.rows, plan.generation)

    async def _run(self, plan: SavePlan, *, whole: bool) -> bool:
        positions = range(len(plan.rows)) if whole else plan.changed
        args: list[str] = [
            "w" if whole else "i",
            plan.expected or "",
            plan.generation,
            str(len(plan.rows)),
            self._ttl_ms,
        ]
        for position in positions:
            args += (str(position), plan.rows[position].text)
        outcome = await self._redis.call(lambda client: self._script(keys=[self._key], args=args))
        return bool(outcome == 1)

    async def open(self) -> None:
        """Connect now (one ``PING``), so a bad configuration fails at start-up.

        Raises:
            StorageError: the server cannot be reached.
        """
        await self._redis.ping()

    async def aclose(self) -> None:
        """Stop using the client, and close it if this memory created it. Idempotent."""
        await self._redis.aclose()

    async def __aenter__(self) -> RedisChatMemory:
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
