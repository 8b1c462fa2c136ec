"""The edge of a served app: one rate limit per client for every data route, a bound on new
conversations, the client address from the socket (or a trusted proxy only), allowed host
names.

Real sockets where the client address is loopback anyway; httpx's ASGI transport where the
point is a client address other than 127.0.0.1 (each loopback address 127.x is its own client).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.server import RateLimits, create_app, create_docs_assistant_app
from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import clock, serve, write_docs
from tests.server._chat_support import JSON, lines, submit

pytestmark = pytest.mark.anyio

KEY = "edge-key"
#: A client that may wait a very long time for its next token (its bucket barely refills).
TIGHT = RateLimits(request_burst=3, requests_per_second=0.001)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answer(text: str, request: AdapterRequest) -> str:
    return f"You said: {text}"


def chat() -> ChatDefinition:
    return define_chat(id="edge", chat=ChatConfig(adapter=reply_adapter(answer)))


def client_of(app: Any, address: str, host: str = "localhost") -> httpx.AsyncClient:
    """A client of ``app`` at ``address`` (no lifespan: the site opens on first use)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url=f"http://{host}")


async def post_turn(
    client: httpx.AsyncClient, session_id: str, turn: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = submit(session_id=session_id, turn_id=turn, event_id=f"e-{turn}", text="hello")
    return await client.post("/api/chat", content=body, headers={**JSON, **(headers or {})})


@contextlib.asynccontextmanager
async def docs_app(tmp_path: Path, **options: Any) -> AsyncIterator[Any]:
    """The docs assistant's app over the test docs, its assistant open."""
    docs = write_docs(tmp_path / "docs")
    stores = open_chat_stores("memory:")
    async with stores, create_docs_assistant(docs, now=clock) as assistant:
        yield create_docs_assistant_app(assistant, stores=stores, **options)


# --- one rate limit per client, shared by the data routes -----------------------------------


async def test_chat_ask_and_answer_share_one_bucket_per_client(tmp_path: Path) -> None:
    async with (
        docs_app(tmp_path, rate_limits=TIGHT) as app,
        client_of(app, "127.0.0.2") as first,
        client_of(app, "127.0.0.3") as second,
    ):
        chat_turn = await post_turn(first, "s-1", "t1")
        assert chat_turn.status_code == 200
        asked = await first.post(
            "/api/ask",
            json={
                "protocol": "agentskit.chat.ask",
                "version": 1,
                "messages": [{"role": "user", "content": "How do I set the cache size?"}],
            },
        )
        assert asked.status_code == 200
        answered = await first.post("/api/answer", json={"question": "Setup guide"})
        assert answered.status_code == 200
        # The bucket of three is empty, whichever route comes next; in its own shape.
        refused_chat = await post_turn(first, "s-1", "t2")
        assert refused_chat.status_code == 429
        assert int(refused_chat.headers["retry-after"]) >= 1
        assert refused_chat.json() == {
            "error": {
                "version": 1,
                "code": "REQUEST_RATE_LIMITED",
                "message": "Too many requests; wait before trying again.",
                "retryable": True,
            }
        }
        refused_answer = await first.post("/api/answer", json={"question": "Setup guide"})
        assert refused_answer.status_code == 429
        assert int(refused_answer.headers["retry-after"]) >= 1
        assert refused_answer.json() == {
            "error": {
                "code": "ASK_RATE_LIMITED",
                "message": "The Ask rate limit was exceeded.",
                "retryable": True,
            }
        }
        refused_ask = await first.post("/api/ask", content=b"{")  # body never read
        assert refused_ask.status_code == 429
        # Another client has a bucket of its own.
        assert (await post_turn(second, "s-2", "t1")).status_code == 200
        # The page, its files and /healthz are not data routes.
        assert (await first.get("/")).status_code == 200
        assert (await first.get("/healthz")).status_code == 200


async def test_the_chat_alone_is_limited_over_a_socket() -> None:
    app = create_app(chat(), rate_limits=RateLimits(request_burst=5, requests_per_second=0.01))
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        statuses = [(await post_turn(client, "s-1", f"t{n}")).status_code for n in range(8)]
        resumed = await client.get("/api/chat", params={"sessionId": "s-1"})
    assert statuses == [200] * 5 + [429] * 3
    assert resumed.status_code == 429  # reading a session is a data route too


async def test_without_rate_limits_nothing_is_refused() -> None:
    app = create_app(chat(), rate_limits=None)
    async with client_of(app, "127.0.0.1") as client:
        statuses = {(await post_turn(client, f"s-{n}", "t1")).status_code for n in range(80)}
    assert statuses == {200}


# --- new conversations ------------------------------------------------------------------------


async def test_new_conversations_per_client_are_bounded_and_nothing_is_stored_past_it() -> None:
    stores = open_chat_stores("memory:")
    limits = RateLimits(session_burst=2, sessions_per_hour=1)
    app = create_app(chat(), store=stores, rate_limits=limits)
    async with stores, client_of(app, "127.0.0.4") as client, client_of(app, "127.0.0.5") as other:
        assert (await post_turn(client, "s-1", "t1")).status_code == 200
        assert (await post_turn(client, "s-2", "t1")).status_code == 200
        refused = await post_turn(client, "s-3", "t1")
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json() == {
            "error": {
                "version": 1,
                "code": "SESSION_RATE_LIMITED",
                "message": "Too many new conversations; wait before starting another.",
                "retryable": True,
            }
        }
        assert await stores.sessions.load("s-3") is None
        memory = stores.memory("s-3")
        assert list(await memory.load()) == []
        # A conversation that exists goes on; another client starts its own.
        continued = await post_turn(client, "s-1", "t2")
        assert lines(continued.content)[-1]["payload"]["status"] == "complete"
        assert (await post_turn(other, "s-4", "t1")).status_code == 200


async def test_workers_share_the_buckets_through_redis(redis_url: str) -> None:
    """Two apps on one Redis store are two workers: the second sees the first's tokens."""
    address = f"127.9.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
    limits = RateLimits(request_burst=4, requests_per_second=0.001)
    one = create_app(chat(), store=redis_url, rate_limits=limits)
    two = create_app(chat(), store=redis_url, rate_limits=limits)
    run = uuid.uuid4().hex[:8]
    statuses = []
    async with (
        one.state.chat_site,
        two.state.chat_site,
        client_of(one, address) as first,
        client_of(two, address) as second,
    ):
        for n in range(6):
            client = first if n % 2 == 0 else second
            statuses.append((await post_turn(client, f"r-{run}", f"t{n}")).status_code)
    assert statuses == [200, 200, 200, 200, 429, 429]


async def test_an_explicit_redis_shares_the_buckets_of_sqlite_workers(
    redis_url: str, tmp_path: Path
) -> None:
    address = f"127.8.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
    limits = RateLimits(request_burst=2, requests_per_second=0.001, redis_url=redis_url)
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    one = create_app(chat(), store=store, rate_limits=limits)
    two = create_app(chat(), store=store, rate_limits=limits)
    async with (
        one.state.chat_site,
        two.state.chat_site,
        client_of(one, address) as first,
        client_of(two, address) as second,
    ):
        statuses = [
            (await post_turn(first, "x-1", "t1")).status_code,
            (await post_turn(second, "x-1", "t2")).status_code,
            (await post_turn(first, "x-1", "t3")).status_code,
        ]
    assert statuses == [200, 200, 429]


@pytest.mark.parametrize(
    "fields",
    [
        {"request_burst": 0},
        {"session_burst": 1.5},
        {"requests_per_second": 0},
        {"sessions_per_hour": float("inf")},
        {"redis_url": "postgresql://db/chat"},
    ],
)
def test_invalid_rate_limits_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RateLimits(**fields)


# --- the client address ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forwarding",
    [
        {"x-real-ip": "203.0.113.9"},
        {"forwarded": "for=203.0.113.9"},
        {"x-forwarded-for": ""},
        {"x-forwarded-for": "203.0.113.9"},
    ],
    ids=["x-real-ip", "forwarded", "empty-x-forwarded-for", "x-forwarded-for"],
)
async def test_a_proxied_request_is_not_a_loopback_client(forwarding: dict[str, str]) -> None:
    """Through a proxy on this machine, a keyless server must not take the world for itself."""
    async with serve(create_app(chat())) as url, httpx.AsyncClient(base_url=url) as client:
        refused = await post_turn(client, "p-1", "t1", forwarding)
        plain = await post_turn(client, "p-1", "t1")
    assert refused.status_code == 401
    assert plain.status_code == 200


