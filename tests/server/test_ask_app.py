"""The Ask service over a real uvicorn socket on 127.0.0.1 (port 0), and in process.

httpx's ASGI transport buffers streamed bodies, so everything about streaming, disconnects
and unread bodies is tested over a real socket.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from agentskit_chat.protocol import ASK_ERROR_CASES, BackendMetric
from agentskit_chat.server import create_ask_service_app
from agentskit_chat.service import RateLimitDecision, TextDelta
from tests.server._sockets import read_response, response_to_a_dripping_body
from tests.service._support import (
    CONTEXT,
    FEDERATED_SITE,
    LOCAL_SITE,
    FixedLimiter,
    ScriptedGenerator,
    WaitingRetriever,
    authenticate,
    body,
    make_app,
    make_service,
    names,
    options,
    serve,
    site,
)

pytestmark = pytest.mark.anyio

AUTH = {"authorization": "Bearer valid", "content-type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("site", [LOCAL_SITE, FEDERATED_SITE], ids=["local", "federated"])
async def test_http_and_in_process_give_identical_events(site: dict[str, Any]) -> None:
    query = {"corpus": site["corpus"]["id"], "persona": site["assistant"]["id"]}
    direct = await make_service(site=site).stream(CONTEXT, body(), query)
    direct_body = "".join([line async for line in direct]).encode()
    async with serve(make_app(site=site)) as url, httpx.AsyncClient() as client:
        response = await client.post(url, content=body(), headers=AUTH, params=query)
    assert response.status_code == direct.status == 200
    assert response.content == direct_body
    for name in ("content-type", "cache-control", "x-content-type-options", "x-request-id"):
        assert response.headers[name] == direct.header(name)
    assert [orjson.loads(line)["type"] for line in direct_body.splitlines()] == [
        "text",
        "tool",
        "done",
    ]


async def test_http_streaming_is_not_buffered() -> None:
    generator = ScriptedGenerator(chunks=(TextDelta("first "),), wait=True)
    app = make_app(generator=generator, site=site(generationTimeoutMs=60000))
    async with (
        serve(app) as url,
        httpx.AsyncClient() as client,
        client.stream("POST", url, content=body(), headers=AUTH) as response,
    ):
        lines = response.aiter_lines()
        with anyio.fail_after(10):
            first = await lines.__anext__()
        # The generator has not finished: it is still waiting for this release.
        assert not generator.finished_normally
        assert orjson.loads(first) == {"type": "text", "delta": "first "}
        generator.release.set()
        rest = [orjson.loads(line) async for line in lines if line]
    assert [event["type"] for event in rest] == ["tool", "done"]
    assert generator.finished_normally


async def test_http_client_disconnect_cancels_the_generator() -> None:
    metrics: list[BackendMetric] = []
    generator = ScriptedGenerator(chunks=(TextDelta("partial "),), wait=True)
    # Deadlines far beyond the waits below: only the disconnect can end these requests.
    app = make_app(
        generator=generator,
        on_metric=metrics.append,
        site=site(generationTimeoutMs=120000, requestTimeoutMs=120000),
    )
    async with serve(app) as url:
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", url, content=body(), headers=AUTH) as response,
        ):
            with anyio.fail_after(10):
                first = await response.aiter_lines().__anext__()
            assert orjson.loads(first)["delta"] == "partial "
        with anyio.fail_after(10):
            await generator.closed.wait()
            while "request.total_ms" not in names(metrics):
                await anyio.sleep(0.01)
    assert not generator.finished_normally
    assert names(metrics).count("cancellation.count") == 1
    assert [(m.name, m.outcome) for m in metrics[-2:]] == [
        ("cancellation.count", "cancelled"),
        ("request.total_ms", "cancelled"),
    ]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_http_rate_limit_answers_before_a_slow_body_arrives(chunked: bool) -> None:
    limiter = FixedLimiter(RateLimitDecision(allowed=False, retry_after_seconds=15))
    framing = (
        b'transfer-encoding: chunked\r\n\r\n5\r\n{"mes\r\n'
        if chunked
        else b'content-length: 60000\r\n\r\n{"mes'
    )
    request = (
        b"POST /v1/ask HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer valid\r\n"
        b"content-type: application/json\r\n" + framing
    )
    async with serve(make_app(rate_limiter=limiter)) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            # The rest of the body would take "forever": it is never sent at all.
            await stream.send(request)
            raw = await read_response(stream)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 ")
    assert b"\r\nretry-after: 15" in head
    assert orjson.loads(payload) == {
        "error": {
            "code": "ASK_RATE_LIMITED",
            "message": "The Ask rate limit was exceeded.",
            "retryable": True,
        }
    }


async def test_http_refused_authentication_is_the_host_response() -> None:
    async with serve(make_app()) as url, httpx.AsyncClient() as client:
        response = await client.post(
            url, content=body(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
    assert "x-request-id" not in response.headers


@pytest.mark.parametrize(
    ("query", "status"),
    [
        (b"corpus=docs-public&corpus=evil", 200),
        (b"corpus=evil&corpus=docs-public", 403),
        (b"corpus=docs%2Dpublic&persona=docs-guide", 200),
        (b"persona=", 403),
        (b"corpus=docs-public+", 403),
    ],
)
async def test_http_hints_use_the_first_value_of_each_parameter(query: bytes, status: int) -> None:
    async with serve(make_app()) as url, httpx.AsyncClient() as client:
        response = await client.post(f"{url}/v1/ask?{query.decode()}", content=body(), headers=AUTH)
    assert response.status_code == status


async def test_http_declared_oversize_body_is_413() -> None:
    async with serve(make_app(max_body_bytes=100)) as url, httpx.AsyncClient() as client:
        response = await client.post(url, content=b" " * 101, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["error"]["message"] == "Request body is too large."
    assert response.headers["x-request-id"] == "request-1"


async def test_http_disconnect_before_the_response_cancels_retrieval() -> None:
    metrics: list[BackendMetric] = []
    retriever = WaitingRetriever()
    app = make_app(
        retrievers={"local": retriever},
        on_metric=metrics.append,
        site=site(retrievalTimeoutMs=60000, requestTimeoutMs=120000),
    )
    payload = body()
    request = (
        b"POST /v1/ask HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer valid\r\n"
        b"content-type: application/json\r\ncontent-length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
        + payload
    )
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request)
            with anyio.fail_after(10):
                await retriever.started.wait()
        with anyio.fail_after(10):
            while "request.total_ms" not in names(metrics):
                await anyio.sleep(0.01)
    assert retriever.cancelled
    assert [(m.name, m.outcome) for m in metrics[-2:]] == [
        ("cancellation.count", "cancelled"),
        ("request.total_ms", "cancelled"),
    ]


async def test_asgi_disconnect_before_the_response_answers_499() -> None:
    retriever = WaitingRetriever()
    app = make_app(retrievers={"local": retriever})
    sent: list[MutableMapping[str, Any]] = []
    calls = 0

    async def receive() -> MutableMapping[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            return {"type": "http.request", "body": body(), "more_body": False}
        await retriever.started.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer valid"), (b"content-type", b"application/json")],
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert retriever.cancelled
    assert sent[0]["status"] == 499
    case = ASK_ERROR_CASES["cancelled"]
    assert orjson.loads(sent[1]["body"]) == {
        "error": {"code": case.code, "message": case.message, "retryable": True}
    }


async def test_http_mounted_in_starlette() -> None:
    host = Starlette(routes=[Route("/v1/ask", make_app(), methods=["POST", "GET"])])
    async with serve(host) as url, httpx.AsyncClient() as client:
        ok = await client.post(f"{url}/v1/ask", content=body(), headers=AUTH)
        wrong = await client.get(f"{url}/v1/ask", headers=AUTH)
    assert ok.status_code == 200
    assert [orjson.loads(line)["type"] for line in ok.text.splitlines()] == [
        "text",
        "tool",
        "done",
    ]
    assert wrong.status_code == 405
    assert wrong.json()["error"]["message"] == "Only POST is supported."
    assert wrong.headers["allow"] == "POST"


async def test_http_disconnect_while_the_body_is_read_is_a_cancellation() -> None:
    metrics: list[BackendMetric] = []
    retriever = WaitingRetriever()
    app = make_app(
        retrievers={"local": retriever},
        on_metric=metrics.append,
        # A deadline far beyond the wait below: only the disconnect can end this request.
        site=site(requestTimeoutMs=120000),
    )
    request = (
        b"POST /v1/ask HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer valid\r\n"
        b'content-type: application/json\r\ncontent-length: 5000\r\n\r\n{"messages"'
    )
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request)
            await anyio.sleep(0.2)
            assert metrics == []
        with anyio.fail_after(10):
            while "request.total_ms" not in names(metrics):
                await anyio.sleep(0.01)
    assert not retriever.started.is_set()
    assert [(m.name, m.outcome) for m in metrics] == [
        ("cancellation.count", "cancelled"),
        ("request.total_ms", "cancelled"),
    ]


async def test_http_a_body_that_drips_in_is_timed_out() -> None:
    metrics: list[BackendMetric] = []
    retriever = WaitingRetriever()
    app = make_app(
        retrievers={"local": retriever},
        on_metric=metrics.append,
        body_timeout=0.3,
        # The request deadline is far away: only the body deadline can end this request.
        site=site(requestTimeoutMs=120000),
    )
    request = (
        b"POST /v1/ask HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer valid\r\n"
        b"content-type: application/json\r\ncontent-length: 5000\r\n\r\n"
    )
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        # One byte every 50 ms, 200 at most: bounded, and far short of the declared length.
        raw = await response_to_a_dripping_body(port, request)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert (
        orjson.loads(payload)["error"]
        == ASK_ERROR_CASES["request_timeout"].to_diagnostic().to_wire()
    )
    assert not retriever.started.is_set()
    # The client was too slow: a refusal of its request, not a cancellation of ours.
    assert ("request.total_ms", "rejected") in [(m.name, m.outcome) for m in metrics]


async def test_http_a_client_gone_during_authentication_is_noticed_at_the_body() -> None:
    # ASGI reports a disconnect only through receive(), which hands out the body first, and the
    # body must not be read before the rate limit. So a client that leaves while it is being
    # authenticated is noticed when the body is read: nothing is retrieved or generated.
    metrics: list[BackendMetric] = []
    retriever = WaitingRetriever()
    generator = ScriptedGenerator(chunks=(TextDelta("never"),))
    released = anyio.Event()
    gone = anyio.Event()

    async def slow_authenticate(request: Any) -> Any:
        await gone.wait()
        released.set()
        return authenticate(request)

    app = create_ask_service_app(
        authenticate=slow_authenticate,
        **options(retrievers={"local": retriever}, generator=generator, on_metric=metrics.append),
    )
    request = (
        b"POST /v1/ask HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer valid\r\n"
        b'content-type: application/json\r\ncontent-length: 5000\r\n\r\n{"messages"'
    )
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request)
            await anyio.sleep(0.1)
        gone.set()
        with anyio.fail_after(10):
            await released.wait()
            while "request.total_ms" not in names(metrics):
                await anyio.sleep(0.01)
    assert not retriever.started.is_set()
    assert generator.requests == []
    assert [(m.name, m.outcome) for m in metrics][-1] == ("request.total_ms", "cancelled")
