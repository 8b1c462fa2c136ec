"""A token-bucket rate limiter in Redis, shared by every Ask worker.

Each (site, subject) pair owns a bucket of ``capacity`` tokens refilling at ``refill_per_second``,
exactly like :class:`~agentskit_chat.ask.InMemoryRateLimiter`, but the bucket lives in Redis and
one Lua script refills, takes and stores it in a single atomic step: concurrent requests from any
number of workers never take the same token twice. The script reads the time from the Redis
server (``TIME``), so the workers' clocks never need to agree.

A bucket is a hash (``tokens``, ``ts``) that expires once it would be full again, so idle subjects
cost no memory. Its key is the prefix, the site id and a BLAKE2b digest of the subject id: the
subject id itself is never written to Redis.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat._drivers import redis_client, require_extra
from agentskit_chat.errors import ConfigurationError, RateLimitError
from agentskit_chat.protocol import BackendSiteConfig
from agentskit_chat.service import RateLimitDecision

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_RATE_LIMIT_PREFIX", "RedisRateLimiter"]

#: The key prefix a limiter uses unless told otherwise.
DEFAULT_RATE_LIMIT_PREFIX: Final = "agentskit:ratelimit:"

_UNAVAILABLE: Final = "The Redis rate limiter is unavailable."
_FAILED: Final = "The Redis rate limiter failed."

# KEYS[1] the bucket. ARGV: capacity, refill per second, time to live in ms, and the current
# time in seconds ("" = the server's TIME). Returns {allowed (1 or 0), seconds until the next
# token as text}: a Lua number would be truncated to an integer in the reply.
_TAKE: Final = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[4])
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(capacity, tokens + elapsed * rate)
if now > ts then ts = now end
local allowed = 0
local wait = 0
if tokens >= 1 - 1e-9 then
  tokens = math.max(0, tokens - 1)
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'ts', string.format('%.17g', ts))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {allowed, string.format('%.17g', wait)}
"""


def _positive_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


class RedisRateLimiter:
    """The :class:`~agentskit_chat.service.RateLimiter` port: a token bucket per subject, in Redis.

    Built from a URL, the limiter owns its client and closes it in :meth:`aclose` (or at the
    end of ``async with``); built from a ``redis.asyncio.Redis`` client, it borrows it.

    Args:
        url_or_client: A Redis URL (``redis://``, ``rediss://``, ``unix://``) or a client.
        capacity: Burst size: how many requests a rested subject may make at once.
        refill_per_second: Sustained rate: tokens added back per second.
        prefix: Prepended to every key, to share a Redis with other data.
        fail_open: When Redis cannot be reached, allow the request instead of raising
            :class:`~agentskit_chat.errors.RateLimitError` (availability over enforcement).
        clock: Seconds, read on this side instead of the server's ``TIME``; for tests that
            must not wait for tokens to come back. Every worker must then share one clock.
        connect_timeout: Seconds an owned client waits to connect, or for a free connection.
        max_connections: The size of an owned client's connection pool. Checks beyond it wait
            for a connection instead of failing, so a burst is queued, never refused or let
            through. A borrowed client keeps its own pool: make it a
            ``redis.asyncio.BlockingConnectionPool`` for the same behaviour.

    Raises:
        ImportError: the ``redis`` extra is not installed.
        ConfigurationError: ``capacity`` is not a positive integer, ``refill_per_second`` not a
            positive number, ``prefix`` not a string, or ``max_connections`` not a positive
            integer.
        TypeError: ``url_or_client`` is neither a string nor a ``redis.asyncio.Redis``.

    Example:
        >>> limiter = RedisRateLimiter(  # doctest: +SKIP
        ...     "redis://127.0.0.1:6379/0", capacity=20, refill_per_second=0.5
        ... )
    """

    def __init__(
        self,
        url_or_client: str | Redis,
        *,
        capacity: int = 20,
        refill_per_second: float = 1.0,
        prefix: str = DEFAULT_RATE_LIMIT_PREFIX,
        fail_open: bool = False,
        clock: Callable[[], float] | None = None,
        connect_timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        require_extra("RedisRateLimiter", "redis", "redis.asyncio")

        if type(capacity) is not int or capacity < 1:
            raise ConfigurationError("The rate limiter capacity must be a positive integer.")
        if not _positive_number(refill_per_second):
            raise ConfigurationError("The rate limiter refill rate must be a positive number.")
        if not isinstance(prefix, str):
            raise ConfigurationError("The rate limiter key prefix must be a string.")
        if type(max_connections) is not int or max_connections < 1:
            raise ConfigurationError(
                "The rate limiter connection limit must be a positive integer."
            )
        self._client, self._owns_client = redis_client(
            url_or_client,
            user="RedisRateLimiter",
            max_connections=max_connections,
            connect_timeout=connect_timeout,
        )
        self._capacity = capacity
        self._rate = float(refill_per_second)
        self._prefix = prefix
        self._fail_open = fail_open
        self._clock = clock
        # A bucket left alone this long is full again: forgetting it changes nothing.
        self._ttl_ms = str(math.ceil(capacity / self._rate * 1000) + 1000)
        self._take = self._client.register_script(_TAKE)

    def key(self, site_id: str, subject_id: str) -> str:
        """The Redis key of the bucket of (``site_id``, ``subject_id``).

        The subject id is digested, so it never appears in Redis; the site id is kept readable
        (it comes from the host's configuration, not from a person).
        """
        digest = hashlib.blake2b(subject_id.encode("utf-8", "surrogatepass"), digest_size=16)
        return f"{self._prefix}{site_id}:{digest.hexdigest()}"

    async def take(self, site_id: str, subject_id: str) -> RateLimitDecision:
        """Take one token from the bucket of (``site_id``, ``subject_id``).

        Raises:
            RateLimitError: Redis could not be reached or failed, unless ``fail_open``.
        """
        from redis import exceptions  # noqa: PLC0415

        now = "" if self._clock is None else repr(float(self._clock()))
        try:
            reply: Any = await self._take(
                keys=[self.key(site_id, subject_id)],
                args=[self._capacity, repr(self._rate), self._ttl_ms, now],
            )
        except exceptions.MaxConnectionsError:
            # A full pool is load, not an outage: never a reason to let requests through.
            raise RateLimitError(_FAILED) from None
        except (exceptions.ConnectionError, exceptions.TimeoutError):
            if self._fail_open:
                return RateLimitDecision(allowed=True)
            raise RateLimitError(_UNAVAILABLE) from None
        except exceptions.RedisError:
            raise RateLimitError(_FAILED) from None
        allowed, wait = int(reply[0]), float(reply[1])
        if allowed == 1:
            return RateLimitDecision(allowed=True)
        return RateLimitDecision(allowed=False, retry_after_seconds=max(1, math.ceil(wait)))

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        """The :class:`~agentskit_chat.service.RateLimiter` port: one request for ``subject_id``."""
        return await self.take(site.site_id, subject_id)

    async def aclose(self) -> None:
        """Close the client if this limiter created it (a borrowed client stays open)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> RedisRateLimiter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
