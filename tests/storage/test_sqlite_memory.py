"""The SQLite chat memory: round trips, validation on load, isolation, atomic saves."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError, StorageError
from agentskit_chat.protocol import MessageFilePart, MessageTextPart, ToolCall
from agentskit_chat.runtime import ChatMemory, ChatMessage
from agentskit_chat.storage import SQLiteChatMemory
from agentskit_chat.storage._sqlite_memory import DEFAULT_MEMORY_TABLE, _decode, _encode
from tests._loop import no_blocking

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 7, 13, 9, 0, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "chat.db"


def conversation(tag: str = "", size: int = 4) -> tuple[ChatMessage, ...]:
    """A conversation with tool calls, metadata, parts and every status."""
    messages: list[ChatMessage] = [
        ChatMessage(
            id=f"u{tag}",
            role="user",
            content=f"delete the file {tag} — ünïcödé \U0001f600",
            created_at=T0,
            parts=(
                MessageTextPart(type="text", text="see attached"),
                MessageFilePart(type="file", source="https://example.test/a.txt", filename="a"),
            ),
        ),
        ChatMessage(
            id=f"a{tag}",
            role="assistant",
            content="Deleting.",
            created_at=T0 + timedelta(milliseconds=5),
            status="complete",
            tool_calls=(
                ToolCall(
                    id="c1", name="delete", args={"path": "a.txt", "n": [1, 2.5]}, status="running"
                ),
                ToolCall(id="c2", name="add", args={}, status="complete", result="4"),
                ToolCall(
                    id="c3",
                    name="delete",
                    args={"path": "b"},
                    status="error",
                    error="Permission denied: no",
                ),
            ),
            metadata={"answer": {"kind": "local", "score": 0.5}, "flags": [True, None]},
        ),
        ChatMessage(id=f"t{tag}", role="tool", content="4", created_at=T0, tool_call_id="c2"),
        ChatMessage(id=f"e{tag}", role="assistant", content="", created_at=T0, status="error"),
    ]
    return tuple(messages[:size])


def wire(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Messages compared as their wire records (loaded metadata holds tuples, not lists)."""
    return [message.to_wire() for message in messages]


def test_sqlite_chat_memory_is_a_chat_memory(db: Path) -> None:
    assert isinstance(SQLiteChatMemory(db, "c1"), ChatMemory)


@pytest.mark.parametrize(
    ("conversation_id", "options"),
    [("", {}), ("c", {"table": "bad name"}), ("c", {"busy_timeout": -1})],
)
def test_bad_arguments_are_refused(db: Path, conversation_id: str, options: Any) -> None:
    with pytest.raises(ValueError):
        SQLiteChatMemory(db, conversation_id, **options)


async def test_round_trip_keeps_tool_calls_metadata_and_parts(db: Path) -> None:
    messages = conversation()
    async with no_blocking():
        async with SQLiteChatMemory(db, "c1") as memory:
            assert await memory.load() == ()
            await memory.save(messages)
        async with SQLiteChatMemory(db, "c1") as again:
            loaded = await again.load()
    assert wire(loaded) == wire(messages)
    assert all(isinstance(message, ChatMessage) for message in loaded)


async def test_save_replaces_the_whole_conversation(db: Path) -> None:
    async with no_blocking(), SQLiteChatMemory(db, "c1") as memory:
        await memory.save(conversation(size=4))
        await memory.save(conversation(size=1))
        assert wire(await memory.load()) == wire(conversation(size=1))
        await memory.save(())
        assert wire(await memory.load()) == wire(())


async def test_two_conversations_in_one_file_are_isolated(db: Path) -> None:
    left, right = SQLiteChatMemory(db, "left"), SQLiteChatMemory(db, "right")
    async with no_blocking(), left, right:
        await left.save(conversation("L"))
        await right.save(conversation("R", size=2))
        await left.save(conversation("L", size=3))
        assert wire(await left.load()) == wire(conversation("L", size=3))
        assert wire(await right.load()) == wire(conversation("R", size=2))


async def test_lone_surrogates_survive_a_round_trip(db: Path) -> None:
    message = ChatMessage(id="u", role="user", content="half \ud800 pair", created_at=T0)
    async with no_blocking(), SQLiteChatMemory(db, "c") as memory:
        await memory.save([message])
        assert wire(await memory.load()) == wire((message,))


def corrupt(db: Path, record: Any, position: int = 0) -> None:
    with sqlite3.connect(db) as connection:
        connection.execute(
            f"INSERT OR REPLACE INTO {DEFAULT_MEMORY_TABLE}"
            " (conversation_id, position, record, updated_at) VALUES ('c1', ?, ?, 0)",
            (position, record),
        )


