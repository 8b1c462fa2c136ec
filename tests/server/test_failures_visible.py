"""Failures made visible (issue 24, item 4): log records, metrics, ``/healthz`` pinging the
store, leases released once the store is back, and no ``complete`` turn that was not stored.

Outages are real: PostgreSQL and Redis are reached through a forwarder that a test cuts (the
drivers see their own connection errors), SQLite is locked by another connection; the shared
servers are never stopped. Every app is served by uvicorn on a real socket.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import anyio
import httpx
import pytest

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.runtime import ChatMemory, ChatMessage
from agentskit_chat.server import RateLimits, create_app, create_docs_assistant_app
from agentskit_chat.server._observe import HTTP_LOGGER, LEASE_LOGGER, STORE_LOGGER, TURN_LOGGER
from agentskit_chat.storage import ChatStores, SQLiteAskSessionStore, open_chat_stores
from tests.assistant._support import clock, serve, write_docs
from tests.server._chat_support import JSON, EchoAdapter, definition, lines, submit
from tests.server._cut_proxy import cut_proxy

pytestmark = pytest.mark.anyio

#: How soon after the store is back a session must take a new turn (the issue's bound).
BACK_WITHIN_S = 5.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == logger]


def _assert_private(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    """No record of ours holds a session id, a prompt, an answer or a URL."""
    ours = [record for record in caplog.records if record.name.startswith("agentskit_chat.")]
    assert ours
    for record in ours:
        text = repr(record.__dict__) + record.getMessage()
        for secret in secrets:
            assert secret not in text


def _sample(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` in the Prometheus text ``metrics``
    (0 when there is none)."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + ("{" if labels else " ")):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _turn(
    client: httpx.AsyncClient, session_id: str, turn_id: str, text: str
) -> httpx.Response:
    body = submit(session_id=session_id, turn_id=turn_id, event_id=f"e-{turn_id}", text=text)
    return await client.post("/api/chat", content=body, headers=JSON)


async def _eventually_accepted(
    client: httpx.AsyncClient, session_id: str, turn_id: str, within: float
) -> httpx.Response:
    """Submit ``turn_id`` until it is not refused as busy (or ``within`` seconds passed)."""
    deadline = anyio.current_time() + within
    while True:
        response = await _turn(client, session_id, turn_id, "again")
        if response.status_code != 409 or anyio.current_time() >= deadline:
            return response
        await anyio.sleep(0.1)


# --- an outage: logs, metrics, /healthz ------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgresql", "redis"])
async def test_an_outage_is_logged_counted_and_fails_healthz_until_the_store_answers(
    backend: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentskit_chat")
    upstream = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    session_id = f"outage-{uuid.uuid4().hex[:8]}"
    async with cut_proxy(upstream) as proxy:
        app = create_app(definition(EchoAdapter()), store=proxy.url(upstream), rate_limits=None)
        async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await _turn(client, session_id, "turn-1", "first question")).status_code == 200
            assert (await client.get("/healthz")).status_code == 200
            proxy.cut()
            failed = await _turn(client, session_id, "turn-2", "second question")
            health = await client.get("/healthz")
            metrics = (await client.get("/metrics")).text
            proxy.restore()
            deadline = anyio.current_time() + BACK_WITHIN_S
            while (await client.get("/healthz")).status_code != 200:
                assert anyio.current_time() < deadline, "/healthz still fails"
                await anyio.sleep(0.1)
            again = await _turn(client, session_id, "turn-3", "third question")

    assert failed.status_code == 500
    assert failed.json()["error"]["code"] == "SERVER_INTERNAL"
    assert (health.status_code, health.json()) == (
        503,
        {"status": "unavailable", "failing": ["store"]},
    )
    assert again.status_code == 200
    assert lines(again.content)[-1]["payload"]["status"] == "complete"

    stored = _records(caplog, STORE_LOGGER)
    assert stored
    for record in stored:
        assert record.event == "store.error"  # type: ignore[attr-defined]
        assert record.store == backend  # type: ignore[attr-defined]
        assert record.error_class in ("StorageError", "CancelledError")  # type: ignore[attr-defined]
        assert isinstance(record.duration_ms, float)  # type: ignore[attr-defined]
    operations = {record.operation for record in stored}  # type: ignore[attr-defined]
    assert "session_load" in operations  # the failed turn's first store call
    assert "ping" in operations  # the failed /healthz
    (http,) = [r for r in _records(caplog, HTTP_LOGGER) if r.route == "/api/chat"]  # type: ignore[attr-defined]
    assert (http.status, http.error_code, http.error_class) == (  # type: ignore[attr-defined]
        500,
        "SERVER_INTERNAL",
        "StorageError",
    )
    assert http.store == backend  # type: ignore[attr-defined]
    assert _sample(metrics, "agentskit_chat_store_errors_total", store=backend) >= 2
    assert (
        _sample(metrics, "agentskit_chat_http_server_errors_total", route="/api/chat", status="500")
        == 1
    )
    assert _sample(metrics, "agentskit_chat_http_server_errors_total", route="/healthz") == 1
    assert session_id not in metrics and "question" not in metrics
    _assert_private(caplog, session_id, "question", "Echo", str(proxy.port))


# --- a turn whose store write fails ----------------------------------------------------------


class _Blip:
    """Makes the store fail right when a turn saves its messages, until :meth:`restore`."""

    def __init__(self, fail: Callable[[], None], restore: Callable[[], None]) -> None:
        self._fail = fail
        self._restore = restore
        self.armed = False

    def before_save(self) -> None:
        if self.armed:
            self.armed = False
            self._fail()

    def restore(self) -> None:
        self._restore()


class _BlipMemory:
    """A chat memory of the real store that starts the blip as the turn saves."""

    def __init__(self, inner: ChatMemory, blip: _Blip) -> None:
        self._inner = inner
        self._blip = blip

    async def load(self) -> Sequence[ChatMessage]:
        return await self._inner.load()

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        self._blip.before_save()
        await self._inner.save(messages)

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


def _with_blip(stores: ChatStores, blip: _Blip) -> ChatStores:
    return dataclasses.replace(
        stores, _memory=lambda session_id: _BlipMemory(stores.memory(session_id), blip)
    )


@contextlib.asynccontextmanager
async def _blipping_stores(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ChatStores, _Blip]]:
    """Real stores of ``backend`` whose outage starts as a turn saves its messages."""
    if backend == "sqlite":
        path = tmp_path / "chat.db"
        locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

        def lock() -> None:
            locker.execute("BEGIN EXCLUSIVE")  # every other writer waits, then fails

        def unlock() -> None:
            if locker.in_transaction:
                locker.execute("ROLLBACK")

        stores = open_chat_stores(f"sqlite:///{path}")
        blip = _Blip(lock, unlock)
        try:
            async with stores:
                yield _with_blip(stores, blip), blip
        finally:
            unlock()
            locker.close()
        return
    upstream = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    async with cut_proxy(upstream) as proxy:
        stores = open_chat_stores(proxy.url(upstream))
        blip = _Blip(proxy.cut, proxy.restore)
        async with stores:
            yield _with_blip(stores, blip), blip


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
async def test_a_turn_not_stored_is_never_complete_and_its_lease_is_freed_once_the_store_is_back(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentskit_chat")
    session_id = f"blip-{uuid.uuid4().hex[:8]}"
    async with _blipping_stores(backend, request, tmp_path) as (stores, blip):
        app = create_app(definition(EchoAdapter()), store=stores, rate_limits=None)
        async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
            first = await _turn(client, session_id, "turn-1", "first")
            assert lines(first.content)[-1]["payload"]["status"] == "complete"
            blip.armed = True
            cut = await _turn(client, session_id, "turn-2", "second")
            blip.restore()
            back = await _eventually_accepted(client, session_id, "turn-3", BACK_WITHIN_S)
            stored = await client.get("/api/chat", params={"sessionId": session_id})
            metrics = (await client.get("/metrics")).text

    assert cut.status_code == 200  # the stream had started
    events = lines(cut.content)
    assert events
    assert all(event["payload"].get("status") != "complete" for event in events)
    last = events[-1]
    assert last["event"] == "server.turn.diagnostic"
    assert last["payload"]["code"] == "SERVER_INTERNAL"
    # The lease was freed within the bound after the store came back.
    assert back.status_code == 200
    assert lines(back.content)[-1]["payload"]["status"] == "complete"
    # What the client reads back is what was stored: the second answer never was.
    contents = [message["content"] for message in stored.json()["payload"]["messages"]]
    assert "Echo: first" in contents
    assert "Echo: second" not in contents
    assert "Echo: again" in contents

    (failed,) = _records(caplog, TURN_LOGGER)
    assert failed.event == "chat.turn.failed"  # type: ignore[attr-defined]
    assert failed.outcome == "store_error"  # type: ignore[attr-defined]
    assert failed.error_code == "SERVER_INTERNAL"  # type: ignore[attr-defined]
    assert failed.store == backend  # type: ignore[attr-defined]
    released = _records(caplog, LEASE_LOGGER)
    assert [record.event for record in released] == ["chat.lease.released"]  # type: ignore[attr-defined]
    assert _sample(metrics, "agentskit_chat_turns_finished_total", outcome="store_error") == 1
    assert _sample(metrics, "agentskit_chat_turns_finished_total", outcome="completed") == 2
    assert _sample(metrics, "agentskit_chat_lease_late_releases_total", released="true") == 1
    assert _sample(metrics, "agentskit_chat_store_errors_total", operation="memory_save") == 1
    _assert_private(caplog, session_id, "first", "second", "Echo")


# --- the rate limiter's Redis ----------------------------------------------------------------


async def test_a_rate_limiter_outage_is_a_logged_and_counted_500(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentskit_chat")
    async with cut_proxy(redis_url) as proxy:
        limits = RateLimits(redis_url=proxy.url(redis_url))
        app = create_app(definition(EchoAdapter()), rate_limits=limits)
        async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await _turn(client, "limited-1", "turn-1", "hello")).status_code == 200
            proxy.cut()
            failed = await _turn(client, "limited-1", "turn-2", "hello")
            metrics = (await client.get("/metrics")).text
    assert failed.status_code == 500
    assert failed.json()["error"]["code"] == "SERVER_INTERNAL"
    (store,) = _records(caplog, STORE_LOGGER)
    assert (store.store, store.operation, store.error_class) == (  # type: ignore[attr-defined]
        "redis",
        "rate_limit",
        "RateLimitError",
    )
    (http,) = _records(caplog, HTTP_LOGGER)
    assert (http.route, http.status, http.error_class) == (  # type: ignore[attr-defined]
        "/api/chat",
        500,
        "RateLimitError",
    )
    assert (
        _sample(metrics, "agentskit_chat_store_errors_total", store="redis", operation="rate_limit")
        == 1
    )
    _assert_private(caplog, "limited-1", "hello", str(proxy.port))


# --- metrics of ordinary turns ---------------------------------------------------------------


async def test_metrics_count_turns_busy_refusals_and_rate_limits_behind_the_key() -> None:
    gate = anyio.Event()
    adapter = EchoAdapter(gate=gate)
    app = create_app(
        definition(adapter),
        api_key="metrics-key",
        rate_limits=RateLimits(request_burst=2, requests_per_second=0.01),
    )
    key = {"authorization": "Bearer metrics-key"}
    async with serve(app) as url, httpx.AsyncClient(base_url=url, headers=key) as client:
        body = submit(session_id="counted-1", turn_id="turn-1", text="secret words")
        async with client.stream("POST", "/api/chat", content=body, headers=JSON) as held:
            await adapter.started.wait()
            busy = await _turn(client, "counted-1", "turn-2", "more")
            gate.set()
            await held.aread()
        limited = await _turn(client, "counted-1", "turn-3", "more")
        unauthorized = await client.get("/metrics", headers={"authorization": "Bearer wrong"})
        metrics = await client.get("/metrics")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "SESSION_BUSY"
    assert limited.status_code == 429
    assert unauthorized.status_code == 401
    assert metrics.status_code == 200
    text = metrics.text
    assert _sample(text, "agentskit_chat_turns_started_total") == 1
    assert _sample(text, "agentskit_chat_turns_finished_total", outcome="completed") == 1
    assert _sample(text, "agentskit_chat_turn_duration_seconds_count", outcome="completed") == 1
    assert _sample(text, "agentskit_chat_busy_refusals_total") == 1
    assert (
        _sample(
            text,
            "agentskit_chat_rate_limited_total",
            route="/api/chat",
            code="REQUEST_RATE_LIMITED",
        )
        == 1
    )
    assert "counted-1" not in text and "secret" not in text


# --- /healthz on SQLite ----------------------------------------------------------------------


async def test_healthz_pings_sqlite_and_fails_typed_while_a_stuck_writer_holds_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentskit_chat")
    path = tmp_path / "chat.db"
    app = create_app(definition(EchoAdapter()), store=f"sqlite:///{path}", rate_limits=None)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        healthy = await client.get("/healthz")
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            locked = await client.get("/healthz")
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        again = await client.get("/healthz")
    assert (healthy.status_code, healthy.json()) == (200, {"status": "ok"})
    assert (locked.status_code, locked.json()) == (
        503,
        {"status": "unavailable", "failing": ["store"]},
    )
    assert (again.status_code, again.json()) == (200, {"status": "ok"})
    (ping,) = _records(caplog, STORE_LOGGER)
    assert (ping.store, ping.operation, ping.retryable) == ("sqlite", "ping", True)  # type: ignore[attr-defined]


# --- the docs chat ---------------------------------------------------------------------------


async def test_the_docs_chat_serves_its_chat_metrics_beside_the_ask_metrics(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    async with create_docs_assistant(docs, now=clock) as assistant:
        app = create_docs_assistant_app(assistant)
        async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
            asked = await _turn(client, "docs-1", "turn-1", "Which license is the widget under?")
            health = await client.get("/healthz")
            metrics = (await client.get("/metrics")).text
    assert asked.status_code == 200
    assert lines(asked.content)[-1]["payload"]["status"] == "complete"
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert _sample(metrics, "agentskit_chat_turns_finished_total", outcome="completed") == 1
    assert "agentskit_ask_request_duration_milliseconds" in metrics  # one registry for both
    assert "docs-1" not in metrics and "license" not in metrics.lower()


async def test_the_docs_assistants_ask_store_failures_are_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentskit_chat")
    docs = write_docs(tmp_path / "docs")
    path = tmp_path / "ask.db"
    store = SQLiteAskSessionStore(path, busy_timeout=0.2)
    assistant = create_docs_assistant(docs, now=clock, session_store=store)
    app = create_docs_assistant_app(assistant, rate_limits=None)
    session_id = f"ask-{uuid.uuid4().hex[:8]}"
    body = {
        "protocol": "agentskit.chat.ask",
        "version": 1,
        "sessionId": session_id,
        "messages": [{"role": "user", "content": "Which license is the widget under?"}],
    }
    async with store, serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        first = await client.post("/api/ask", json=body)  # creates the file and its table
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")  # a stuck writer
            locked = await client.post("/api/ask", json={**body, "sessionId": session_id + "-2"})
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        metrics = (await client.get("/metrics")).text
        assert not assistant.watch_session_store(lambda inner: inner)  # open: kept as it is
    assert first.status_code == 200 and '"type":"done"' in first.text
    assert '"type":"error"' in locked.text and '"type":"done"' not in locked.text
    failed = _records(caplog, STORE_LOGGER)
    assert failed, "the Ask store's failure was not logged"
    assert {record.operation for record in failed} <= {"ask_session_load", "ask_session_save"}  # type: ignore[attr-defined]
    assert {record.store for record in failed} == {"sqlite"}  # type: ignore[attr-defined]
    assert _sample(metrics, "agentskit_chat_store_errors_total", store="sqlite") == len(failed)
    _assert_private(caplog, session_id, "license", "widget")
