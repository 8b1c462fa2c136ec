"""One chat memory contract, run against every persistent backend: SQLite, PostgreSQL, Redis.

PostgreSQL and Redis are real servers on loopback (``scripts/test-services.sh``); each run uses
its own tables and key prefix and removes them afterwards. Saves write only what changed since
a memory last loaded or saved; these tests check that what is stored is always exactly the
last saved conversation, whichever memory saved it and whatever it remembered.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import orjson
import psycopg
import pytest
import redis.asyncio

from agentskit_chat.errors import ProtocolError, StorageError
from agentskit_chat.runtime import ChatMemory, ChatMessage
from agentskit_chat.storage import PostgresChatMemory, RedisChatMemory, SQLiteChatMemory
from agentskit_chat.storage._memory_rows import RowCache

from .test_sqlite_memory import conversation, wire

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 7, 13, 9, 0, tzinfo=UTC)
#: Builds a memory of a conversation over the backend's shared storage (like another worker).
Make = Callable[[str], Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["postgres", "redis", "sqlite"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    built: list[Any] = []

    def keep(memory: Any) -> Any:
        built.append(memory)
        return memory

    if request.param == "sqlite":
        path = tmp_path / "chat.db"
        yield lambda cid: keep(SQLiteChatMemory(path, cid))
    elif request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        table = f"messages_test_{uuid.uuid4().hex}"
        yield lambda cid: keep(PostgresChatMemory(url, cid, table=table, max_size=2))
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
    else:
        redis_url: str = request.getfixturevalue("redis_url")
        prefix = f"agentskit-test:{uuid.uuid4().hex}:"
        yield lambda cid: keep(RedisChatMemory(redis_url, cid, prefix=prefix))
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            names = [name async for name in client.scan_iter(match=prefix + "*")]
            if names:
                await client.delete(*names)
    for memory in built:
        await memory.aclose()


def turn(n: int, text: str = "") -> tuple[ChatMessage, ChatMessage]:
    asked = ChatMessage(
        id=f"q{n}", role="user", content=f"question {n} {text}", created_at=T0 + timedelta(n)
    )
    answered = ChatMessage(
        id=f"r{n}", role="assistant", content=f"answer {n} {text}", created_at=T0 + timedelta(n)
    )
    return asked, answered


def talk(turns: int, text: str = "") -> list[ChatMessage]:
    return [message for n in range(turns) for message in turn(n, text)]


async def test_every_memory_satisfies_the_port(make: Make) -> None:
    memory = make("c1")
    assert isinstance(memory, ChatMemory)
    assert await memory.load() == ()


async def test_a_round_trip_keeps_tool_calls_metadata_and_parts(make: Make) -> None:
    await make("c1").save(conversation())
    assert wire(await make("c1").load()) == wire(conversation())


@pytest.mark.parametrize(
    "edit",
    ["append", "shorten", "change-middle", "empty", "replace-all", "same"],
)
async def test_each_save_stores_exactly_the_saved_conversation(make: Make, edit: str) -> None:
    memory = make("c1")
    first = talk(5)
    await memory.save(first)
    if edit == "append":
        second = [*first, *turn(5)]
    elif edit == "shorten":
        second = first[:3]
    elif edit == "change-middle":
        second = [*first[:4], turn(2, "edited")[0], *first[5:]]
    elif edit == "empty":
        second = []
    elif edit == "replace-all":
        second = talk(2, "other")
    else:
        second = list(first)
    await memory.save(second)
    assert wire(await memory.load()) == wire(second)
    assert wire(await make("c1").load()) == wire(second)  # another worker reads the same


async def test_a_memory_that_missed_another_writers_save_still_stores_its_own(
    make: Make,
) -> None:
    worker_a, worker_b = make("c1"), make("c1")
    await worker_a.save(talk(3))
    await worker_b.load()
    await worker_b.save([*talk(3)[:2], *turn(7, "from b"), *turn(8, "from b")])
    # Worker A still remembers its own last save; its next save must not be mixed into B's.
    mine = [*talk(3), *turn(3)]
    await worker_a.save(mine)
    assert wire(await make("c1").load()) == wire(mine)


async def test_random_edits_by_two_stale_workers_always_store_the_last_save(make: Make) -> None:
    rng = random.Random(12)
    workers = [make("c1"), make("c1")]
    stored: list[ChatMessage] = []
    edits = 0
    for step in range(40):
        worker = workers[rng.randrange(2)]
        if rng.random() < 0.3:
            assert wire(await worker.load()) == wire(stored)
            continue
        base = list(stored) if rng.random() < 0.7 else talk(rng.randrange(4))
        action = rng.randrange(4)
        if action == 0 or not base:
            base += turn(100 + step)
        elif action == 1:
            base = base[: rng.randrange(len(base))]
        elif action == 2:
            position = rng.randrange(len(base))
            base[position] = turn(200 + step)[position % 2]
        else:
            base = base + list(turn(300 + step, "x")) + list(turn(400 + step))
        await worker.save(base)
        stored = base
        edits += 1
        assert wire(await make("c1").load()) == wire(stored)
    assert edits > 20


async def test_conversations_are_kept_apart(make: Make) -> None:
    await make("c1").save(talk(2, "one"))
    await make("c2").save(talk(3, "two"))
    await make("c1").save(talk(1, "one"))
    assert wire(await make("c1").load()) == wire(talk(1, "one"))
    assert wire(await make("c2").load()) == wire(talk(3, "two"))


async def test_an_oversized_conversation_is_refused_and_writes_nothing(make: Make) -> None:
    def big(n: int, items: int) -> ChatMessage:
        metadata = {"n": list(range(items))}
        return ChatMessage(
            id=f"m{n}", role="assistant", content="x", created_at=T0, metadata=metadata
        )

    memory = make("c1")
    await memory.save(talk(2))
    with pytest.raises(ProtocolError):
        await memory.save([big(0, 10_001)])
    parts = [big(n, 3000) for n in range(4)]  # each one fits; together they are too large
    await make("other").save(parts[:3])
    with pytest.raises(ProtocolError):
        await memory.save([*talk(2), *parts])
    assert wire(await make("c1").load()) == wire(talk(2))


async def test_concurrent_saves_leave_one_whole_version(make: Make) -> None:
    versions = [talk(1 + n % 4, f"v{n}") for n in range(6)]
    memories = [make("shared") for _ in range(3)]
    for _ in range(3):
        async with anyio.create_task_group() as group:
            for index, version in enumerate(versions):
                group.start_soon(memories[index % 3].save, version)
        assert wire(await make("shared").load()) in [wire(v) for v in versions]


async def test_a_closed_memory_raises_storage_error(make: Make) -> None:
    memory = make("c1")
    await memory.save(talk(1))
    await memory.aclose()
    await memory.aclose()
    with pytest.raises(StorageError) as caught:
        await memory.load()
    assert caught.value.retryable is False


async def test_a_broken_redis_conversation_is_a_storage_error(redis_url: str) -> None:
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        row = orjson.dumps(wire(talk(1))[0]).decode()
        broken: dict[str, dict[str, str]] = {
            "missing-row": {"g": "x", "n": "2", "0": row},
            "bad-count": {"g": "x", "n": "two"},
            "garbage": {"g": "x", "n": "1", "0": "{"},
        }
        for cid, fields in broken.items():
            for name, value in fields.items():
                await client.hset(prefix + cid, name, value)
        await client.set(prefix + "not-a-hash", "x")
        try:
            for cid in [*broken, "not-a-hash"]:
                async with RedisChatMemory(redis_url, cid, prefix=prefix) as memory:
                    with pytest.raises(StorageError) as caught:
                        await memory.load()
                    assert caught.value.retryable is False
        finally:
            await client.delete(*(prefix + cid for cid in [*broken, "not-a-hash"]))


async def test_a_broken_postgres_row_is_a_storage_error(postgres_url: str) -> None:
    table = f"messages_test_{uuid.uuid4().hex}"
    try:
        async with PostgresChatMemory(postgres_url, "c1", table=table) as memory:
            await memory.save(talk(1))
            async with await psycopg.AsyncConnection.connect(
                postgres_url, autocommit=True
            ) as connection:
                await connection.execute(f"UPDATE {table} SET record = '{{' WHERE position = 0")
            with pytest.raises(StorageError) as caught:
                await memory.load()
            assert caught.value.retryable is False
    finally:
        async with await psycopg.AsyncConnection.connect(
            postgres_url, autocommit=True
        ) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


async def test_redis_conversations_expire_after_their_ttl(redis_url: str) -> None:
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"
    async with RedisChatMemory(redis_url, "c1", prefix=prefix, ttl_seconds=0.2) as memory:
        await memory.save(talk(1))
        assert wire(await memory.load()) == wire(talk(1))
        await anyio.sleep(0.4)
        assert await memory.load() == ()


@pytest.mark.parametrize(
    "build",
    [
        lambda: PostgresChatMemory("postgresql://nobody@127.0.0.1:1/none", "c1", timeout=0.5),
        lambda: RedisChatMemory("redis://127.0.0.1:1/0", "c1", connect_timeout=0.5),
    ],
    ids=["postgres", "redis"],
)
async def test_an_unreachable_server_is_a_retryable_storage_error(build: Any) -> None:
    memory = build()
    with pytest.raises(StorageError) as caught:
        await memory.load()
    assert caught.value.retryable is True
    await memory.aclose()


@pytest.mark.parametrize("options", [{"conversation_id": ""}, {"table": "bad name"}])
def test_postgres_memory_checks_its_options(options: dict[str, Any]) -> None:
    arguments = {"conversation_id": "c1", **options}
    with pytest.raises(ValueError):
        PostgresChatMemory("postgresql://x@127.0.0.1/x", **arguments)


@pytest.mark.parametrize("options", [{"conversation_id": ""}, {"ttl_seconds": 0}])
def test_redis_memory_checks_its_options(options: dict[str, Any]) -> None:
    arguments = {"conversation_id": "c1", **options}
    with pytest.raises(ValueError):
        RedisChatMemory("redis://127.0.0.1/0", **arguments)


# --- what a save writes ---------------------------------------------------------------------


def changed(cache: RowCache, messages: Sequence[ChatMessage]) -> tuple[int, ...]:
    plan = cache.plan(messages)
    cache.remember(plan.rows, plan.generation)
    return plan.changed


def test_a_save_encodes_and_writes_only_the_messages_that_changed() -> None:
    cache = RowCache()
    messages = talk(3)
    assert changed(cache, messages) == (0, 1, 2, 3, 4, 5)
    assert changed(cache, [*messages, *turn(3)]) == (6, 7)
    assert changed(cache, [*messages, *turn(3)]) == ()
    edited = [*messages[:2], turn(9)[0], *messages[3:]]
    assert changed(cache, edited) == (2,)
    assert changed(cache, edited[:2]) == ()
    # Equal messages built anew are not encoded again either.
    assert changed(cache, talk(1)) == ()


def test_a_forgotten_generation_forces_a_whole_rewrite_but_no_new_encoding() -> None:
    cache = RowCache()
    first = cache.plan(talk(2))
    cache.remember(first.rows, first.generation)
    cache.forget()
    plan = cache.plan([*talk(2), *turn(2)])
    assert plan.expected is None
    assert plan.changed == (4, 5)  # the rest reuses the rows it had
    assert [row.text for row in plan.rows[:4]] == [row.text for row in first.rows]
