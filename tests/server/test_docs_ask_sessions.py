"""The docs server's bound on new Ask conversations per client (issue 24).

The docs server keeps every Ask conversation (its site requires persistence), so each new
``sessionId`` a client sends to ``/api/ask`` (and each question to ``/api/answer``) would be a
stored conversation: a new one takes a token of the client's new-sessions bucket, the very
bucket ``/api/chat`` new sessions take from. Over real sockets, on SQLite always and on
PostgreSQL and Redis when their URLs are set.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.server import RateLimits, create_docs_assistant_app
from agentskit_chat.service import SessionKey
from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.assistant._support import clock, serve, write_docs
from tests.server._chat_support import JSON, submit

pytestmark = pytest.mark.anyio

QUESTION = "How do I set the cache size?"
#: Two new conversations at once, then (about) one an hour: the third is refused.
TWO_NEW = RateLimits(session_burst=2, sessions_per_hour=1)
ASK_LIMITED = {
    "error": {
        "code": "ASK_RATE_LIMITED",
        "message": "The Ask rate limit was exceeded.",
        "retryable": True,
    }
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ask_body(session_id: str, question: str = QUESTION) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.ask",
        "version": 1,
        "sessionId": session_id,
        "messages": [{"role": "user", "content": question}],
    }


def local_client(url: str, address: str) -> httpx.AsyncClient:
    """A client whose socket is bound to loopback ``address`` (its own client address)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=url, transport=transport, timeout=30)


@contextlib.asynccontextmanager
async def docs_server(
    tmp_path: Path, store: str, limits: RateLimits | None
) -> AsyncIterator[tuple[str, DocsAssistant, ChatStores]]:
    """``serve docs/`` as :func:`agentskit_chat.serve` builds it, on a real socket."""
    docs = write_docs(tmp_path / "docs")
    stores = open_chat_stores(store)
    assistant = create_docs_assistant(docs, now=clock, session_store=stores.ask_sessions)
    app = create_docs_assistant_app(assistant, stores=stores, rate_limits=limits)
    async with stores, assistant, serve(app) as url:
        yield url, assistant, stores


async def stored(
    assistant: DocsAssistant, stores: ChatStores, session_id: str, subject: str = "loopback"
) -> bool:
    """Whether the store keeps the conversation (a keyless loopback caller's, by default)."""
    key = SessionKey(assistant.site_id, subject, session_id)
    return await stores.ask_sessions.load(key) is not None


async def test_new_ask_conversations_per_client_are_bounded(tmp_path: Path, store_url: str) -> None:
    run = uuid.uuid4().hex[:8]
    async with (
        docs_server(tmp_path, store_url, TWO_NEW) as (url, assistant, stores),
        local_client(url, "127.0.0.1") as client,
        local_client(url, "127.0.0.2") as other,
    ):
        first = await client.post("/api/ask", json=ask_body(f"a-{run}-1"))
        second = await client.post("/api/ask", json=ask_body(f"a-{run}-2"))
        assert (first.status_code, second.status_code) == (200, 200)
        assert await stored(assistant, stores, f"a-{run}-1")
        refused = await client.post("/api/ask", json=ask_body(f"a-{run}-3"))
        assert refused.status_code == 429
        assert refused.json() == ASK_LIMITED
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["x-request-id"]
        assert refused.headers["cache-control"] == "no-store"
        assert not await stored(assistant, stores, f"a-{run}-3")
        # A conversation the store keeps goes on: it is not new.
        again = await client.post(
            "/api/ask", json=ask_body(f"a-{run}-1", "What does cache_ttl set?")
        )
        assert again.status_code == 200
        assert b'"type":"done"' in again.content
        # /api/answer starts a stored conversation too (a fresh one without a sessionId).
        answered = await client.post("/api/answer", json={"question": QUESTION})
        assert answered.status_code == 429
        assert answered.json() == ASK_LIMITED
        # One bucket with /api/chat: a new chat session is refused as well...
        body = submit(session_id=f"c-{run}", turn_id="t1", event_id="e-1", text="hello")
        chat = await client.post("/api/chat", content=body, headers=JSON)
        assert chat.status_code == 429
        assert chat.json()["error"]["code"] == "SESSION_RATE_LIMITED"
        # ...while another client address has a bucket of its own.
        own = await other.post("/api/ask", json=ask_body(f"a-{run}-4"))
        assert own.status_code == 200
        # In process (the CLI, the docs chat) new conversations are never limited: more of
        # them than the bucket holds.
        for n in range(3):
            outcome = await assistant.ask(QUESTION, session_id=f"p-{run}-{n}")
            assert outcome.outcome == "answer"
            assert await stored(assistant, stores, f"p-{run}-{n}", subject="local")


async def test_a_new_ask_conversation_takes_a_chat_session_token(tmp_path: Path) -> None:
    """The bucket is shared the other way round: Ask conversations use up new chat sessions."""
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    limits = RateLimits(session_burst=1, sessions_per_hour=1)
    async with (
        docs_server(tmp_path, store, limits) as (url, _assistant, _stores),
        local_client(url, "127.0.0.3") as client,
    ):
        assert (await client.post("/api/ask", json=ask_body("b-1"))).status_code == 200
        body = submit(session_id="c-1", turn_id="t1", event_id="e-1", text="hello")
        chat = await client.post("/api/chat", content=body, headers=JSON)
    assert chat.status_code == 429
    assert chat.json()["error"]["code"] == "SESSION_RATE_LIMITED"


async def test_without_rate_limits_new_ask_conversations_are_not_bounded(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    async with (
        docs_server(tmp_path, store, None) as (url, _assistant, _stores),
        local_client(url, "127.0.0.4") as client,
    ):
        statuses = [
            (await client.post("/api/ask", json=ask_body(f"n-{n}"))).status_code for n in range(5)
        ]
    assert statuses == [200] * 5  # TWO_NEW would refuse the third


async def test_workers_share_the_new_ask_conversation_bucket_through_redis(
    tmp_path: Path, redis_url: str
) -> None:
    """Two docs servers on one Redis are two workers: the second sees the first's tokens."""
    run = uuid.uuid4().hex[:8]
    limits = RateLimits(session_burst=2, sessions_per_hour=1, redis_url=redis_url)
    # A loopback address of this run only, so no earlier run's bucket is in the way.
    address = (
        f"127.{uuid.uuid4().int % 250 + 1}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
    )
    async with (
        docs_server(tmp_path / "one", redis_url, limits) as (one, _a, _s),
        docs_server(tmp_path / "two", redis_url, limits) as (two, _b, _t),
        local_client(one, address) as first,
        local_client(two, address) as second,
    ):
        statuses = [
            (await first.post("/api/ask", json=ask_body(f"w-{run}-1"))).status_code,
            (await second.post("/api/ask", json=ask_body(f"w-{run}-2"))).status_code,
            (await first.post("/api/ask", json=ask_body(f"w-{run}-3"))).status_code,
        ]
    assert statuses == [200, 200, 429]