@pytest.mark.parametrize(
    "record",
    [
        "not json",
        "{}",
        '{"id": "", "role": "user", "content": "x", "status": "complete",'
        ' "createdAt": "2026-07-13T09:00:00.000Z"}',
        '{"id": "u", "role": "robot", "content": "x", "status": "complete",'
        ' "createdAt": "2026-07-13T09:00:00.000Z"}',
        '{"id": "u", "role": "user", "content": "x", "status": "complete",'
        ' "createdAt": "0000-01-01T00:00:00.000Z"}',
        '{"id": "u", "role": "user", "content": NaN, "status": "complete",'
        ' "createdAt": "2026-07-13T09:00:00.000Z"}',
        "[" * 5000 + "]" * 5000,
        b"\x00binary",
        42,
    ],
    ids=[
        "not-json",
        "empty-object",
        "empty-id",
        "bad-role",
        "year-zero",
        "nan",
        "too-deep",
        "blob",
        "integer",
    ],
)
async def test_an_invalid_stored_row_raises_storage_error(db: Path, record: Any) -> None:
    async with SQLiteChatMemory(db, "c1") as memory:
        await memory.save(conversation(size=2))
    corrupt(db, record, position=1)
    async with no_blocking(), SQLiteChatMemory(db, "c1") as memory:
        with pytest.raises(StorageError) as caught:
            await memory.load()
    assert caught.value.retryable is False
    assert str(caught.value) == "The SQLite chat memory holds invalid messages."


async def test_saving_an_oversized_conversation_is_refused_and_writes_nothing(db: Path) -> None:
    huge = ChatMessage(
        id="m",
        role="assistant",
        content="x",
        created_at=T0,
        metadata={"items": list(range(10_001))},
    )
    async with SQLiteChatMemory(db, "c1") as memory:
        await memory.save(conversation(size=1))
        with pytest.raises(ProtocolError):
            await memory.save([huge])
        assert wire(await memory.load()) == wire(conversation(size=1))


async def test_concurrent_saves_leave_one_whole_version(db: Path) -> None:
    versions = [conversation(f"v{n}", size=1 + n % 4) for n in range(8)]
    memories = [SQLiteChatMemory(db, "shared") for _ in range(4)]
    try:
        async with no_blocking():
            for _ in range(5):
                async with anyio.create_task_group() as group:
                    for index, version in enumerate(versions):
                        group.start_soon(memories[index % 4].save, version)
                assert wire(await memories[0].load()) in [wire(v) for v in versions]
    finally:
        for memory in memories:
            await memory.aclose()


async def test_a_cancelled_save_leaves_the_old_or_the_new_version(db: Path) -> None:
    old, new = conversation("old", size=2), conversation("new", size=4)
    async with SQLiteChatMemory(db, "c1") as memory:
        await memory.save(old)
        for attempt in range(10):
            await memory.save(old)
            with anyio.CancelScope() as scope:
                if attempt % 2:
                    scope.cancel()  # cancelled before the thread starts
                async with anyio.create_task_group() as group:
                    group.start_soon(memory.save, new)
                    await anyio.sleep(0)
                    scope.cancel()  # cancelled while the thread works
            assert wire(await memory.load()) in (wire(old), wire(new))


async def test_closed_memory_raises_storage_error(db: Path) -> None:
    memory = SQLiteChatMemory(db, "c1")
    await memory.save(conversation(size=1))
    await memory.aclose()
    await memory.aclose()
    with pytest.raises(StorageError):
        await memory.load()
    memory.close()


async def test_in_memory_database_works(tmp_path: Path) -> None:
    async with SQLiteChatMemory(":memory:", "c1") as memory:
        await memory.save(conversation())
        assert wire(await memory.load()) == wire(conversation())


async def test_busy_file_is_a_retryable_storage_error(db: Path) -> None:
    async with SQLiteChatMemory(db, "c1", busy_timeout=0) as memory:
        await memory.save(conversation(size=1))
        blocker = sqlite3.connect(db, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StorageError) as caught:
                await memory.save(conversation(size=2))
            assert caught.value.retryable is True
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert wire(await memory.load()) == wire(conversation(size=1))


# --- the row codec ----------------------------------------------------------------------------

_text = st.text(max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_calls = st.builds(
    ToolCall,
    id=st.text(min_size=1, max_size=10),
    name=st.text(min_size=1, max_size=10),
    args=st.dictionaries(_text, _json, max_size=3),
    status=st.sampled_from(["pending", "running", "complete", "error", "requires_confirmation"]),
)
_messages = st.builds(
    ChatMessage,
    id=st.text(min_size=1, max_size=10),
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=_text,
    created_at=st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ).map(lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000)),
    status=st.sampled_from(["pending", "streaming", "complete", "error"]),
    tool_calls=st.none() | st.lists(_calls, max_size=3).map(tuple),
    metadata=st.none() | st.dictionaries(_text, _json, max_size=3),
)


@settings(max_examples=150)
@given(st.lists(_messages, max_size=6))
def test_rows_decode_to_the_messages_they_encode(messages: Sequence[ChatMessage]) -> None:
    assert wire(_decode(_encode(messages))) == wire(messages)