async def test_a_trusted_proxy_names_the_client_for_the_rule_and_the_limits() -> None:
    app = create_app(
        chat(),
        forwarded_allow_ips=["127.0.0.1", "10.0.0.0/8"],
        rate_limits=RateLimits(request_burst=1, requests_per_second=0.001),
    )
    async with client_of(app, "127.0.0.1") as proxy, client_of(app, "127.0.0.7") as untrusted:
        # The proxy says the client is remote: refused without a key.
        remote = await post_turn(proxy, "q-1", "t1", {"x-forwarded-for": "203.0.113.9"})
        assert remote.status_code == 401
        # A client on the proxy's loopback, behind a second trusted hop.
        local = {"x-forwarded-for": "127.0.0.5, 10.1.2.3"}
        assert (await post_turn(proxy, "q-2", "t1", local)).status_code == 200
        # Its bucket is that client's: the next request from it is limited...
        assert (await post_turn(proxy, "q-2", "t2", local)).status_code == 429
        # ...but not another client behind the same proxy.
        other = {"x-forwarded-for": "127.0.0.6"}
        assert (await post_turn(proxy, "q-3", "t1", other)).status_code == 200
        # A peer that is no trusted proxy cannot name anyone.
        named = {"x-forwarded-for": "127.0.0.6"}
        assert (await post_turn(untrusted, "q-4", "t1", named)).status_code == 401


