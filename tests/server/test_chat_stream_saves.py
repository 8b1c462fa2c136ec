"""A turn's stream numbers its lines without saving the session for each one.

The session is saved for the first line (reserving line numbers past the stored cursor), when
the reserved numbers run out, and at least once a second; every line is numbered below the
stored cursor, so whatever comes after it (a later turn, a ``GET`` of a reloaded page while the
turn still runs or after its worker died) is numbered above every line a client saw.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from agentskit_chat.conversation import InMemorySessionStorage
from agentskit_chat.protocol import TurnSnapshotCursor
from agentskit_chat.runtime import AdapterRequest, ChatSource, StreamChunk
from tests.server._chat_support import JSON, EchoAdapter, Harness, lines, submit
from tests.service._support import serve

pytestmark = pytest.mark.anyio

CHUNKS = 150


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingStorage(InMemorySessionStorage):
    """In-memory session storage that counts its saves."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    async def save(self, snapshot: Any, expected_cursor: int | None) -> bool:
        self.saves += 1
        return await super().save(snapshot, expected_cursor)


@dataclass
class SteppedAdapter(EchoAdapter):
    """Streams :data:`CHUNKS` words, each only once the test read the previous line."""

    steps: list[anyio.Event] = field(default_factory=list)
    stepped: bool = True

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.calls += 1
        return _Stepped(self)

    def step(self) -> None:
        """Let the next chunk go."""
        self.steps.pop(0).set()


class _Stepped:
    def __init__(self, adapter: SteppedAdapter) -> None:
        self._adapter = adapter

    def abort(self) -> None:
        self._adapter.aborts += 1

    async def stream(self) -> AsyncIterator[StreamChunk]:
        for index in range(CHUNKS):
            if self._adapter.stepped:
                step = anyio.Event()
                self._adapter.steps.append(step)
                await step.wait()
            yield StreamChunk("text", content=f"w{index} ")
        yield StreamChunk("done")


async def test_a_stream_of_many_lines_saves_its_session_a_few_times_not_once_per_line() -> None:
    storage = CountingStorage()
    adapter = SteppedAdapter()
    harness = Harness(adapter=adapter, storage=storage)
    seen: list[dict[str, Any]] = []
    async with (
        serve(harness.app()) as url,
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", url, content=submit(), headers=JSON) as response,
    ):
        received = response.aiter_lines()
        with anyio.fail_after(20):
            async for line in received:
                if not line:
                    continue
                event = json.loads(line)
                seen.append(event)
                # Each streamed line is numbered below the cursor already stored (the final
                # one is sent once the turn is stored, with the stored cursor).
                if event["payload"]["status"] == "streaming":
                    assert event["sequence"] < harness.stored()["cursor"]
                else:
                    assert event["sequence"] == harness.stored()["cursor"]
                while adapter.steps and not adapter.steps[0].is_set():
                    adapter.step()
                    break
                await anyio.sleep(0)  # the next chunk reaches the stream before our next read
    assert len(seen) > CHUNKS  # one line per chunk (each was read before the next was made)
    assert seen[-1]["payload"]["status"] == "complete"
    assert seen[-1]["payload"]["messages"][-1]["content"].startswith("w0 w1 ")
    sequences = [event["sequence"] for event in seen]
    assert sequences == sorted(set(sequences))  # strictly increasing
    # The claim, a save per 64 lines (and at most one a second), the turn's end and release:
    # before, every line was one save.
    assert storage.saves <= len(seen) // 10
    stored = harness.stored()
    assert stored["cursor"] >= sequences[-1]
    assert stored["terminalTurns"] == [{"turnId": "turn-1", "outcome": "completed"}]

    adapter.stepped = False
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        second = await client.post(
            url, content=submit(turn_id="turn-2", event_id="e2"), headers=JSON
        )
    after = lines(second.content)
    assert after and all(event["sequence"] > sequences[-1] for event in after)


async def test_a_snapshot_read_during_a_turn_is_numbered_above_every_line_it_streamed() -> None:
    """A page that lost its stream (its worker died, or it reloaded) reads the session with
    ``GET``: a snapshot cursor accepts that read only when it is numbered above what it held."""
    adapter = EchoAdapter(gate=anyio.Event())
    harness = Harness(adapter=adapter)
    async with (
        serve(harness.app()) as url,
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", url, content=submit(), headers=JSON) as held,
    ):
        received = held.aiter_lines()
        with anyio.fail_after(10):
            first = await received.__anext__()
        cursor = TurnSnapshotCursor("session-1")
        assert cursor.apply(first)
        read = await client.get(url, params={"sessionId": "session-1"})
        assert read.status_code == 200
        assert read.json()["sequence"] > json.loads(first)["sequence"]
        assert cursor.apply(read.text)  # taken as newer than the streamed line
        assert adapter.gate is not None
        adapter.gate.set()
        rest = [json.loads(line) async for line in received if line]
    assert rest[-1]["payload"]["status"] == "complete"
    after = await _read(url_of=harness)
    assert after["sequence"] >= max(event["sequence"] for event in rest)  # the stored turn


async def _read(url_of: Harness) -> dict[str, Any]:
    async with serve(url_of.app()) as url, httpx.AsyncClient(timeout=20) as client:
        response = await client.get(url, params={"sessionId": "session-1"})
    assert response.status_code == 200
    return dict(response.json())
