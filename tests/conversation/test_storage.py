"""One CAS session storage contract, run against every session storage backend.

PostgreSQL and Redis are real servers on loopback (``scripts/test-services.sh``); each run uses
its own table and key prefix and removes them afterwards.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.conversation import InMemorySessionStorage, SessionStorage
from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import SessionSnapshot, decode_session_snapshot
from agentskit_chat.storage import (
    PostgresSessionStorage,
    RedisSessionStorage,
    SQLiteSessionStorage,
)
from tests._loop import no_blocking

pytestmark = pytest.mark.anyio

Factory = Callable[[], Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "postgres", "redis", "sqlite"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """Builds storages over one shared backing store (like several workers)."""
    built: list[Any] = []

    def keep(storage: Any) -> Any:
        built.append(storage)
        return storage

    if request.param == "memory":
        data: dict[str, str] = {}
        yield lambda: InMemorySessionStorage(data)
    elif request.param == "sqlite":
        path = tmp_path / "sessions.db"
        yield lambda: keep(SQLiteSessionStorage(path))
    elif request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        table = f"sessions_test_{uuid.uuid4().hex}"
        yield lambda: keep(PostgresSessionStorage(url, table=table, max_size=4))
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}")
    else:
        redis_url: str = request.getfixturevalue("redis_url")
        prefix = f"agentskit-test:{uuid.uuid4().hex}:"
        yield lambda: keep(RedisSessionStorage(redis_url, prefix=prefix))
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            names = [name async for name in client.scan_iter(match=prefix + "*")]
            if names:
                await client.delete(*names)
    for storage in built:
        await storage.aclose()


def snapshot(cursor: int, session_id: str = "session-1", state: str = "idle") -> SessionSnapshot:
    return SessionSnapshot.model_validate(
        {
            "protocol": "agentskit.chat.session",
            "version": 1,
            "session_id": session_id,
            "definition_id": "support",
            "definition_revision": 1,
            "updated_at": "2026-07-11T00:00:00.000Z",
            "cursor": cursor,
            "conversation": {"state": state, "decisions": []},
            "confirmations": [],
        }
    )


async def loaded(storage: SessionStorage, session_id: str = "session-1") -> SessionSnapshot | None:
    raw = await storage.load(session_id)
    if raw is None:
        return None
    result = decode_session_snapshot(raw)
    assert result.ok
    return result.value


async def close(storage: Any) -> None:
    aclose = getattr(storage, "aclose", None)
    if aclose is not None:
        await aclose()


async def test_a_missing_session_loads_as_none(make: Factory) -> None:
    storage = make()
    assert await storage.load("session-1") is None
    await close(storage)


async def test_create_only_when_expected_is_none(make: Factory) -> None:
    storage = make()
    async with no_blocking():
        assert await storage.save(snapshot(1), None) is True
        assert await storage.save(snapshot(1, state="other"), None) is False
        assert await loaded(storage) == snapshot(1)
    await close(storage)


async def test_update_only_when_the_stored_cursor_matches(make: Factory) -> None:
    storage = make()
    assert await storage.save(snapshot(1), 0) is False
    assert await loaded(storage) is None
    assert await storage.save(snapshot(1), None) is True
    assert await storage.save(snapshot(2), 0) is False
    assert await storage.save(snapshot(2), 1) is True
    assert await storage.save(snapshot(3), 1) is False
    assert await loaded(storage) == snapshot(2)
    await close(storage)


async def test_sessions_are_kept_apart_and_can_be_deleted(make: Factory) -> None:
    storage = make()
    await storage.save(snapshot(1, "a"), None)
    await storage.save(snapshot(1, "b", state="b"), None)
    assert (await loaded(storage, "b")) == snapshot(1, "b", state="b")
    await storage.delete("a")
    await storage.delete("a")
    assert await storage.load("a") is None
    assert await loaded(storage, "b") is not None
    await close(storage)


async def test_concurrent_writers_exactly_one_wins(make: Factory) -> None:
    writers = [make() for _ in range(6)]
    await writers[0].save(snapshot(1), None)
    results: list[bool] = []

    async def write(storage: Any, index: int) -> None:
        results.append(await storage.save(snapshot(2, state=f"s{index}"), 1))

    async with no_blocking(), anyio.create_task_group() as group:
        for index, storage in enumerate(writers):
            group.start_soon(write, storage, index)
    assert sorted(results) == [False] * 5 + [True]
    for storage in writers:
        await close(storage)


async def test_concurrent_creators_exactly_one_wins(make: Factory) -> None:
    writers = [make() for _ in range(6)]
    results: list[bool] = []

    async def write(storage: Any) -> None:
        results.append(await storage.save(snapshot(1), None))

    async with anyio.create_task_group() as group:
        for storage in writers:
            group.start_soon(write, storage)
    assert results.count(True) == 1
    for storage in writers:
        await close(storage)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [(({"cursor": 1}, None), TypeError), ((None, -1), ValueError), ((None, "1"), TypeError)],
)
async def test_save_checks_its_arguments(make: Factory, arguments: Any, error: Any) -> None:
    storage = make()
    value, expected = arguments
    with pytest.raises(error):
        await storage.save(snapshot(1) if value is None else value, expected)
    await close(storage)


SAVES = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 4)), st.integers(1, 5)), max_size=12)


@settings(max_examples=40)
@given(saves=SAVES)
def test_saves_behave_like_a_compare_and_set_register(
    saves: list[tuple[int | None, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("cas") / "sessions.db"

    async def run() -> None:
        for storage in (InMemorySessionStorage(), SQLiteSessionStorage(path)):
            stored: int | None = None
            for expected, cursor in saves:
                wins = stored is None if expected is None else stored == expected
                assert await storage.save(snapshot(cursor), expected) is wins
                if wins:
                    stored = cursor
                found = await loaded(storage)
                assert (found is None) == (stored is None)
                assert found is None or found.cursor == stored
            await close(storage)

    anyio.run(run)


async def test_sqlite_storage_failures_are_storage_errors(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    storage = SQLiteSessionStorage(path)
    await storage.save(snapshot(1), None)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE agentskit_chat_sessions")
        connection.execute("CREATE TABLE agentskit_chat_sessions (other TEXT)")
    connection.close()
    with pytest.raises(StorageError) as caught:
        await storage.load("session-1")
    assert caught.value.message.startswith("The SQLite session storage")
    await storage.aclose()
    with pytest.raises(StorageError) as closed:
        await storage.load("session-1")
    assert closed.value.message == "The SQLite session storage is closed."
    assert closed.value.retryable is False


async def test_sqlite_storage_in_memory_and_as_a_context_manager() -> None:
    async with SQLiteSessionStorage(":memory:") as storage:
        assert await storage.save(snapshot(1), None) is True
        assert await loaded(storage) == snapshot(1)
    storage.close()


@pytest.mark.parametrize(("table", "timeout"), [("bad name", 1.0), ("ok", -1.0)])
def test_sqlite_storage_checks_its_options(table: str, timeout: float) -> None:
    with pytest.raises(ValueError):
        SQLiteSessionStorage(":memory:", table=table, busy_timeout=timeout)


async def test_a_memory_storage_holding_garbage_fails_updates() -> None:
    storage = InMemorySessionStorage({"session-1": "{"})
    with pytest.raises(StorageError):
        await storage.save(snapshot(2), 1)
    assert await storage.save(snapshot(2), None) is False


async def test_every_storage_satisfies_the_port(make: Factory) -> None:
    assert isinstance(make(), SessionStorage)


async def test_a_redis_key_holding_something_else_is_a_storage_error(redis_url: str) -> None:
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        await client.set(prefix + "session-1", "not a hash")
        await client.hset(prefix + "session-2", mapping={"snapshot": "{}"})
        try:
            async with RedisSessionStorage(redis_url, prefix=prefix) as storage:
                for session_id in ("session-1", "session-2"):
                    with pytest.raises(StorageError) as caught:
                        await storage.load(session_id)
                    assert caught.value.retryable is False
                    with pytest.raises(StorageError):
                        await storage.save(snapshot(2, session_id), 1)
        finally:
            await client.delete(prefix + "session-1", prefix + "session-2")


async def test_redis_sessions_expire_after_their_ttl(redis_url: str) -> None:
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"
    async with RedisSessionStorage(redis_url, prefix=prefix, ttl_seconds=0.2) as storage:
        assert await storage.save(snapshot(1), None) is True
        assert await loaded(storage) == snapshot(1)
        await anyio.sleep(0.4)
        assert await storage.load("session-1") is None


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_an_unreachable_server_is_a_retryable_storage_error(backend: str) -> None:
    storage: Any = (
        PostgresSessionStorage("postgresql://nobody@127.0.0.1:1/none", timeout=0.5)
        if backend == "postgres"
        else RedisSessionStorage("redis://127.0.0.1:1/0", connect_timeout=0.5)
    )
    with pytest.raises(StorageError) as caught:
        await storage.load("session-1")
    assert caught.value.retryable is True
    await storage.aclose()
    with pytest.raises(StorageError) as closed:
        await storage.load("session-1")
    assert closed.value.retryable is False