def test_an_unusable_trusted_proxy_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="trusted proxy"):
        create_app(chat(), forwarded_allow_ips=["not-an-address"])


# --- host names --------------------------------------------------------------------------------


async def test_a_keyless_server_answers_loopback_host_names_only() -> None:
    async with serve(create_app(chat())) as url, httpx.AsyncClient(base_url=url) as client:
        port = url.rsplit(":", 1)[1]
        names = ["localhost", f"localhost:{port}", "127.0.0.1", f"[::1]:{port}", "app.localhost"]
        allowed = [(await client.get("/", headers={"host": name})).status_code for name in names]
        rebound = await post_turn(client, "h-1", "t1", {"host": f"attacker.example:{port}"})
        page = await client.get("/", headers={"host": "attacker.example"})
        health = await client.get("/healthz", headers={"host": "10.0.0.5:8000"})
    assert allowed == [200] * len(names)
    assert rebound.status_code == 400
    assert rebound.json()["error"]["code"] == "REQUEST_HOST_NOT_ALLOWED"
    assert rebound.json()["error"]["retryable"] is False
    assert page.status_code == 400
    assert page.json()["error"]["code"] == "ASK_INVALID_REQUEST"
    assert "attacker" not in page.text
    assert health.status_code == 200


async def test_allowed_hosts_replace_the_default_and_a_key_allows_any() -> None:
    listed = create_app(chat(), allowed_hosts=["chat.example.com", "*.internal"])
    keyed = create_app(chat(), api_key=KEY)
    bearer = {"authorization": f"Bearer {KEY}"}
    async with client_of(listed, "127.0.0.1", "chat.example.com") as named:
        assert (await post_turn(named, "n-1", "t1")).status_code == 200
        assert (await named.get("/", headers={"host": "a.b.internal"})).status_code == 200
        assert (await named.get("/", headers={"host": "localhost"})).status_code == 400
    async with client_of(keyed, "203.0.113.9", "chat.example.org") as anywhere:
        assert (await post_turn(anywhere, "k-1", "t1", bearer)).status_code == 200
