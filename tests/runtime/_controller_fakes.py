"""Scripted adapters, clocks and memories for the chat controller tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

import anyio

from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatMessage,
    StreamChunk,
)
from tests._loop import no_blocking

#: A marker an adapter or executor puts in its exception text; state and errors never show it.
MARKER: Final = "zq9SECRETq9z"
START: Final = datetime(2026, 7, 13, 12, 0, tzinfo=UTC)


class Hang:
    """Script step: the stream blocks forever (until cancelled)."""


class Raise:
    """Script step: the stream raises an exception whose text holds :data:`MARKER`."""


@dataclass
class Late:
    """Script step: block, ignoring cancellation, until released; then yield ``chunk``."""

    chunk: StreamChunk


Step = StreamChunk | Hang | Raise | Late

HANG: Final = Hang()
RAISE: Final = Raise()


def text(content: str) -> StreamChunk:
    """A text chunk."""
    return StreamChunk("text", content=content)


DONE: Final = StreamChunk("done")


def reply(*contents: str) -> list[Step]:
    """A script streaming ``contents`` then ``done``."""
    return [*(text(c) for c in contents), DONE]


class ScriptedSource:
    """A source that plays one script and records how it was consumed."""

    def __init__(self, request: AdapterRequest, steps: Sequence[Step]) -> None:
        self.request = request
        self.steps = list(steps)
        self.produced = 0
        self.abort_calls = 0
        self.aclose_calls = 0
        self.blocked = False
        self.release = anyio.Event()
        self.produced_after_abort = 0

    def abort(self) -> None:
        self.abort_calls += 1

    def stream(self) -> _ScriptedStream:
        return _ScriptedStream(self)


class _ScriptedStream:
    def __init__(self, source: ScriptedSource) -> None:
        self._source = source
        self._index = 0

    def __aiter__(self) -> _ScriptedStream:
        return self

    async def __anext__(self) -> StreamChunk:
        source = self._source
        await anyio.sleep(0)
        if self._index >= len(source.steps):
            raise StopAsyncIteration
        step = source.steps[self._index]
        self._index += 1
        if isinstance(step, Hang):
            source.blocked = True
            await anyio.sleep_forever()
        if isinstance(step, Raise):
            raise RuntimeError(f"adapter exploded {MARKER}")
        if isinstance(step, Late):
            source.blocked = True
            with anyio.CancelScope(shield=True):
                await source.release.wait()
            step = step.chunk
        assert isinstance(step, StreamChunk)
        source.produced += 1
        if source.abort_calls:
            source.produced_after_abort += 1
        return step

    async def aclose(self) -> None:
        self._source.aclose_calls += 1


@dataclass
class ScriptedAdapter:
    """An adapter that answers each request with the next script (then ``default``)."""

    scripts: list[Sequence[Step]] = field(default_factory=list)
    default: Sequence[Step] = field(default_factory=lambda: reply("ok"))
    sources: list[ScriptedSource] = field(default_factory=list)

    @property
    def capabilities(self) -> AdapterCapabilities | None:
        return None

    @property
    def requests(self) -> list[AdapterRequest]:
        return [source.request for source in self.sources]

    def create_source(self, request: AdapterRequest) -> ScriptedSource:
        steps = self.scripts.pop(0) if self.scripts else self.default
        source = ScriptedSource(request, steps)
        self.sources.append(source)
        return source


def counter_ids(prefix: str = "m") -> Callable[[], str]:
    """An id factory giving ``m1``, ``m2``, ..."""
    count = 0

    def make() -> str:
        nonlocal count
        count += 1
        return f"{prefix}{count}"

    return make


def ticking_clock() -> Callable[[], datetime]:
    """A clock that advances one second per reading, from :data:`START`."""
    ticks = 0

    def now() -> datetime:
        nonlocal ticks
        ticks += 1
        return START + timedelta(seconds=ticks)

    return now


def config(adapter: ScriptedAdapter, **changes: object) -> ChatConfig:
    """A config over ``adapter`` with counter ids and a ticking clock."""
    base = ChatConfig(adapter=adapter, id_factory=counter_ids(), clock=ticking_clock())
    return base.with_changes(**changes)


def controller_for(
    *scripts: Sequence[Step], **changes: object
) -> tuple[ChatController, ScriptedAdapter]:
    """A controller over a :class:`ScriptedAdapter` playing ``scripts``, one per run."""
    adapter = ScriptedAdapter(scripts=list(scripts))
    return ChatController(config(adapter, **changes)), adapter


def message(id: str, role: str, content: str = "x", **extra: object) -> ChatMessage:
    """A complete message created at :data:`START`."""
    return ChatMessage(id=id, role=role, content=content, created_at=START, **extra)  # type: ignore[arg-type]


def roles(messages: Iterable[ChatMessage]) -> list[str]:
    """The roles of ``messages``, in order."""
    return [m.role for m in messages]


async def wait_until(condition: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Let the loop run until ``condition()`` holds (fails the test after ``limit_s``)."""
    with anyio.fail_after(limit_s):
        while not condition():
            await anyio.sleep(0.001)


@asynccontextmanager
async def watched(limit_s: float = 10.0) -> AsyncIterator[None]:
    """:func:`tests._loop.no_blocking`, and a test that hangs fails after ``limit_s``."""
    with anyio.fail_after(limit_s):
        async with no_blocking():
            yield
