"""After a Redis restart, the first command on every pooled connection still succeeds.

redis-py's pooled connections each fail their next command once after the server restarted
("Connection closed by server"); our clients retry a connection error once on a fresh
connection, so a restart is not a burst of 500s (the rate limiter, the session and memory
stores all share ``_drivers.redis_client``).
"""

from __future__ import annotations

import shutil

import anyio
import pytest

from agentskit_chat._drivers import redis_client
from tests.faults._instances import private_redis
from tests.faults.conftest import _missing

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_every_pooled_connection_works_again_after_a_restart() -> None:
    if shutil.which("redis-server") is None:
        _missing("redis-server")
    with private_redis() as server:
        client, owned = redis_client(server.url, user="test", max_connections=4, connect_timeout=2)
        assert owned
        try:
            # Four connections in the pool, each used once.
            async def write(n: int) -> None:
                await client.set(f"key-{n}", str(n))

            async with anyio.create_task_group() as group:
                for n in range(4):
                    group.start_soon(write, n)
            await anyio.to_thread.run_sync(server.stop)
            await anyio.to_thread.run_sync(server.start)
            results: dict[int, object] = {}

            async def read(n: int) -> None:
                results[n] = await client.get(f"key-{n}")

            async with anyio.create_task_group() as group:
                for n in range(4):
                    group.start_soon(read, n)
            # SHUTDOWN SAVE kept the keys; every stale connection was replaced transparently.
            assert results == {n: str(n).encode() for n in range(4)}
        finally:
            await client.aclose()
