"""Optional database drivers: one place that imports them lazily and builds owned clients.

Backends behind an extra (PostgreSQL, Redis) import their driver only when they are built, and
accept either a URL (they then own, open and close the client) or a client the host manages
(borrowed, left open).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

__all__ = ["postgres_pool", "redis_client", "require_extra"]


def require_extra(user: str, extra: str, *modules: str) -> None:
    """Import ``modules`` or raise an ``ImportError`` naming the extra ``user`` needs."""
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{user} needs the '{extra}' extra: pip install 'agentskit-chat[{extra}]'"
        ) from exc


def postgres_pool(
    url_or_pool: str | AsyncConnectionPool[Any],
    *,
    user: str,
    min_size: int,
    max_size: int,
    timeout: float,
) -> tuple[AsyncConnectionPool[Any], bool]:
    """A psycopg pool (autocommit connections, not yet open) and whether the caller owns it.

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        TypeError: ``url_or_pool`` is neither a URL nor an ``AsyncConnectionPool``.
    """
    require_extra(user, "postgres", "psycopg", "psycopg_pool")
    from psycopg_pool import AsyncConnectionPool  # noqa: PLC0415

    if isinstance(url_or_pool, str):
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url_or_pool,
            open=False,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
        )
        return pool, True
    if isinstance(url_or_pool, AsyncConnectionPool):
        return url_or_pool, False
    raise TypeError("expected a PostgreSQL URL or a psycopg_pool.AsyncConnectionPool")


def redis_client(
    url_or_client: str | Redis,
    *,
    user: str,
    max_connections: int,
    connect_timeout: float,
) -> tuple[Redis, bool]:
    """A redis.asyncio client and whether the caller owns it.

    An owned client uses a waiting pool: bursts beyond ``max_connections`` queue for a
    connection (up to ``connect_timeout``) instead of failing with "Too many connections".

    Raises:
        ImportError: the ``redis`` extra is not installed.
        TypeError: ``url_or_client`` is neither a URL nor a ``redis.asyncio.Redis`` client.
    """
    require_extra(user, "redis", "redis.asyncio")
    from redis.asyncio import BlockingConnectionPool, Redis  # noqa: PLC0415
    from redis.asyncio.retry import Retry  # noqa: PLC0415
    from redis.backoff import NoBackoff  # noqa: PLC0415
    from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: PLC0415

    if isinstance(url_or_client, str):
        # After a Redis restart every pooled connection fails its next command once ("Connection
        # closed by server"): one retry on a fresh connection hides that from callers. Only
        # connection errors are retried (a timeout may have run the command); our writes are
        # compare-and-set scripts, so a retried write that had already run is a conflict, never
        # a second write.
        pool = BlockingConnectionPool.from_url(
            url_or_client,
            max_connections=max_connections,
            timeout=connect_timeout,
            socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 1),
            retry_on_error=[RedisConnectionError],
        )
        return Redis.from_pool(pool), True
    if isinstance(url_or_client, Redis):
        return url_or_client, False
    raise TypeError("expected a Redis URL or a redis.asyncio.Redis client")
