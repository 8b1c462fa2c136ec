"""How ``serve`` runs uvicorn: a deadline for request headers, no proxy headers of uvicorn's own,
and the worker factory's defaults (retention) — in real processes and a real Redis."""

from __future__ import annotations

import json
import socket
import textwrap
import time
import uuid
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from agentskit_chat.server._run import WORKER_ENV, worker_app
from tests.assistant._support import write_docs
from tests.cli.test_serve_target_cli import serving
from tests.server._chat_support import JSON, lines, submit

APP = """
import anyio

from agentskit_chat.conversation import define_chat
from agentskit_chat.runtime import ChatConfig, reply_adapter


async def answer(text, request):
    await anyio.sleep(1.5 if text == "slow" else 0)
    return f"ok: {text}"


chat = define_chat(id="edge", chat=ChatConfig(adapter=reply_adapter(answer)))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text(textwrap.dedent(APP), "utf-8")
    return folder


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def seconds_until_closed(url: str, *, give_up: float = 5.0) -> float:
    """Send a request line and then one header every 0.2 s, never ending the headers; how
    long until the server closes the connection (``give_up`` if it never does)."""
    started = time.monotonic()
    with socket.create_connection(address(url), timeout=give_up) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        connection.settimeout(0.2)
        while time.monotonic() - started < give_up:
            try:
                if connection.recv(1024) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                pass
            except OSError:
                return time.monotonic() - started
            try:
                connection.sendall(b"X-Slow: 1\r\n")
            except OSError:
                return time.monotonic() - started
    return give_up


def test_headers_have_a_deadline_and_a_long_answer_does_not(project: Path) -> None:
    with serving(project, "app.py:chat", "--port", "0", "--header-timeout", "0.5") as (url, _):
        trickled = seconds_until_closed(url)
        with httpx.Client(base_url=url, timeout=10) as client:
            slow = client.post(
                "/api/chat", content=submit(session_id="slow", text="slow"), headers=JSON
            )
            # The same connection again, kept alive past one header deadline.
            time.sleep(0.3)
            again = client.get("/healthz")
    assert 0.4 <= trickled < 2.0
    assert slow.status_code == 200
    assert lines(slow.content)[-1]["payload"]["status"] == "complete"
    assert again.status_code == 200


def test_uvicorn_does_not_rewrite_the_client_from_proxy_headers(project: Path) -> None:
    """uvicorn alone would take ``X-Forwarded-For`` from 127.0.0.1 as the client, giving each
    forged address a fresh rate-limit bucket; served, the socket peer stays the client."""
    with (
        serving(project, "app.py:chat", "--port", "0", "--rate-limit", "0.001") as (url, _),
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        statuses = [
            client.post(
                "/api/chat",
                content=submit(session_id=f"f{n}", turn_id="t1"),
                headers={**JSON, "x-forwarded-for": f"203.0.113.{n + 1}"},
            ).status_code
            for n in range(3)
        ]
    # One bucket (a burst of one) for the one peer: refused as proxied, then limited.
    assert statuses == [401, 429, 429]


# --- the worker factory ------------------------------------------------------------------------


class Lifespan:
    """Drives an ASGI app's lifespan by hand: startup, then shutdown."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[str] = []
        self._incoming: list[str] = ["lifespan.startup"]
        self._ready = anyio.Event()
        self._stop = anyio.Event()

    async def receive(self) -> MutableMapping[str, Any]:
        if self._incoming:
            return {"type": self._incoming.pop(0)}
        await self._stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message["type"])
        self._ready.set()

    async def run(self) -> None:
        await self.app({"type": "lifespan", "asgi": {"version": "3.0"}}, self.receive, self.send)

    async def started(self) -> None:
        await self._ready.wait()

    def shutdown(self) -> None:
        self._stop.set()


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_url: str) -> Iterator[str]:
    """The worker options as deployment.md writes them by hand: a docs folder and a store."""
    docs = write_docs(tmp_path / "docs")
    monkeypatch.setenv(WORKER_ENV, json.dumps({"docs_dir": str(docs), "store": redis_url}))
    monkeypatch.delenv("AGENTSKIT_API_KEY", raising=False)
    yield redis_url


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_worker_factory_keeps_conversations_30_days_by_default(
    worker_env: str, anyio_backend: str
) -> None:
    app = worker_app()
    lifespan = Lifespan(app)
    session_id = f"w-{uuid.uuid4().hex[:8]}"
    async with anyio.create_task_group() as group:
        group.start_soon(lifespan.run)
        await lifespan.started()
        assert lifespan.sent == ["lifespan.startup.complete"]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            response = await client.post(
                "/api/chat", content=submit(session_id=session_id, text="Setup guide"), headers=JSON
            )
        lifespan.shutdown()
    assert response.status_code == 200
    assert lines(response.content)[-1]["payload"]["status"] == "complete"
    redis = Redis.from_url(worker_env)
    try:
        ttl = await redis.ttl(f"agentskit:session:{session_id}")
        messages_ttl = await redis.ttl(f"agentskit:messages:{session_id}")
    finally:
        await redis.aclose()
    day = 86400
    assert 29 * day < ttl <= 30 * day  # not -1: the default retention reached the worker
    assert 29 * day < messages_ttl <= 30 * day
