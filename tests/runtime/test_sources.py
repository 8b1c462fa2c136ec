"""The one-reply source shared by conversation routes and deterministic answers."""

from __future__ import annotations

import pytest

from agentskit_chat.runtime import ChatSource, StreamChunk
from agentskit_chat.runtime._sources import TextReplySource

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """Records, in order, when the ``before`` hook and the text factory run."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def before(self) -> None:
        self.events.append("before")

    def text(self) -> str:
        self.events.append("text")
        return "made"


async def chunks(source: ChatSource, *, abort_after: int | None = None) -> list[StreamChunk]:
    seen: list[StreamChunk] = []
    async for chunk in source.stream():
        seen.append(chunk)
        if len(seen) == abort_after:
            source.abort()
    return seen


@pytest.mark.parametrize(
    ("abort", "types", "events"),
    [
        ("never", ["text", "done"], ["before", "text"]),
        ("before iteration", [], []),
        ("after the text", ["text"], ["before", "text"]),
    ],
)
async def test_abort_decides_how_much_is_streamed_and_what_runs(
    abort: str, types: list[str], events: list[str]
) -> None:
    recorder = Recorder()
    source = TextReplySource(recorder.text, before=recorder.before, metadata={"k": 1})
    if abort == "before iteration":
        source.abort()
    seen = await chunks(source, abort_after=1 if abort == "after the text" else None)
    assert [chunk.type for chunk in seen] == types
    assert recorder.events == events
    if seen:
        assert seen[0].content == "made"
        assert seen[0].metadata == {"k": 1}


async def test_a_plain_text_reply_streams_as_is_without_metadata() -> None:
    source = TextReplySource("fixed")
    assert isinstance(source, ChatSource)
    assert await chunks(source) == [StreamChunk("text", content="fixed"), StreamChunk("done")]
