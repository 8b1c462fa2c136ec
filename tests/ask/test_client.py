"""The Ask client adapter against a real uvicorn server on 127.0.0.1 (port 0).

httpx's ASGI transport buffers streamed bodies, so every test here talks to a tiny Starlette
app over a real loopback socket: streaming, slow bodies, deadlines, aborts and disconnects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentskit_chat.answers import ESCALATION_METADATA_KEY, create_deterministic_answer_adapter
from agentskit_chat.ask._client import (
    ASK_CONNECT_TIMEOUT_MESSAGE,
    ASK_REQUEST_FAILED_MESSAGE,
    AskAdapter,
    create_ask_adapter,
)
from agentskit_chat.ask._client_projection import (
    ASK_CONTENT_BYTE_LIMIT_MESSAGE,
    ASK_CONTENT_RECORD_LIMIT_MESSAGE,
)
from agentskit_chat.errors import AgentsKitChatError
from agentskit_chat.protocol import (
    ASSISTANT_CONTENT_PREFIX,
    AnswerEnvelope,
    AssistantContentPart,
    ComponentPart,
    TextPart,
    create_assistant_content_encoder,
    decode_ask_request,
    decode_assistant_content,
)
from agentskit_chat.protocol._json import utf8_len
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterContext,
    AdapterRequest,
    ChatMessage,
    MessageRole,
    SessionAwareChatAdapter,
    StreamChunk,
)
from tests.answers._support import ARTIFACT, HASH, SITE, now

pytestmark = pytest.mark.anyio

NDJSON = "application/x-ndjson"
AT = datetime(2026, 7, 13, 12, tzinfo=UTC)
ESCALATION = {
    "protocol": "agentskit.chat.answer",
    "version": 1,
    "outcome": "escalation",
    "query": "Which agent validates tests?",
    "normalizedQuery": "which agent validates tests?",
    "message": "A backend answer is required.",
    "reason": "miss",
    "confidence": {"level": "low", "basis": "miss"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- a stub Ask service on a loopback port ------------------------------------------------------


@dataclass
class Seen:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Stub:
    url: str
    seen: list[Seen] = field(default_factory=list)

    @property
    def ask(self) -> str:
        return self.url + "/api/ask"


Handler = Callable[[Request], Awaitable[Response]]


@asynccontextmanager
async def stub(handler: Handler) -> AsyncIterator[Stub]:
    """A Starlette app answering ``POST /api/ask`` with ``handler``, under uvicorn."""
    seen: list[Seen] = []

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        seen.append(Seen(request.url.path, request.url.query, dict(request.headers), body))
        return await handler(request)

    app = Starlette(routes=[Route("/api/ask", endpoint, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield Stub(f"http://127.0.0.1:{port}", seen)
        finally:
            server.should_exit = True


def lines(*events: Any) -> bytes:
    return b"".join((e if isinstance(e, bytes) else orjson.dumps(e)) + b"\n" for e in events)


def answer(body: bytes | str, media_type: str | None = NDJSON, status: int = 200) -> Handler:
    async def handle(request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type)

    return handle


def message(role: MessageRole, content: str, index: int = 0) -> ChatMessage:
    return ChatMessage(id=f"m{index}", role=role, content=content, created_at=AT)


def ask(question: str, metadata: dict[str, Any] | None = None) -> AdapterRequest:
    return AdapterRequest(
        messages=(message("user", question),), context=AdapterContext(metadata=metadata or {})
    )


async def collect(adapter: AskAdapter, request: AdapterRequest | None = None) -> list[StreamChunk]:
    source = adapter.create_source(request or ask("Question"))
    with anyio.fail_after(30):
        return [chunk async for chunk in source.stream()]


def content_of(chunks: Sequence[StreamChunk]) -> str:
    return "".join(chunk.content or "" for chunk in chunks if chunk.type == "text")


def decoded(chunks: Sequence[StreamChunk]) -> tuple[AssistantContentPart, ...]:
    content = content_of(chunks)
    if not content:
        return ()
    result = decode_assistant_content(content)
    assert result.ok, result
    if result.parts:
        assert result.complete
    return result.parts


def texts(chunks: Sequence[StreamChunk]) -> list[str]:
    return [part.text for part in decoded(chunks) if isinstance(part, TextPart)]


# --- the Ask rows of the §5 vectors -------------------------------------------------------------


async def test_ndjson_answer_with_citation_and_invalid_line() -> None:
    cite = {
        "type": "tool",
        "id": "cite/1",
        "name": "cite",
        "args": {"sources": [{"title": "Docs", "path": "/docs"}]},
    }
    body = lines({"type": "text", "delta": "Hello "}, cite, b"{bad}", {"type": "done"})
    async with stub(answer(body)) as server, httpx.AsyncClient(base_url=server.url) as client:
        adapter = create_ask_adapter(
            endpoint="/api/ask", corpus="registry", persona="guide", http_client=client
        )
        chunks = await collect(adapter)
    seen = server.seen[0]
    assert seen.body == (
        b'{"protocol":"agentskit.chat.ask","version":1,'
        b'"messages":[{"role":"user","content":"Question"}]}'
    )
    assert (seen.path, seen.query) == ("/api/ask", "corpus=registry&persona=guide")
    assert seen.headers["content-type"] == "application/json"
    parts = decoded(chunks)
    assert parts[0] == TextPart(kind="text", text="Hello ")
    assert isinstance(parts[1], ComponentPart)
    frame = parts[1].frame
    assert (frame.component_key, frame.instance_id) == ("source-list", "cite-1")
    assert frame.to_wire()["props"] == {
        "label": "Sources",
        "sources": [{"id": "source-1", "title": "Docs", "url": "/docs"}],
    }
    assert frame.fallback.summary == "Sources: Docs."
    assert [chunk.type for chunk in chunks] == ["text", "text", "done"]
    assert chunks[-1] == StreamChunk("done")


async def test_session_id_and_escalation_are_sent() -> None:
    request = ask("Question", {ESCALATION_METADATA_KEY: ESCALATION, "tenant": "docs"})
    async with stub(answer(lines({"type": "done"}))) as server:
        adapter = create_ask_adapter(endpoint=server.ask)
        source = adapter.create_source_for_session(request, "registry:session-1")
        chunks = [chunk async for chunk in source.stream()]
    assert chunks == [StreamChunk("done")]
    assert server.seen[0].body == (
        b'{"protocol":"agentskit.chat.ask","version":1,"sessionId":"registry:session-1",'
        b'"messages":[{"role":"user","content":"Question"}],"deterministic":'
        + orjson.dumps(ESCALATION)
        + b"}"
    )
    assert decode_ask_request(server.seen[0].body).ok


@pytest.mark.parametrize(
    "value",
    [
        {**ESCALATION, "outcome": "answer"},
        {**ESCALATION, "reason": "unknown"},
        "not an envelope",
        {"protocol": "agentskit.chat.answer"},
    ],
    ids=["answer-outcome", "bad-reason", "string", "partial"],
)
async def test_invalid_escalations_are_not_sent(value: object) -> None:
    request = ask("Question", {ESCALATION_METADATA_KEY: value})
    async with stub(answer(lines({"type": "done"}))) as server:
        await collect(create_ask_adapter(endpoint=server.ask), request)
    assert b"deterministic" not in server.seen[0].body


async def test_plain_text_body_becomes_text_records() -> None:
    async with stub(answer("plain " + "x" * 20000, media_type="text/plain")) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    parts = texts(chunks)
    assert "".join(parts) == "plain " + "x" * 20000
    assert sum(utf16_len(text) for text in parts) == 20006
    assert all(utf16_len(text) <= 16384 for text in parts)
    assert chunks[-1] == StreamChunk("done")


@pytest.mark.parametrize(
    ("media_type", "prefix"),
    [(NDJSON, b"x" * 1048577), ("text/plain", b"{" + b"x" * 1048577)],
    ids=["ndjson", "sniffed"],
)
async def test_oversized_line_suffix_is_never_an_event(media_type: str, prefix: bytes) -> None:
    body = prefix + lines(
        {"type": "text", "delta": "injected"}, {"type": "text", "delta": "safe"}, {"type": "done"}
    )
    async with stub(answer(body, media_type=media_type)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert texts(chunks) == ["safe"]
    assert chunks[-1] == StreamChunk("done")


async def test_byte_limit_ends_with_an_error_and_valid_content() -> None:
    body = lines(*[{"type": "text", "delta": "y" * 8192} for _ in range(40)], {"type": "done"})
    async with stub(answer(body)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert chunks[-1] == StreamChunk("error", content=ASK_CONTENT_BYTE_LIMIT_MESSAGE)
    assert all(chunk.type == "text" for chunk in chunks[:-1])
    assert utf8_len(content_of(chunks)) <= 262144
    assert len(texts(chunks)) == 31  # 31 records of 8,220 bytes fit, a 32nd would not


async def test_record_limit_ends_with_an_error_after_512_records() -> None:
    body = lines(*[{"type": "text", "delta": "z"} for _ in range(513)], {"type": "done"})
    async with stub(answer(body)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert chunks[-1] == StreamChunk("error", content=ASK_CONTENT_RECORD_LIMIT_MESSAGE)
    assert len(texts(chunks)) == 512
    assert len(chunks) == 513


async def test_http_error_is_one_error_chunk() -> None:
    async with stub(answer(lines({"type": "done"}), status=503)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert chunks == [StreamChunk("error", content="Ask request failed (503).")]


# --- deadlines, aborts and cancellation ---------------------------------------------------------


async def test_connection_deadline_does_not_cover_the_body() -> None:
    deadline = 0.5

    async def slow_body(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            await anyio.sleep(deadline * 3)  # well past the deadline, after the headers
            yield lines({"type": "text", "delta": "late"}, {"type": "done"})

        return StreamingResponse(body(), media_type=NDJSON)

    async with stub(slow_body) as server:
        adapter = create_ask_adapter(endpoint=server.ask, connect_timeout_s=deadline)
        chunks = await collect(adapter)
    assert texts(chunks) == ["late"]
    assert chunks[-1] == StreamChunk("done")


async def test_connection_deadline_fails_with_its_fixed_message() -> None:
    release = anyio.Event()

    async def no_headers(request: Request) -> Response:
        await release.wait()
        return Response(b"", media_type=NDJSON)

    async with stub(no_headers) as server:
        adapter = create_ask_adapter(endpoint=server.ask, connect_timeout_s=0.2)
        try:
            chunks = await collect(adapter)
        finally:
            release.set()
    assert chunks == [StreamChunk("error", content=ASK_CONNECT_TIMEOUT_MESSAGE)]


async def test_abort_while_connecting_yields_nothing() -> None:
    entered, release = anyio.Event(), anyio.Event()
    chunks: list[StreamChunk] = []

    async def no_headers(request: Request) -> Response:
        entered.set()
        await release.wait()
        return Response(lines({"type": "text", "delta": "late"}), media_type=NDJSON)

    async with stub(no_headers) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))

        async def consume() -> None:
            chunks.extend([chunk async for chunk in source.stream()])

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(consume)
                    await entered.wait()
                    source.abort()
        finally:
            release.set()
    assert chunks == []


async def test_abort_before_streaming_sends_nothing() -> None:
    async with stub(answer(lines({"type": "done"}))) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))
        source.abort()
        assert [chunk async for chunk in source.stream()] == []
    assert server.seen == []


@dataclass
class Held:
    """A streaming response that sends one line, then waits; ``closed`` is set when it ends."""

    closed: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            try:
                yield lines({"type": "text", "delta": "first"})
                await self.release.wait()
                yield lines({"type": "done"})
            finally:
                self.closed.set()

        return StreamingResponse(body(), media_type=NDJSON)


async def test_stream_is_not_buffered_and_abort_closes_the_response() -> None:
    held = Held()
    async with stub(held) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))
        stream = source.stream()
        with anyio.fail_after(10):
            first = await anext(stream)  # arrives while the server is still waiting
            assert not held.closed.is_set()
            source.abort()
            rest = [chunk async for chunk in stream]
            await held.closed.wait()  # the server saw the client go away
    assert first.content is not None
    assert decode_assistant_content(first.content).ok
    assert rest == []


async def test_abort_during_a_read_cancels_it() -> None:
    held = Held()
    chunks: list[StreamChunk] = []
    async with stub(held) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))

        async def consume() -> None:
            async for chunk in source.stream():
                chunks.append(chunk)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                while not chunks:
                    await anyio.sleep(0.01)
                source.abort()  # the consumer is now blocked reading the body
            await held.closed.wait()
    assert [chunk.type for chunk in chunks] == ["text"]


async def test_cancelled_consumer_closes_the_response() -> None:
    held = Held()
    chunks: list[StreamChunk] = []
    async with stub(held) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))

        async def consume() -> None:
            async for chunk in source.stream():
                chunks.append(chunk)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                while not chunks:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()  # the consumer is blocked reading the body
            await held.closed.wait()
    assert [chunk.type for chunk in chunks] == ["text"]


async def test_closing_the_stream_early_closes_the_response() -> None:
    held = Held()
    async with stub(held) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))
        stream = source.stream()
        with anyio.fail_after(10):
            await anext(stream)
            await stream.aclose()  # type: ignore[attr-defined]
            await held.closed.wait()


# --- response handling --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("media_type", "body", "expected"),
    [
        ("text/plain", lines({"type": "text", "delta": "events"}), "events"),
        ("application/json", b'{"this":"is prose"}', '{"this":"is prose"}'),
        (
            "text/plain",
            b'{"this":"prose"}\n{"type":"done"}\n',
            '{"this":"prose"}\n{"type":"done"}\n',
        ),
        (None, b"  \n\t", ""),
        (NDJSON, b"", ""),
        ("text/plain", b"", ""),
        ("text/plain", b"\xef\xbb\xbf" + lines({"type": "text", "delta": "bom"}), "bom"),
        ("text/plain", b"\n \n" + lines({"type": "text", "delta": "after blank"}), "after blank"),
        ("text/html", b"Hello {not json}", "Hello {not json}"),
        ("text/plain", b'{"type":"text","delta":"no newline"}', "no newline"),
        ("text/plain", b"caf\xc3\xa9 \xff", "café \ufffd"),
        (NDJSON, b"plain words\n", ""),
    ],
    ids=[
        "ndjson-as-text-plain",
        "json-prose",
        "json-prose-first-line",
        "whitespace-only",
        "empty-ndjson",
        "empty-text",
        "bom",
        "leading-blank-lines",
        "html-text",
        "unterminated-event",
        "invalid-utf8",
        "ndjson-declared-prose",
    ],
)
async def test_response_mode_sniffing(media_type: str | None, body: bytes, expected: str) -> None:
    async with stub(answer(body, media_type=media_type)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert "".join(texts(chunks)) == expected
    assert chunks[-1] == StreamChunk("done")


async def test_error_event_ends_the_stream_without_done() -> None:
    body = lines(
        {"type": "text", "delta": "partial"},
        {"type": "error", "message": "The Ask request timed out.", "code": "ASK_TIMEOUT"},
        {"type": "text", "delta": "ignored"},
    )
    async with stub(answer(body)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert [chunk.type for chunk in chunks] == ["text", "error"]
    assert chunks[-1].content == "The Ask request timed out."


async def test_done_event_ends_the_stream() -> None:
    body = lines(
        {"type": "text", "delta": "answer"}, {"type": "done"}, {"type": "text", "delta": "after"}
    )
    async with stub(answer(body)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert texts(chunks) == ["answer"]
    assert chunks[-1] == StreamChunk("done")


async def test_answer_tool_and_custom_tools() -> None:
    frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "ask-tool",
        "instanceId": "tool-1",
        "props": {"n": 1},
        "fallback": {"kind": "ask-tool", "summary": "A tool ran."},
    }
    body = lines(
        {"type": "tool", "id": "a", "name": "answer", "args": {"markdown": "From a tool."}},
        {"type": "tool", "id": "t", "name": "custom", "args": {}},
        {"type": "tool", "id": "u", "name": "unknown", "args": {}},
        {"type": "done"},
    )
    seen: list[str] = []

    def project(event: Any) -> Any:
        seen.append(event.name)
        return frame if event.name == "custom" else {"not": "a frame"}

    async with stub(answer(body)) as server:
        adapter = create_ask_adapter(endpoint=server.ask, project_tool=project)
        chunks = await collect(adapter)
    parts = decoded(chunks)
    assert parts[0] == TextPart(kind="text", text="From a tool.")
    assert isinstance(parts[1], ComponentPart)
    assert parts[1].frame.to_wire() == frame
    assert len(parts) == 2
    assert seen == ["custom", "unknown"]


async def test_empty_successful_body_is_done() -> None:
    async with stub(answer(b"", status=204, media_type=None)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert chunks == [StreamChunk("done")]


async def test_unreachable_service_is_a_fixed_error() -> None:
    async with stub(answer(b"")) as server:
        url = server.ask
    # The server is gone: its port refuses connections.
    chunks = await collect(create_ask_adapter(endpoint=url))
    assert chunks == [StreamChunk("error", content=ASK_REQUEST_FAILED_MESSAGE)]


async def test_headers_are_sent_and_content_type_is_fixed() -> None:
    async with stub(answer(lines({"type": "done"}))) as server:
        adapter = create_ask_adapter(
            endpoint=server.ask,
            headers={"Authorization": "Bearer key", "Content-Type": "text/plain"},
        )
        await collect(adapter)
    assert server.seen[0].headers["authorization"] == "Bearer key"
    assert server.seen[0].headers["content-type"] == "application/json"


async def test_shared_client_timeouts_do_not_cut_a_slow_body() -> None:
    async def slow(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield lines({"type": "text", "delta": "a"})
            await anyio.sleep(0.5)  # longer than the shared client's own read timeout
            yield lines({"type": "text", "delta": "b"}, {"type": "done"})

        return StreamingResponse(body(), media_type=NDJSON)

    async with stub(slow) as server, httpx.AsyncClient(timeout=0.1) as client:
        chunks = await collect(create_ask_adapter(endpoint=server.ask, http_client=client))
    assert texts(chunks) == ["a", "b"]


async def test_no_silent_line_drops() -> None:
    """DECISIONS 15: a read holding more than 4,096 lines loses none of them."""
    body = b"\n" * 10000 + lines({"type": "text", "delta": "after blank lines"}, {"type": "done"})
    async with stub(answer(body)) as server:
        chunks = await collect(create_ask_adapter(endpoint=server.ask))
    assert texts(chunks) == ["after blank lines"]


# --- the request --------------------------------------------------------------------------------


async def test_client_trims_history_to_the_server_bounds() -> None:
    """DECISIONS 14: newest 64 messages, each cut to 16,384 units without splitting a pair."""
    long = "a" * 16383 + "😀" + "tail"
    contents = [f"message {i}" for i in range(68)] + ["b" * 20000, long]
    roles: tuple[MessageRole, MessageRole] = ("assistant", "user")  # the last one is a user's
    request = AdapterRequest(
        messages=tuple(message(roles[i % 2], text, i) for i, text in enumerate(contents))
    )
    async with stub(answer(lines({"type": "done"}))) as server:
        await collect(create_ask_adapter(endpoint=server.ask), request)
    sent = orjson.loads(server.seen[0].body)["messages"]
    assert len(sent) == 64
    assert sent[0] == {"role": "assistant", "content": "message 6"}
    assert sent[-2] == {"role": "assistant", "content": "b" * 16384}
    # Unit 16,384 is the first half of the emoji: it is left out rather than split.
    assert sent[-1] == {"role": "user", "content": "a" * 16383}
    assert decode_ask_request(server.seen[0].body).ok


async def test_history_projection_is_sent() -> None:
    encoder = create_assistant_content_encoder()
    tool_frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "ask-tool",
        "instanceId": "tool-1",
        "props": None,
        "fallback": {"kind": "ask-tool", "summary": "Tool."},
    }
    assistant = encoder.encode({"kind": "text", "text": "answer"}) + encoder.encode(
        {"kind": "component", "frame": tool_frame}
    )
    assert assistant.startswith(ASSISTANT_CONTENT_PREFIX)
    messages = (
        message("user", "first", 0),
        message("assistant", assistant, 1),
        message("system", "ignored", 2),
        message("tool", "ignored", 3),
        message("user", "second", 4),
    )
    async with stub(answer(lines({"type": "done"}))) as server:
        await collect(create_ask_adapter(endpoint=server.ask), AdapterRequest(messages=messages))
    assert orjson.loads(server.seen[0].body)["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer\n[ask-tool]"},
        {"role": "user", "content": "second"},
    ]


async def test_deterministic_escalation_reaches_the_service_with_the_session() -> None:
    body = lines({"type": "text", "delta": "From the backend."}, {"type": "done"})
    async with stub(answer(body)) as server:
        adapter = create_deterministic_answer_adapter(
            artifact=ARTIFACT,
            expected_content_hash=HASH,
            expected_site_id=SITE,
            fallback_mode="backend",
            fallback=create_ask_adapter(endpoint=server.ask),
            now=now,
        )
        source = adapter.create_source_for_session(ask("compare these frameworks"), "session-1")
        chunks = [chunk async for chunk in source.stream()]
    sent = orjson.loads(server.seen[0].body)
    assert sent["sessionId"] == "session-1"
    assert sent["deterministic"]["reason"] == "miss"
    assert sent["deterministic"]["query"] == "compare these frameworks"
    assert texts(chunks) == ["From the backend."]
    assert chunks[-1].metadata is not None
    final: AnswerEnvelope = chunks[-1].metadata["answer"]
    assert final.outcome == "answer"


# --- the adapter --------------------------------------------------------------------------------


async def test_adapter_surface() -> None:
    adapter = create_ask_adapter(endpoint="https://ask.example/v1/ask")
    assert isinstance(adapter, SessionAwareChatAdapter)
    assert adapter.capabilities == AdapterCapabilities(streaming=True, structured_output=True)
    plain = adapter.create_source(ask("Question")).body
    assert b"sessionId" not in plain
    assert adapter.create_source_for_session(ask("Question"), "unscoped").body == plain


async def test_a_source_streams_once() -> None:
    async with stub(answer(lines({"type": "done"}))) as server:
        source = create_ask_adapter(endpoint=server.ask).create_source(ask("Question"))
        assert [chunk async for chunk in source.stream()] == [StreamChunk("done")]
        with pytest.raises(AgentsKitChatError):
            async for _ in source.stream():
                pass
    assert len(server.seen) == 1
