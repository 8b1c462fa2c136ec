"""reply_adapter: a chat from one function (text, an awaitable of it, or streamed pieces), through
a real ChatController."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import (
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatMessage,
    ChatState,
    StreamChunk,
    reply_adapter,
)
from agentskit_chat.runtime._controller_state import STREAM_FAILED_MESSAGE

from ._controller_fakes import MARKER, START, counter_ids, ticking_clock, wait_until, watched

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def controller(reply: Any) -> ChatController:
    return ChatController(
        ChatConfig(adapter=reply_adapter(reply), id_factory=counter_ids(), clock=ticking_clock())
    )


def request_for(*texts: str) -> AdapterRequest:
    messages = tuple(
        ChatMessage(id=f"u{n}", role="user", content=text, created_at=START)
        for n, text in enumerate(texts)
    )
    return AdapterRequest(messages=messages)


async def chunks_of(reply: Any, text: str = "hi") -> list[StreamChunk]:
    source = reply_adapter(reply).create_source(request_for(text))
    return [chunk async for chunk in source.stream()]


class Pieces:
    """An async generator of ``pieces`` that records what it produced and whether it closed."""

    def __init__(self, *pieces: object) -> None:
        self.pieces = pieces
        self.produced: list[object] = []
        self.closed = False
        self.texts: list[str] = []

    async def __call__(self, text: str, request: AdapterRequest) -> AsyncIterator[Any]:
        self.texts.append(text)
        try:
            for piece in self.pieces:
                self.produced.append(piece)
                yield piece
        finally:
            self.closed = True


def final(state: ChatState) -> ChatMessage:
    assert state.messages, "the controller holds no message"
    return state.messages[-1]


# --- the three kinds of reply --------------------------------------------------------------------


async def test_a_function_returning_text_answers_the_newest_user_message() -> None:
    seen: list[tuple[str, int]] = []

    def reply(text: str, request: AdapterRequest) -> str:
        seen.append((text, len(request.messages)))
        return f"You said: {text}"

    chat = controller(reply)
    async with watched():
        await chat.send("hello")
        await chat.send("again")
    assert chat.state.status == "idle"
    assert chat.state.error is None
    assert [(m.role, m.content) for m in chat.state.messages] == [
        ("user", "hello"),
        ("assistant", "You said: hello"),
        ("user", "again"),
        ("assistant", "You said: again"),
    ]
    assert final(chat.state).status == "complete"
    # The newest user message is ``text``; the request holds the whole conversation (with the
    # assistant's empty placeholder).
    assert seen == [("hello", 2), ("again", 4)]


async def test_an_async_function_is_awaited() -> None:
    async def reply(text: str, request: AdapterRequest) -> str:
        await anyio.sleep(0)
        return text.upper()

    chat = controller(reply)
    async with watched():
        await chat.send("loud")
    assert final(chat.state).content == "LOUD"
    assert chat.state.status == "idle"
    assert await chunks_of(reply, "x") == [StreamChunk("text", content="X"), StreamChunk("done")]


async def test_streamed_pieces_arrive_in_order_then_done() -> None:
    pieces = Pieces("Hel", "", "lo", " there")
    assert await chunks_of(pieces) == [
        StreamChunk("text", content="Hel"),
        StreamChunk("text", content="lo"),
        StreamChunk("text", content=" there"),
        StreamChunk("done"),
    ]
    assert pieces.closed

    streamed = Pieces("a", "b", "c")
    chat = controller(streamed)
    contents: list[str] = []
    chat.subscribe(lambda state: contents.append(final(state).content))
    async with watched():
        await chat.send("go")
    assert final(chat.state).content == "abc"
    assert final(chat.state).status == "complete"
    assert chat.state.status == "idle"
    # Each piece was shown as it came, in order.
    assert contents[:4] == ["", "a", "ab", "abc"]
    assert streamed.texts == ["go"]
    assert streamed.closed


async def test_an_async_function_may_return_an_async_iterator() -> None:
    pieces = Pieces("x", "y")

    async def reply(text: str, request: AdapterRequest) -> AsyncIterator[Any]:
        return pieces(text, request)

    assert await chunks_of(reply) == [
        StreamChunk("text", content="x"),
        StreamChunk("text", content="y"),
        StreamChunk("done"),
    ]


# --- stopping ------------------------------------------------------------------------------------


async def test_abort_between_pieces_stops_the_iteration_and_closes_the_generator() -> None:
    pieces = Pieces("one", "two", "three")
    source = reply_adapter(pieces).create_source(request_for("hi"))
    received: list[StreamChunk] = []
    async with watched():
        async for chunk in source.stream():
            received.append(chunk)
            source.abort()
    # Nothing after the abort reached the consumer, not even ``done``; the generator was closed
    # at the piece it was on and never made the third.
    assert received == [StreamChunk("text", content="one")]
    assert pieces.produced == ["one", "two"]
    assert pieces.closed


async def test_an_aborted_source_never_calls_the_function() -> None:
    calls: list[str] = []

    def reply(text: str, request: AdapterRequest) -> str:
        calls.append(text)
        return "never"

    source = reply_adapter(reply).create_source(request_for("hi"))
    source.abort()
    assert [chunk async for chunk in source.stream()] == []
    assert calls == []


async def test_stop_mid_stream_keeps_what_came_and_closes_the_generator() -> None:
    release = anyio.Event()
    closed = anyio.Event()
    produced: list[str] = []

    async def reply(text: str, request: AdapterRequest) -> AsyncIterator[str]:
        try:
            produced.append("first")
            yield "first"
            await release.wait()
            produced.append("second")
            yield "second"
        finally:
            closed.set()

    chat = controller(reply)
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(chat.send, "hi")
        await wait_until(lambda: [m.content for m in chat.state.messages][-1:] == ["first"])
        chat.stop()
        release.set()
        await closed.wait()
    assert chat.state.status == "idle"
    assert final(chat.state).content == "first"
    assert final(chat.state).status == "complete"
    assert produced == ["first"]


# --- failures ------------------------------------------------------------------------------------


def _sync_generator(text: str, request: AdapterRequest) -> Iterator[str]:
    yield "sync pieces are not streamed"


async def _awaits_a_number(text: str, request: AdapterRequest) -> int:
    return 42


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(lambda text, request: None, id="none"),
        pytest.param(lambda text, request: 42, id="a number"),
        pytest.param(lambda text, request: ["a", "b"], id="a list"),
        pytest.param(lambda text, request: b"bytes", id="bytes"),
        pytest.param(_sync_generator, id="a sync generator"),
        pytest.param(_awaits_a_number, id="an awaitable of a number"),
    ],
)
async def test_a_reply_of_the_wrong_type_fails_the_turn(reply: Any) -> None:
    chat = controller(reply)
    async with watched():
        await chat.send("hi")
    assert chat.state.status == "error"
    assert chat.state.error == STREAM_FAILED_MESSAGE
    assert final(chat.state).role == "assistant"
    assert final(chat.state).content == ""
    with pytest.raises(ConfigurationError, match="A reply function must return text"):
        await chunks_of(reply)


@pytest.mark.parametrize("bad", [42, None, b"bytes", {"text": "x"}])
async def test_a_streamed_piece_that_is_not_text_fails_the_turn(bad: object) -> None:
    pieces = Pieces("fine", bad, "never")
    chat = controller(pieces)
    async with watched():
        await chat.send("hi")
    assert chat.state.status == "error"
    assert chat.state.error == STREAM_FAILED_MESSAGE
    # What came before the bad piece stays; nothing after it is asked for.
    assert final(chat.state).content == "fine"
    assert pieces.produced == ["fine", bad]
    assert pieces.closed
    with pytest.raises(ConfigurationError, match="A reply function must stream strings"):
        await chunks_of(Pieces(bad))


async def test_an_exception_in_the_function_fails_the_turn_without_showing_it() -> None:
    calls = 0

    def reply(text: str, request: AdapterRequest) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError(f"database down {MARKER}")
        return "fine now"

    chat = controller(reply)
    async with watched():
        await chat.send("hi")
    assert chat.state.status == "error"
    assert chat.state.error == STREAM_FAILED_MESSAGE
    assert all(MARKER not in m.content for m in chat.state.messages)

    # The next turn of the same chat works again.
    async with watched():
        await chat.send("hi again")
    assert chat.state.error is None
    assert final(chat.state).content == "fine now"


@pytest.mark.parametrize("bad", [None, "reply text", 42, ["not", "callable"]])
def test_a_reply_that_is_not_callable_is_a_configuration_error(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="reply_adapter needs a function"):
        reply_adapter(bad)


def test_the_adapter_streams() -> None:
    capabilities = reply_adapter(lambda text, request: text).capabilities
    assert capabilities is not None
    assert capabilities.streaming is True
