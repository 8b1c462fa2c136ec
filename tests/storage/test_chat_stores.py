"""``open_chat_stores``: three stores on one backend, shared connections, and retention.

Run against real SQLite files, PostgreSQL and Redis (``scripts/test-services.sh``).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentskit_chat.conversation import create_chat_session, define_chat
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import AskMessage, AskSessionRecord
from agentskit_chat.runtime import ChatConfig, ChatMessage
from agentskit_chat.service import SessionKey
from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.server._chat_support import EchoAdapter

pytestmark = pytest.mark.anyio

AT = datetime(2026, 7, 11, tzinfo=UTC)
DAY = 86400.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def url_of(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    if backend == "memory":
        return "memory:"
    return str(request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url"))


async def seed(stores: ChatStores, session_id: str) -> None:
    """One conversation in all three stores."""
    definition = define_chat(id="seed", chat=ChatConfig(adapter=EchoAdapter()))
    session = create_chat_session(definition, session_id=session_id, storage=stores.sessions)
    await session.persist()
    memory = stores.memory(session_id)
    await memory.save([ChatMessage(id="u1", role="user", content="hi", created_at=AT)])
    close = getattr(memory, "aclose", None)
    if close is not None:
        await close()
    record = AskSessionRecord(revision=1, messages=(AskMessage(role="user", content="hi"),))
    assert await stores.ask_sessions.save(SessionKey("docs", "chat", session_id), record, 0)


async def present(stores: ChatStores, session_id: str) -> tuple[bool, bool, bool]:
    memory = stores.memory(session_id)
    messages = await memory.load()
    close = getattr(memory, "aclose", None)
    if close is not None:
        await close()
    return (
        await stores.sessions.load(session_id) is not None,
        bool(messages),
        await stores.ask_sessions.load(SessionKey("docs", "chat", session_id)) is not None,
    )


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgresql", "redis"])
async def test_three_stores_share_one_backend(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = url_of(backend, tmp_path, request)
    session_id = f"shared-{uuid.uuid4().hex[:8]}"
    async with open_chat_stores(url) as stores:
        assert stores.backend == backend
        await seed(stores, session_id)
        assert await present(stores, session_id) == (True, True, True)
        assert await stores.prune() == 0  # no retention setting: nothing is ever deleted
    if backend != "memory":
        async with open_chat_stores(url) as again:  # another worker, same backend
            assert await present(again, session_id) == (True, True, True)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_sql_retention_deletes_only_what_was_idle_longer(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = url_of(backend, tmp_path, request)
    session_id = f"idle-{uuid.uuid4().hex[:8]}"
    async with open_chat_stores(url, retention_days=30) as stores:
        await seed(stores, session_id)
        assert await stores.prune(now=time.time() + 29 * DAY) == 0
        assert await present(stores, session_id) == (True, True, True)
        deleted = await stores.prune(now=time.time() + 31 * DAY)
        assert deleted >= 4  # session, message row, conversation head, Ask record
        assert await present(stores, session_id) == (False, False, False)


async def test_redis_retention_is_a_time_to_live_on_every_key(redis_url: str) -> None:
    session_id = f"ttl-{uuid.uuid4().hex[:8]}"
    async with open_chat_stores(redis_url, retention_days=2) as stores:
        await seed(stores, session_id)
        from redis.asyncio import Redis  # noqa: PLC0415

        client = Redis.from_url(redis_url)
        try:
            keys = [key async for key in client.scan_iter(match=f"*{session_id}*")]
            assert len(keys) >= 3
            for key in keys:
                ttl_ms = await client.pttl(key)
                assert 2 * DAY * 1000 - 60_000 < ttl_ms <= 2 * DAY * 1000
        finally:
            await client.aclose()


@pytest.mark.parametrize("days", [0, -1, float("nan"), float("inf"), True])
def test_retention_must_be_a_positive_number_of_days(days: float) -> None:
    with pytest.raises(ConfigurationError, match="retention_days"):
        open_chat_stores("memory:", retention_days=days)


@pytest.mark.parametrize("url", ["ftp://x", "sqlite://", "sqlite:///:memory:", "memory:x", "nope"])
def test_a_url_that_names_no_shared_backend_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_chat_stores(url)
