"""The docs assistant's web app at its edges: one authentication rule, one JSON rule, one body
reader (bounded in size and time), and clients that leave early."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.protocol import ASK_ERROR_CASES
from agentskit_chat.protocol._decode import NOT_JSON, as_text, parse_candidate
from agentskit_chat.server import create_docs_assistant_app as web_app
from tests.assistant._support import clock, serve, write_docs
from tests.server._sockets import response_to_a_dripping_body

pytestmark = pytest.mark.anyio

KEY = {"authorization": "Bearer s3cret-key"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


@pytest.fixture
async def assistant(docs: Path) -> AsyncIterator[DocsAssistant]:
    async with create_docs_assistant(docs, now=clock) as opened:
        yield opened


def _diagnostic(case: str) -> dict[str, object]:
    return {"error": ASK_ERROR_CASES[case].to_diagnostic().to_wire()}


ROUTES = [
    ("GET", "/docs/guide", None),
    ("GET", "/api/chat?sessionId=s1", None),
    ("GET", "/metrics", None),
    ("POST", "/api/answer", b'{"question":"Setup guide"}'),
    ("POST", "/api/ask", b'{"messages":[{"role":"user","content":"Setup guide"}]}'),
    ("GET", "/no-such-route", None),
]


async def test_every_route_but_healthz_needs_the_key(docs: Path) -> None:
    assert ROUTES
    async with (
        create_docs_assistant(docs, api_key="s3cret-key", now=clock) as assistant,
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        json = {"content-type": "application/json"}
        refused = [
            await client.request(method, path, content=content, headers=json)
            for method, path, content in ROUTES
        ]
        admitted = [
            await client.request(method, path, content=content, headers={**json, **KEY})
            for method, path, content in ROUTES
        ]
        health = await client.get("/healthz")
    for response in refused:
        assert response.status_code == 401, response.request.url
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "ASK_UNAUTHORIZED"
    assert [r.status_code for r in admitted] == [200, 200, 200, 200, 200, 404]
    # The one public route says whether the assistant is ready, and nothing else.
    assert (health.status_code, health.json()) == (200, {"status": "ok"})


async def test_remote_clients_without_a_key_reach_no_route_but_healthz(
    assistant: DocsAssistant,
) -> None:
    transport = httpx.ASGITransport(web_app(assistant), client=("203.0.113.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        json = {"content-type": "application/json"}
        statuses = [
            (await client.request(method, path, content=content, headers=json)).status_code
            for method, path, content in ROUTES
        ]
        health = await client.get("/healthz")
    assert statuses == [401] * len(ROUTES)
    assert health.status_code == 200


async def test_the_page_and_its_files_are_public_and_hold_no_data(
    assistant: DocsAssistant,
) -> None:
    transport = httpx.ASGITransport(web_app(assistant), client=("203.0.113.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        public = [await client.get(path) for path in ("/", "/static/app.js", "/static/theme.css")]
    assert [response.status_code for response in public] == [200, 200, 200]
    # Nothing of the docs folder is in them.
    assert not any("widget" in response.text for response in public)


# (body, answered): whether /api/answer answers it (200); every other body is refused alike.
HOSTILE_JSON = [
    (b'{"question":"\\ud800 Setup guide"}', True),
    (b'{"question":"Setup guide","n":1e400}', True),
    (b'{"question":"Setup guide","deep":' + b"[" * 1100 + b"]" * 1100 + b"}", True),
    (b'{"question":"Setup guide","deep":' + b"[" * 30000 + b"]" * 30000 + b"}", False),
    (b'{"question":"Setup guide"', False),
    (b'{"question":"Setup guide"} trailing', False),
    (b"\xef\xbb\xbf" + b'{"question":"Setup guide"}', True),
    (b'{"question":"Setup guide","x":"\\u0000"}', True),
]


@pytest.mark.parametrize(("raw", "answered_ok"), HOSTILE_JSON, ids=range(len(HOSTILE_JSON)))
async def test_answer_and_ask_read_json_by_the_protocols_one_rule(
    assistant: DocsAssistant, raw: bytes, answered_ok: bool
) -> None:
    not_json = parse_candidate(as_text(raw)) is NOT_JSON
    transport = httpx.ASGITransport(web_app(assistant), client=("127.0.0.1", 40000))
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        answered = await client.post("/api/answer", content=raw, headers=headers)
        asked = await client.post("/api/ask", content=raw, headers=headers)
    # Both routes call the body "not valid JSON" exactly when the protocol's parser does.
    assert (answered.json() == _diagnostic("invalid_json")) is not_json
    assert (asked.json() == _diagnostic("invalid_json")) is not_json
    assert (answered.status_code == 200) is answered_ok
    if not answered_ok and not not_json:
        # Past the protocol's nesting bound: the same refusal on both routes.
        assert answered.json() == asked.json() == _diagnostic("invalid_request")


@pytest.mark.parametrize("path", ["/api/answer", "/api/ask"])
async def test_a_body_that_drips_in_is_timed_out(assistant: DocsAssistant, path: str) -> None:
    request = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "content-length: 4000\r\n\r\n"
    ).encode()
    async with serve(web_app(assistant, body_timeout=0.3)) as url:
        port = int(url.rsplit(":", 1)[1])
        # One byte every 50 ms, 200 at most: bounded, and far short of the declared length.
        raw = await response_to_a_dripping_body(port, request)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert orjson.loads(payload) == _diagnostic("request_timeout")


async def test_a_client_leaving_mid_body_is_quiet(
    assistant: DocsAssistant, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    request = (
        b"POST /api/answer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b'content-length: 4000\r\n\r\n{"question":'
    )
    async with serve(web_app(assistant)) as url, httpx.AsyncClient(base_url=url) as client:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request)
            await anyio.sleep(0.2)
        await anyio.sleep(0.3)
        after = await client.post("/api/answer", json={"question": "Setup guide"})
    assert after.status_code == 200  # the server goes on serving
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert not any(r.exc_info for r in caplog.records)


async def test_the_body_timeout_must_be_positive(assistant: DocsAssistant) -> None:
    from agentskit_chat.errors import ConfigurationError  # noqa: PLC0415

    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(ConfigurationError, match="body timeout"):
            web_app(assistant, body_timeout=bad)
