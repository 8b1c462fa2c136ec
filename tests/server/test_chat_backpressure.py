"""A client that does not read: snapshots coalesce to the newest, and the deadline still ends
the turn, saves its messages and frees the session.

These call the ASGI app directly with a ``send`` that blocks like a full socket buffer (a real
socket's buffer is too large to fill with a handful of snapshots).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import pytest

from agentskit_chat.runtime import AdapterRequest, ChatSource, StreamChunk
from tests.server._chat_support import EchoAdapter, Harness, submit

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ManyChunks(EchoAdapter):
    """Streams 200 text chunks, then ``done``."""

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.calls += 1
        adapter = self

        class Source:
            def abort(self) -> None:
                adapter.aborts += 1

            async def stream(self) -> AsyncIterator[StreamChunk]:
                for n in range(200):
                    yield StreamChunk("text", content=f"{n} ")
                    await anyio.sleep(0)
                yield StreamChunk("done")

        return Source()


class Client:
    """One request: its body, then the response's messages; body writes wait for ``gate``."""

    def __init__(self, body: bytes, gate: anyio.Event | None) -> None:
        self._messages = [{"type": "http.request", "body": body, "more_body": False}]
        self.gate = gate
        self.lines: list[dict[str, Any]] = []
        self.status: int | None = None
        self.disconnect = anyio.Event()

    async def receive(self) -> MutableMapping[str, Any]:
        if self._messages:
            return self._messages.pop(0)
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        if self.gate is not None and message.get("body"):
            await self.gate.wait()
        body = message.get("body", b"")
        self.lines.extend(json.loads(line) for line in body.decode().splitlines() if line)


SCOPE: dict[str, Any] = {
    "type": "http",
    "method": "POST",
    "path": "/",
    "headers": [(b"content-type", b"application/json")],
    "client": ("127.0.0.1", 5000),
}


async def test_a_slow_reader_gets_the_newest_state_not_every_state() -> None:
    harness = Harness(adapter=ManyChunks())
    app = harness.app()
    gate = anyio.Event()
    client = Client(submit(), gate)
    async with anyio.create_task_group() as group:
        group.start_soon(app, SCOPE, client.receive, client.send)
        with anyio.fail_after(10):
            while harness.adapter.calls == 0:
                await anyio.sleep(0.01)
            await anyio.sleep(0.2)  # the model runs on while the first line waits
        gate.set()
    assert client.status == 200
    assert client.lines
    assert len(client.lines) < 20  # 200 states, coalesced while nobody read
    last = client.lines[-1]["payload"]
    assert last["status"] == "complete"
    assert last["messages"][-1]["content"] == "".join(f"{n} " for n in range(200))


async def test_the_deadline_ends_a_turn_nobody_reads_and_frees_the_session() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    app = harness.app(timeout=0.3, cleanup_timeout=0.5)
    stuck = Client(submit(), anyio.Event())  # never released: a client that reads nothing
    with anyio.fail_after(10):
        await app(SCOPE, stuck.receive, stuck.send)  # returns: nothing waits forever
    assert harness.adapter.aborts == 1
    assert harness.memories.saves == 1
    assert [m.content for m in harness.memories.messages("session-1")] == ["hello", "Echo"]
    harness.adapter.gate = None
    after = Client(submit(turn_id="turn-2", event_id="e2"), None)
    with anyio.fail_after(10):
        await app(SCOPE, after.receive, after.send)
    assert after.status == 200
    assert after.lines[-1]["payload"]["status"] == "complete"
