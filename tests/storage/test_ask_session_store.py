"""One compare-and-set conformance suite, run against every Ask session store backend.

PostgreSQL and Redis are real servers on loopback (``scripts/test-services.sh``); each run uses
its own table and key prefix and removes them afterwards.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
import redis.asyncio
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import AskMessage, AskSessionRecord
from agentskit_chat.service import AskSessionStore, SessionKey
from agentskit_chat.storage import (
    AnyAskSessionStore,
    MemoryAskSessionStore,
    PostgresAskSessionStore,
    RedisAskSessionStore,
    SQLiteAskSessionStore,
    check_session_key,
    parse_storage_key,
    storage_key,
)

pytestmark = pytest.mark.anyio

KEY = SessionKey("docs", "user-1", "session-1")
MARKER = "zq9MARKERq9z"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def record(revision: int, *contents: str) -> AskSessionRecord:
    return AskSessionRecord(
        revision=revision,
        messages=tuple(
            AskMessage(role="user" if i % 2 == 0 else "assistant", content=c)
            for i, c in enumerate(contents)
        ),
    )


# --- one backend: how to build stores on shared storage, and how to write raw bytes into it ----


@dataclass
class Backend:
    name: str
    #: A new store instance over the same storage (like another worker).
    make: Callable[[], AnyAskSessionStore]
    #: Write ``raw`` as the stored record text of a key, at stored revision ``revision``
    #: (ignored where the record text is the only copy of the revision).
    write_raw: Callable[[SessionKey, str, int], Awaitable[None]]
    #: Whether the backend keeps the revision apart from the record (and cross-checks them).
    separate_revision: bool


def _memory(_: pytest.FixtureRequest, __: Path) -> tuple[Backend, Callable[[], Awaitable[None]]]:
    data: dict[str, str] = {}

    async def write_raw(key: SessionKey, raw: str, revision: int) -> None:
        data[storage_key(key)] = raw

    async def cleanup() -> None:
        pass

    return Backend("memory", lambda: MemoryAskSessionStore(data), write_raw, False), cleanup


def _sqlite(_: pytest.FixtureRequest, tmp: Path) -> tuple[Backend, Callable[[], Awaitable[None]]]:
    path = tmp / "sessions.db"

    def write(key: SessionKey, raw: str, revision: int) -> None:
        with sqlite3.connect(path) as connection:
            connection.execute(
                "INSERT OR REPLACE INTO agentskit_ask_sessions VALUES (?, ?, ?, ?, ?, 0)",
                (key.site_id, key.subject_id, key.session_id, revision, raw),
            )
        connection.close()

    async def write_raw(key: SessionKey, raw: str, revision: int) -> None:
        await anyio.to_thread.run_sync(write, key, raw, revision)

    async def cleanup() -> None:
        pass

    return Backend("sqlite", lambda: SQLiteAskSessionStore(path), write_raw, True), cleanup


def _postgres(
    request: pytest.FixtureRequest, _: Path
) -> tuple[Backend, Callable[[], Awaitable[None]]]:
    url: str = request.getfixturevalue("postgres_url")
    table = f"ask_sessions_test_{uuid.uuid4().hex}"

    async def write_raw(key: SessionKey, raw: str, revision: int) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(
                f"INSERT INTO {table} (site_id, subject_id, session_id, revision, record)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (site_id, subject_id, session_id)"
                " DO UPDATE SET revision = EXCLUDED.revision, record = EXCLUDED.record",
                (key.site_id, key.subject_id, key.session_id, revision, raw),
            )

    async def cleanup() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}")

    def make() -> PostgresAskSessionStore:
        return PostgresAskSessionStore(url, table=table, max_size=4)

    return Backend("postgres", make, write_raw, True), cleanup


def _redis(
    request: pytest.FixtureRequest, _: Path
) -> tuple[Backend, Callable[[], Awaitable[None]]]:
    url: str = request.getfixturevalue("redis_url")
    prefix = f"agentskit-test:{uuid.uuid4().hex}:"

    async def write_raw(key: SessionKey, raw: str, revision: int) -> None:
        async with redis.asyncio.Redis.from_url(url) as client:
            await client.hset(
                prefix + storage_key(key), mapping={"revision": str(revision), "record": raw}
            )

    async def cleanup() -> None:
        async with redis.asyncio.Redis.from_url(url) as client:
            names = [name async for name in client.scan_iter(match=prefix + "*")]
            if names:
                await client.delete(*names)

    def make() -> RedisAskSessionStore:
        return RedisAskSessionStore(url, prefix=prefix)

    return Backend("redis", make, write_raw, True), cleanup


_BACKENDS = {"memory": _memory, "sqlite": _sqlite, "postgres": _postgres, "redis": _redis}


@pytest.fixture(params=sorted(_BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    built, cleanup = _BACKENDS[request.param](request, tmp_path)
    stores: list[AnyAskSessionStore] = []

    def make() -> AnyAskSessionStore:
        store = built.make()
        stores.append(store)
        return store

    try:
        yield Backend(built.name, make, built.write_raw, built.separate_revision)
    finally:
        for store in stores:
            await store.aclose()
        await cleanup()


# --- the conformance suite ------------------------------------------------------------------


async def test_stores_satisfy_the_port(backend: Backend) -> None:
    store: AskSessionStore = backend.make()
    assert await store.load(KEY) is None


async def test_missing_key_loads_none(backend: Backend) -> None:
    store = backend.make()
    assert await store.load(KEY) is None
    assert await store.load(SessionKey("docs", "user-1", "other")) is None


async def test_first_save_then_load_and_next_revision(backend: Backend) -> None:
    store = backend.make()
    first = record(1, "How do I start?", "Run make serve.")
    assert await store.save(KEY, first, 0) is True
    assert await store.load(KEY) == first
    second = record(2, "How do I start?", "Run make serve.", "And then?")
    assert await store.save(KEY, second, 1) is True
    loaded = await backend.make().load(KEY)  # another worker sees it
    assert loaded == second
    assert loaded is not None and loaded.to_json() == second.to_json()


@pytest.mark.parametrize(
    ("expected", "revision"),
    [(0, 1), (1, 2), (3, 4), (100, 101)],
    ids=["first-save-again", "one-behind", "one-ahead", "far-ahead"],
)
async def test_stale_save_is_refused_and_record_unchanged(
    backend: Backend, expected: int, revision: int
) -> None:
    store = backend.make()
    assert await store.save(KEY, record(1, "one"), 0)
    assert await store.save(KEY, record(2, "one", "two"), 1)
    assert await store.save(KEY, record(revision, "intruder"), expected) is False
    assert await store.load(KEY) == record(2, "one", "two")


async def test_save_on_missing_key_with_nonzero_expectation_is_refused(backend: Backend) -> None:
    store = backend.make()
    assert await store.save(KEY, record(2, "x"), 1) is False
    assert await store.load(KEY) is None


# One compare-and-set rule for every backend: the save succeeds iff the stored revision equals
# ``expected_revision``, where "nothing stored" counts as revision 0. A record stored at revision
# 0 (a valid record: seeded, migrated or imported) is therefore updated like any other, and a
# load-then-save client never has to know whether the row exists.


async def seed_revision_zero(backend: Backend, *contents: str) -> AskSessionRecord:
    seeded = record(0, *contents)
    assert await backend.make().load(KEY) is None  # the table exists from here on
    await backend.write_raw(KEY, seeded.to_json(), 0)
    return seeded


async def test_save_expecting_zero_updates_a_stored_revision_zero_record(
    backend: Backend,
) -> None:
    seeded = await seed_revision_zero(backend, "seeded question")
    store = backend.make()
    assert await store.load(KEY) == seeded
    updated = record(1, "seeded question", "the answer")
    assert await store.save(KEY, updated, 0) is True
    assert await backend.make().load(KEY) == updated
    # The record is at revision 1 now: expecting 0 again is stale.
    assert await store.save(KEY, record(1, "intruder"), 0) is False
    assert await store.load(KEY) == updated


async def test_save_expecting_one_on_a_stored_revision_zero_record_is_refused(
    backend: Backend,
) -> None:
    seeded = await seed_revision_zero(backend, "seeded")
    store = backend.make()
    assert await store.save(KEY, record(2, "intruder"), 1) is False
    assert await store.load(KEY) == seeded


async def test_racing_saves_on_a_stored_revision_zero_record_have_one_winner(
    backend: Backend,
) -> None:
    await seed_revision_zero(backend)
    stores = [backend.make(), backend.make()]
    outcomes: dict[int, bool] = {}

    async def save(number: int) -> None:
        outcomes[number] = await stores[number % 2].save(KEY, record(1, f"writer {number}"), 0)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for number in range(6):
                group.start_soon(save, number)
    winners = [number for number, saved in outcomes.items() if saved]
    assert len(winners) == 1
    assert await stores[0].load(KEY) == record(1, f"writer {winners[0]}")


async def test_concurrent_writers_from_a_stored_revision_zero_record_lose_no_update(
    backend: Backend,
) -> None:
    seeded = await seed_revision_zero(backend, "seeded")
    with anyio.fail_after(20):  # a store that refuses every save would loop forever
        final, _ = await run_writers([backend.make(), backend.make()])
    assert final is not None
    assert final.revision == 8
    assert final.messages[0] == seeded.messages[0]
    assert sorted(m.content for m in final.messages[1:]) == sorted(f"writer {n}" for n in range(8))


@pytest.mark.parametrize(
    ("expected", "revision", "error"),
    [
        (0, 2, ValueError),
        (1, 1, ValueError),
        (0, 0, ValueError),
        (-1, 0, ValueError),
        (True, 2, TypeError),
    ],
    ids=["skips-one", "same-revision", "revision-zero", "negative", "bool"],
)
async def test_save_rejects_revision_arithmetic_errors(
    backend: Backend, expected: int, revision: int, error: type[Exception]
) -> None:
    store = backend.make()
    with pytest.raises(error):
        await store.save(KEY, record(revision, "x"), expected)
    assert await store.load(KEY) is None


_COLLIDING_IN_A_NAIVE_JOIN = [
    SessionKey("a:b", "c", "d"),
    SessionKey("a", "b:c", "d"),
    SessionKey("a", "b", "c:d"),
    SessionKey("a", "b", "c"),
    SessionKey("b", "a", "c"),
    SessionKey("c", "b", "a"),
    SessionKey("a", "b:c:d", "e"),
    SessionKey("a:b:c", "d", "e"),
    SessionKey("a%3Ab", "c", "d"),
    SessionKey("a", "b%3Ac", "d"),
    SessionKey("docs", "user@example.com", "s.1"),
    SessionKey("docs", "user@example.com", "s.2"),
    SessionKey("docs", "user@example.org", "s.1"),
    SessionKey("registry", "user@example.com", "s.1"),
]


async def test_keys_differing_in_any_part_never_collide(backend: Backend) -> None:
    store = backend.make()
    for index, key in enumerate(_COLLIDING_IN_A_NAIVE_JOIN):
        assert await store.save(key, record(1, f"message {index}"), 0), key
    for index, key in enumerate(_COLLIDING_IN_A_NAIVE_JOIN):
        assert await store.load(key) == record(1, f"message {index}"), key


async def run_writers(stores: list[Any], count: int = 8) -> tuple[AskSessionRecord | None, int]:
    """``count`` tasks, each appending its own message with a load/save retry loop.

    Returns the final record and how many saves were refused (lost races).
    """
    start = anyio.Event()
    refused = 0

    async def writer(number: int) -> None:
        nonlocal refused
        store = stores[number % len(stores)]
        await start.wait()
        while True:
            try:
                current = await store.load(KEY)
                revision = 0 if current is None else current.revision
                messages = () if current is None else current.messages
                update = AskSessionRecord(
                    revision=revision + 1,
                    messages=(*messages, AskMessage(role="user", content=f"writer {number}")),
                )
                if await store.save(KEY, update, revision):
                    return
            except StorageError as error:
                # A busy backend says so with a retryable error; a worker would retry too.
                if not error.retryable:
                    raise
            refused += 1

    async with anyio.create_task_group() as group:
        for number in range(count):
            group.start_soon(writer, number)
        start.set()
    return await stores[0].load(KEY), refused


async def test_eight_concurrent_writers_lose_no_update(backend: Backend) -> None:
    final, _ = await run_writers([backend.make(), backend.make()])  # two "workers"
    assert final is not None
    assert final.revision == 8
    assert sorted(m.content for m in final.messages) == sorted(f"writer {n}" for n in range(8))


class _LastWriterWins:
    """A store without the compare: what the writers test exists to catch."""

    def __init__(self) -> None:
        self.record: AskSessionRecord | None = None

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        await anyio.lowlevel.checkpoint()
        return self.record

    async def save(self, key: SessionKey, record: AskSessionRecord, expected: int) -> bool:
        await anyio.lowlevel.checkpoint()
        self.record = record
        return True


async def test_the_writers_test_catches_a_store_without_compare_and_set() -> None:
    final, refused = await run_writers([_LastWriterWins()])
    assert refused == 0
    assert final is not None and len(final.messages) < 8


async def test_record_at_the_64_message_bound_round_trips(backend: Backend) -> None:
    store = backend.make()
    contents = [
        "x" * 16384,
        "😀" * 8192,  # 16,384 UTF-16 units
        "\ud800 lone surrogate",
        "nul \x00 and control \x1f",
        "quotes \" ' and backslash \\ and </script>",
        "",
        "ünïcödé 中文 עברית",
        "\u2028\u2029 line separators",
    ]
    messages = tuple(
        AskMessage(role="user" if i % 2 == 0 else "assistant", content=contents[i % len(contents)])
        for i in range(64)
    )
    full = AskSessionRecord(revision=1, messages=messages)
    assert await store.save(KEY, full, 0)
    loaded = await backend.make().load(KEY)
    assert loaded == full
    assert loaded is not None and loaded.to_json() == full.to_json()


_CORRUPT = [
    pytest.param(f"not json {MARKER}", id="not-json"),
    pytest.param(f'{{"revision":1,"messages":[],"{MARKER}":1}}', id="unknown-key"),
    pytest.param('{"revision":1}', id="missing-messages"),
    pytest.param(
        '{"revision":1,"messages":['
        + ",".join([f'{{"role":"user","content":"{MARKER}"}}'] * 65)
        + "]}",
        id="65-messages",
    ),
    pytest.param(
        f'{{"revision":1,"messages":[{{"role":"system","content":"{MARKER}"}}]}}', id="bad-role"
    ),
    pytest.param('{"revision":-1,"messages":[]}', id="negative-revision"),
    pytest.param(f'["{MARKER}"]', id="array"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("raw", _CORRUPT)
async def test_corrupt_stored_record_raises_storage_error(backend: Backend, raw: str) -> None:
    store = backend.make()
    assert await store.load(KEY) is None  # the table exists from here on
    await backend.write_raw(KEY, raw, 1)
    with pytest.raises(StorageError) as caught:
        await store.load(KEY)
    assert caught.value.retryable is False
    assert MARKER not in str(caught.value)
    assert caught.value.__cause__ is None


async def test_revision_disagreeing_with_its_record_is_corrupt(backend: Backend) -> None:
    store = backend.make()
    assert await store.load(KEY) is None
    await backend.write_raw(KEY, record(5, "x").to_json(), 1)  # stored revision says 1
    if not backend.separate_revision:
        # The memory store keeps only the record text: its own revision is the revision.
        assert await store.load(KEY) == record(5, "x")
        return
    with pytest.raises(StorageError):
        await store.load(KEY)


async def test_close_is_idempotent_and_refuses_later_use(backend: Backend) -> None:
    store = backend.make()
    assert await store.save(KEY, record(1, "kept"), 0)
    await store.aclose()
    await store.aclose()
    for attempt in (store.load(KEY), store.save(KEY, record(2, "x"), 1)):
        with pytest.raises(StorageError) as caught:
            await attempt
        assert caught.value.retryable is False
    assert await backend.make().load(KEY) == record(1, "kept")  # closing lost nothing


async def test_async_context_manager_opens_and_closes(backend: Backend) -> None:
    async with backend.make() as store:
        assert await store.save(KEY, record(1, "x"), 0)
    with pytest.raises(StorageError):
        await store.load(KEY)


# --- the key mapping --------------------------------------------------------------------------

_ids = st.text(alphabet=st.sampled_from("ab:%3A5-@"), min_size=1, max_size=8) | st.text(
    min_size=1, max_size=12
).filter(lambda s: "\x00" not in s)
_keys = st.builds(SessionKey, _ids, _ids, _ids)


@given(_keys, _keys)
def test_storage_key_is_injective(first: SessionKey, second: SessionKey) -> None:
    assert parse_storage_key(storage_key(first)) == first
    if first != second:
        assert storage_key(first) != storage_key(second)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        (SessionKey("docs", "user-1", "session-1"), "docs:user-1:session-1"),
        (SessionKey("docs", "user:1", "s"), "docs:user%3A1:s"),
        (SessionKey("a%", "b", "c"), "a%25:b:c"),
    ],
)
def test_storage_key_reads_like_the_reference_for_plain_ids(key: SessionKey, text: str) -> None:
    assert storage_key(key) == text


@pytest.mark.parametrize(
    ("key", "error"),
    [
        (SessionKey("", "u", "s"), ValueError),
        (SessionKey("d", "u\x00", "s"), ValueError),
        (SessionKey("d", "u", "\ud800"), ValueError),
        (SessionKey("d", 1, "s"), TypeError),  # type: ignore[arg-type]
        (("d", "u", "s"), TypeError),
    ],
    ids=["empty", "nul", "lone-surrogate", "not-str", "not-a-key"],
)
def test_unstorable_keys_are_refused(key: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        check_session_key(key)
    assert "\ud800" not in str(caught.value)


def test_parse_storage_key_rejects_foreign_text() -> None:
    for text in ("a:b", "a:b:c:d", ""):
        with pytest.raises(ValueError):
            parse_storage_key(text)
