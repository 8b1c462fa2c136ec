"""The connection lifecycle every SQLite store shares: opening, errors, closing, transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import AskSessionRecord, SessionSnapshot
from agentskit_chat.runtime import ChatMessage
from agentskit_chat.service import SessionKey
from agentskit_chat.storage import SQLiteAskSessionStore, SQLiteChatMemory, SQLiteSessionStorage
from agentskit_chat.storage._sqlite_file import immediate_transaction
from tests._loop import no_blocking

pytestmark = pytest.mark.anyio

KEY = SessionKey("docs", "user-1", "session-1")
SNAPSHOT = SessionSnapshot.model_validate(
    {
        "protocol": "agentskit.chat.session",
        "version": 1,
        "session_id": "session-1",
        "definition_id": "support",
        "definition_revision": 1,
        "updated_at": "2026-07-11T00:00:00.000Z",
        "cursor": 1,
        "conversation": {"state": "idle", "decisions": []},
        "confirmations": [],
    }
)
MESSAGE = ChatMessage(
    id="u1", role="user", content="hello", created_at=datetime(2026, 7, 13, tzinfo=UTC)
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Store:
    """One SQLite store: how to build it, read with it and write with it."""

    name: str
    table: str
    make: Callable[..., Any]
    read: Callable[[Any], Coroutine[Any, Any, object]]
    write: Callable[[Any], Coroutine[Any, Any, object]]


STORES = [
    Store(
        "SQLite Ask session store",
        "agentskit_ask_sessions",
        SQLiteAskSessionStore,
        lambda store: store.load(KEY),
        lambda store: store.save(KEY, AskSessionRecord(revision=1, messages=()), 0),
    ),
    Store(
        "SQLite session storage",
        "agentskit_chat_sessions",
        SQLiteSessionStorage,
        lambda storage: storage.load("session-1"),
        lambda storage: storage.save(SNAPSHOT, None),
    ),
    Store(
        "SQLite chat memory",
        "agentskit_chat_messages",
        lambda path, **options: SQLiteChatMemory(path, "c1", **options),
        lambda memory: memory.load(),
        lambda memory: memory.save((MESSAGE,)),
    ),
]


@pytest.fixture(params=STORES, ids=[store.name for store in STORES])
def store(request: pytest.FixtureRequest) -> Store:
    value: Store = request.param
    return value


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        names = {row[0] for row in rows}
    connection.close()
    return names


async def test_entering_creates_the_table_in_wal_mode_before_any_call(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    async with no_blocking(), store.make(path):
        pass
    assert store.table in tables(path)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


async def test_nothing_is_opened_until_first_use(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    opened = store.make(path)
    assert not path.exists()
    await store.write(opened)
    assert await store.read(opened) is not None
    await opened.aclose()


async def test_a_closed_store_says_so_and_closing_is_idempotent(
    store: Store, tmp_path: Path
) -> None:
    opened = store.make(tmp_path / "store.db")
    await store.write(opened)
    await opened.aclose()
    await opened.aclose()
    opened.close()
    for call in (store.read, store.write):
        with pytest.raises(StorageError) as caught:
            await call(opened)
        assert caught.value.message == f"The {store.name} is closed."
        assert caught.value.retryable is False


async def test_a_busy_file_is_unavailable_and_retryable(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with store.make(path, busy_timeout=0) as opened:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StorageError) as caught:
                await store.write(opened)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert caught.value.message == f"The {store.name} is unavailable."
        assert caught.value.retryable is True
        await store.write(opened)


async def test_a_file_that_is_not_a_database_fails_without_retry(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not a database file at all" * 100)
    opened = store.make(path)
    with pytest.raises(StorageError) as caught:
        await store.read(opened)
    assert caught.value.message == f"The {store.name} failed."
    assert caught.value.retryable is False
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ is True
    await opened.aclose()


@pytest.mark.parametrize("busy_timeout", [-1, -0.001])
def test_a_negative_busy_timeout_is_refused(
    store: Store, tmp_path: Path, busy_timeout: float
) -> None:
    with pytest.raises(ValueError, match="busy_timeout must be >= 0"):
        store.make(tmp_path / "store.db", busy_timeout=busy_timeout)


@pytest.mark.parametrize(
    ("failure", "kept"),
    [(None, [1, 2]), (RuntimeError("body failed"), [1]), (KeyboardInterrupt(), [1])],
)
def test_an_immediate_transaction_commits_or_rolls_back_whole(
    failure: BaseException | None, kept: list[int]
) -> None:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (n INTEGER)")
    connection.execute("INSERT INTO t VALUES (1)")
    try:
        with immediate_transaction(connection):
            connection.execute("INSERT INTO t VALUES (2)")
            if failure is not None:
                raise failure
    except BaseException as caught:
        assert caught is failure
    assert not connection.in_transaction
    assert [row[0] for row in connection.execute("SELECT n FROM t ORDER BY n")] == kept
    connection.close()


async def test_stores_opening_one_new_file_at_once_wait_for_each_other(
    store: Store, tmp_path: Path
) -> None:
    for attempt in range(20):
        path = tmp_path / f"store-{attempt}.db"
        stores = [store.make(path) for _ in range(8)]
        try:
            async with anyio.create_task_group() as group:
                for opened in stores:
                    group.start_soon(store.write, opened)
        finally:
            for opened in stores:
                await opened.aclose()
        assert store.table in tables(path)
