"""What only some backends do: URLs, unreachable servers, borrowed pools, TTLs, missing extras."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psycopg
import psycopg_pool
import pytest
import redis.asyncio

from agentskit_chat.errors import ConfigurationError, StorageError
from agentskit_chat.protocol import AskMessage, AskSessionRecord
from agentskit_chat.service import SessionKey
from agentskit_chat.storage import (
    MemoryAskSessionStore,
    PostgresAskSessionStore,
    RedisAskSessionStore,
    SQLiteAskSessionStore,
    open_ask_session_store,
    storage_key,
)

KEY = SessionKey("docs", "user-1", "session-1")
PASSWORD = "s3cret-pw-zq9"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def record(revision: int, content: str = "hello") -> AskSessionRecord:
    return AskSessionRecord(revision=revision, messages=(AskMessage(role="user", content=content),))


# --- open_ask_session_store -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("memory:", MemoryAskSessionStore),
        ("MEMORY://", MemoryAskSessionStore),
        ("sqlite://", SQLiteAskSessionStore),
        ("sqlite:///:memory:", SQLiteAskSessionStore),
        ("sqlite:///sessions.db", SQLiteAskSessionStore),
        ("postgresql://app:pw@127.0.0.1:5432/app", PostgresAskSessionStore),
        ("postgres://app@127.0.0.1/app", PostgresAskSessionStore),
        ("redis://127.0.0.1:6379/0", RedisAskSessionStore),
        ("rediss://:pw@127.0.0.1:6380/1", RedisAskSessionStore),
    ],
)
@pytest.mark.anyio
async def test_open_picks_the_backend_from_the_scheme(url: str, kind: type[object]) -> None:
    store = open_ask_session_store(url)  # connects nothing yet
    try:
        assert type(store) is kind
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_open_sqlite_paths_are_relative_or_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url, path in [
        ("sqlite:///relative.db", tmp_path / "relative.db"),
        (f"sqlite:///{tmp_path}/absolute.db", tmp_path / "absolute.db"),
        ("sqlite:///with%20space.db", tmp_path / "with space.db"),
    ]:
        async with open_ask_session_store(url) as store:
            assert await store.save(KEY, record(1), 0)
        assert path.exists(), url
        async with SQLiteAskSessionStore(path) as reopened:
            assert await reopened.load(KEY) == record(1)


@pytest.mark.parametrize(
    ("url", "options"),
    [
        (f"mysql://root:{PASSWORD}@db/app", {}),
        (f"{PASSWORD}", {}),
        ("", {}),
        (f"memory:{PASSWORD}", {}),
        ("sqlite:relative.db", {}),
        ("sqlite:///", {}),
        ("sqlite:///a.db?mode=ro", {}),
        ("memory:", {"table": "t"}),
        ("memory:", {"prefix": "p:"}),
        ("sqlite:///a.db", {"ttl_seconds": 5.0}),
        (f"postgresql://u:{PASSWORD}@h/db", {"prefix": "p:"}),
        (f"redis://:{PASSWORD}@h/0", {"table": "t"}),
    ],
)
def test_open_refuses_bad_urls_without_echoing_them(url: str, options: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_ask_session_store(url, **options)  # type: ignore[arg-type]
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize("table", ["", "1table", "a-b", "a; DROP TABLE x", "a.b", "x" * 64])
def test_table_names_must_be_plain_identifiers(table: str) -> None:
    with pytest.raises(ValueError):
        SQLiteAskSessionStore(":memory:", table=table)
    with pytest.raises(ValueError):
        PostgresAskSessionStore("postgresql://127.0.0.1/db", table=table)


# --- SQLite -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sqlite_in_memory_is_private_to_its_store() -> None:
    async with (
        SQLiteAskSessionStore(":memory:") as first,
        SQLiteAskSessionStore(":memory:") as other,
    ):
        assert await first.save(KEY, record(1), 0)
        assert await first.load(KEY) == record(1)
        assert await other.load(KEY) is None


@pytest.mark.anyio
async def test_sqlite_file_uses_wal_and_custom_table(tmp_path: Path) -> None:
    import sqlite3  # noqa: PLC0415

    path = tmp_path / "s.db"
    async with SQLiteAskSessionStore(path, table="my_sessions") as store:
        assert await store.save(KEY, record(1), 0)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        row = connection.execute("SELECT revision, record FROM my_sessions").fetchone()
    connection.close()
    assert row == (1, record(1).to_json())


@pytest.mark.anyio
async def test_sqlite_unopenable_file_is_a_storage_error(tmp_path: Path) -> None:
    store = SQLiteAskSessionStore(tmp_path / "missing-dir" / "s.db")
    with pytest.raises(StorageError) as caught:
        await store.load(KEY)
    assert "missing-dir" not in str(caught.value)
    await store.aclose()


def test_sqlite_sync_close_is_idempotent() -> None:
    store = SQLiteAskSessionStore(":memory:")
    store.close()
    store.close()


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_postgres_unreachable_is_retryable_and_hides_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store = PostgresAskSessionStore(
        f"postgresql://agentskit:{PASSWORD}@127.0.0.1:1/agentskit_test", timeout=0.5
    )
    for attempt in (store.load(KEY), store.save(KEY, record(1), 0)):
        with pytest.raises(StorageError) as caught:
            await attempt
        assert caught.value.retryable is True
        assert PASSWORD not in str(caught.value)
        assert PASSWORD not in repr(caught.value)
        assert caught.value.__cause__ is None
    await store.aclose()
    assert PASSWORD not in caplog.text


@pytest.fixture
async def postgres_pool(postgres_url: str) -> AsyncIterator[psycopg_pool.AsyncConnectionPool]:
    pool = psycopg_pool.AsyncConnectionPool(postgres_url, open=False, min_size=1, max_size=2)
    await pool.open()
    try:
        yield pool
    finally:
        await pool.close()


@pytest.mark.anyio
async def test_postgres_borrowed_pool_stays_open(
    postgres_pool: psycopg_pool.AsyncConnectionPool,
) -> None:
    table = f"ask_sessions_test_{uuid.uuid4().hex}"
    try:
        async with PostgresAskSessionStore(postgres_pool, table=table) as store:
            assert await store.save(KEY, record(1), 0)
        assert not postgres_pool.closed
        async with PostgresAskSessionStore(postgres_pool, table=table, create_table=False) as again:
            assert await again.load(KEY) == record(1)
    finally:
        async with postgres_pool.connection() as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.anyio
async def test_postgres_missing_table_without_create_is_not_retryable(
    postgres_pool: psycopg_pool.AsyncConnectionPool,
) -> None:
    table = f"ask_sessions_absent_{uuid.uuid4().hex}"
    store = PostgresAskSessionStore(postgres_pool, table=table, create_table=False)
    with pytest.raises(StorageError) as caught:
        await store.load(KEY)
    assert caught.value.retryable is False


@pytest.mark.anyio
async def test_postgres_two_stores_creating_one_table_at_once(postgres_url: str) -> None:
    table = f"ask_sessions_test_{uuid.uuid4().hex}"
    stores = [PostgresAskSessionStore(postgres_url, table=table) for _ in range(4)]
    try:
        async with anyio.create_task_group() as group:
            for store in stores:
                group.start_soon(store.load, KEY)
    finally:
        for store in stores:
            await store.aclose()
        async with await psycopg.AsyncConnection.connect(
            postgres_url, autocommit=True
        ) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}")


# --- Redis ------------------------------------------------------------------------------------


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[tuple[redis.asyncio.Redis, str]]:
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        yield client, prefix
    finally:
        names = [name async for name in client.scan_iter(match=prefix + "*")]
        if names:
            await client.delete(*names)
        await client.aclose()


@pytest.mark.anyio
async def test_redis_unreachable_is_retryable_and_hides_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store = RedisAskSessionStore(f"redis://:{PASSWORD}@127.0.0.1:1/0", connect_timeout=0.5)
    for attempt in (store.load(KEY), store.save(KEY, record(1), 0)):
        with pytest.raises(StorageError) as caught:
            await attempt
        assert caught.value.retryable is True
        assert PASSWORD not in str(caught.value)
        assert PASSWORD not in repr(caught.value)
    await store.aclose()
    assert PASSWORD not in caplog.text


@pytest.mark.anyio
async def test_redis_ttl_is_set_and_refreshed_on_save(
    redis_client: tuple[redis.asyncio.Redis, str],
) -> None:
    client, prefix = redis_client
    name = prefix + storage_key(KEY)
    store = RedisAskSessionStore(client, prefix=prefix, ttl_seconds=60)
    assert await store.save(KEY, record(1), 0)
    assert 0 < await client.pttl(name) <= 60_000
    await client.pexpire(name, 5_000)
    assert await store.save(KEY, record(2), 1)
    assert await client.pttl(name) > 5_000
    no_ttl = RedisAskSessionStore(client, prefix=prefix + "plain:")
    assert await no_ttl.save(KEY, record(1), 0)
    assert await client.pttl(prefix + "plain:" + storage_key(KEY)) == -1
    await store.aclose()
    assert await client.ping()  # a borrowed client stays open


@pytest.mark.anyio
@pytest.mark.parametrize(
    "shape",
    ["string", "hash-without-revision", "hash-without-record", "revision-not-a-number"],
)
async def test_redis_foreign_values_are_invalid_not_overwritten(
    redis_client: tuple[redis.asyncio.Redis, str], shape: str
) -> None:
    client, prefix = redis_client
    name = prefix + storage_key(KEY)
    if shape == "string":
        await client.set(name, "zq9MARKER")
    elif shape == "hash-without-revision":
        await client.hset(name, "record", record(1).to_json())
    elif shape == "hash-without-record":
        await client.hset(name, "revision", "1")
    else:
        await client.hset(name, mapping={"revision": "one", "record": record(1).to_json()})
    store = RedisAskSessionStore(client, prefix=prefix)
    with pytest.raises(StorageError) as caught:
        await store.load(KEY)
    assert caught.value.retryable is False
    if shape in ("string", "hash-without-revision"):
        with pytest.raises(StorageError):
            await store.save(KEY, record(1), 0)


@pytest.mark.anyio
async def test_redis_client_with_decoded_responses_works(
    redis_url: str, redis_client: tuple[redis.asyncio.Redis, str]
) -> None:
    _, prefix = redis_client
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    async with RedisAskSessionStore(client, prefix=prefix) as store:
        assert await store.save(KEY, record(1, "ünïcödé \ud800"), 0)
        assert await store.load(KEY) == record(1, "ünïcödé \ud800")
    await client.aclose()


@pytest.mark.parametrize("ttl", [0, -1.0])
def test_redis_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(ValueError):
        RedisAskSessionStore("redis://127.0.0.1:6379/0", ttl_seconds=ttl)


# --- extras -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "build", "extra"),
    [
        ("psycopg", lambda: PostgresAskSessionStore("postgresql://h/db"), "postgres"),
        ("psycopg_pool", lambda: PostgresAskSessionStore("postgresql://h/db"), "postgres"),
        ("redis.asyncio", lambda: RedisAskSessionStore("redis://h"), "redis"),
    ],
)
def test_missing_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, build: object, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=f"agentskit-chat\\[{extra}\\]"):
        build()  # type: ignore[operator]
