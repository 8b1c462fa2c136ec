"""The docs assistant's web app over a real uvicorn socket on 127.0.0.1 (port 0)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.assistant import NO_GROUNDED_SOURCES, DocsAssistant, create_docs_assistant
from agentskit_chat.protocol import decode_answer_response
from agentskit_chat.server import create_docs_assistant_app as web_app
from agentskit_chat.service import InMemoryRateLimiter
from tests.assistant._support import clock, serve, write_docs

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
BACKEND_QUESTION = "How do I set the cache size?"


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


def ask_body(question: str) -> bytes:
    return orjson.dumps({"messages": [{"role": "user", "content": question}]})


async def test_answer_endpoint_answers_every_outcome(assistant: DocsAssistant) -> None:
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        exact = await client.post("/api/answer", json={"question": "Setup guide"})
        grounded = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
        refused = await client.post("/api/answer", json={"question": "Capital of France?"})
    for response in (exact, grounded, refused):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.headers["cache-control"] == "no-store"
        assert decode_answer_response(response.content).ok
    assert exact.json()["provenance"]["source"] == "local"
    body = grounded.json()
    assert body["provenance"] == {
        "source": "backend",
        "provider": "agentskit-chat",
        "model": "extractive",
    }
    assert body["answer"]["citations"][0]["href"] == "/docs/guide#configuring-the-cache"
    assert refused.json()["outcome"] == "escalation"
    assert refused.json()["message"] == NO_GROUNDED_SOURCES


@pytest.mark.parametrize(
    ("headers", "content", "status", "message"),
    [
        ({"content-type": "text/plain"}, b'{"question":"x"}', 415, "Content-Type must be"),
        (JSON, b"{not json", 400, "Request body is not valid JSON."),
        (JSON, b'{"query":"x"}', 400, "The Ask request payload is invalid."),
        (JSON, b'{"question":42}', 400, "The Ask request payload is invalid."),
        (JSON, b'{"question":"   "}', 400, "A user question is required."),
        (JSON, b'{"question":"' + b"x" * 70000 + b'"}', 413, "Request body is too large."),
    ],
)
async def test_answer_endpoint_refuses_bad_requests(
    assistant: DocsAssistant, headers: dict[str, str], content: bytes, status: int, message: str
) -> None:
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        response = await client.post("/api/answer", content=content, headers=headers)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == "ASK_INVALID_REQUEST"
    assert error["message"].startswith(message)
    assert error["retryable"] is False


async def test_ask_endpoint_streams_ndjson_with_citations(assistant: DocsAssistant) -> None:
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        response = await client.post(
            "/api/ask",
            content=ask_body(BACKEND_QUESTION),
            headers=JSON,
            params={"corpus": "docs", "persona": "docs-guide"},
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    events = [orjson.loads(line) for line in response.content.splitlines()]
    kinds = [event["type"] for event in events]
    assert kinds[-2:] == ["tool", "done"]
    assert set(kinds[:-2]) == {"text"}
    assert "cache_size" in "".join(event["delta"] for event in events[:-2])
    cite = events[-2]
    assert cite["name"] == "cite"
    assert cite["args"]["sources"][0]["path"] == "/docs/guide#configuring-the-cache"
    assert events[-1] == {"type": "done", "model": "extractive"}


@pytest.mark.parametrize(
    ("question", "params", "status", "code"),
    [
        ("What is the capital of France?", {}, 422, "ASK_NO_GROUNDED_SOURCES"),
        (
            "What is the weather forecast for the cache conference?",
            {},
            422,
            "ASK_NO_GROUNDED_SOURCES",
        ),
        (BACKEND_QUESTION, {"corpus": "other"}, 403, "ASK_FORBIDDEN"),
        (BACKEND_QUESTION, {"persona": "someone-else"}, 403, "ASK_FORBIDDEN"),
    ],
)
async def test_ask_endpoint_refusals(
    assistant: DocsAssistant, question: str, params: dict[str, str], status: int, code: str
) -> None:
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        response = await client.post(
            "/api/ask", content=ask_body(question), headers=JSON, params=params
        )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert "/docs/" not in response.text


async def test_healthz_metrics_and_index(assistant: DocsAssistant) -> None:
    question = "Which license is the widget released under?"
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        health = await client.get("/healthz")
        asked = await client.post("/api/ask", content=ask_body(question), headers=JSON)
        metrics = await client.get("/metrics")
        index = await client.get("/")
        wrong_method = await client.get("/api/answer")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert asked.status_code == 200
    assert metrics.status_code == 200
    text = metrics.text
    assert "agentskit_ask_request_duration_milliseconds_bucket" in text
    assert 'site_id="docs"' in text
    assert 'corpus_id="docs"' in text
    assert "license" not in text.lower()  # no question, answer or excerpt in metrics
    assert index.headers["content-type"].startswith("text/html")
    assert "<title>Docs assistant</title>" in index.text
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"
    assert wrong_method.json()["error"]["message"] == "Only POST is supported."


async def test_api_key_is_required_when_set(docs: Path) -> None:
    async with (
        create_docs_assistant(docs, api_key="s3cret-key", now=clock) as assistant,
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        missing = await client.post("/api/answer", json={"question": "Setup guide"})
        wrong = await client.post(
            "/api/ask",
            content=ask_body(BACKEND_QUESTION),
            headers={**JSON, "authorization": "Bearer nope"},
        )
        good = {"authorization": "Bearer s3cret-key"}
        answer = await client.post("/api/answer", json={"question": "Setup guide"}, headers=good)
        asked = await client.post(
            "/api/ask", content=ask_body(BACKEND_QUESTION), headers={**JSON, **good}
        )
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == "ASK_UNAUTHORIZED"
        assert "x-request-id" not in refused.headers
    assert answer.status_code == 200
    assert asked.status_code == 200


@pytest.mark.parametrize(
    ("api_key", "headers", "status"),
    [
        (None, {}, 401),
        (None, {"authorization": "Bearer anything"}, 401),
        ("k-123", {"authorization": "Bearer k-123"}, 200),
    ],
)
async def test_remote_clients_need_the_api_key(
    docs: Path, api_key: str | None, headers: dict[str, str], status: int
) -> None:
    # httpx's ASGI transport lets the test pose as a client on another machine.
    async with create_docs_assistant(docs, api_key=api_key, now=clock) as assistant:
        transport = httpx.ASGITransport(web_app(assistant), client=("203.0.113.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            answer = await client.post(
                "/api/answer", json={"question": "Setup guide"}, headers=headers
            )
            asked = await client.post(
                "/api/ask", content=ask_body(BACKEND_QUESTION), headers={**JSON, **headers}
            )
    assert (answer.status_code, asked.status_code) == (status, status)


async def test_http_callers_are_rate_limited_on_escalated_questions(docs: Path) -> None:
    limiter = InMemoryRateLimiter(capacity=1, refill_per_second=0.01)
    async with (
        create_docs_assistant(docs, rate_limiter=limiter, now=clock) as assistant,
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        first = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
        second = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
        exact = await client.post("/api/answer", json={"question": "Setup guide"})
        in_process = await assistant.ask(BACKEND_QUESTION)
    assert first.status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "ASK_RATE_LIMITED"
    assert int(second.headers["retry-after"]) >= 1
    assert exact.status_code == 200  # exact answers never reach the limiter
    assert in_process.outcome == "answer"


async def test_lifespan_opens_and_closes_an_unopened_assistant(docs: Path) -> None:
    assistant = create_docs_assistant(docs, now=clock)
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        health = await client.get("/healthz")
        answer = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
        assert assistant.is_open
    assert health.status_code == 200
    assert answer.json()["outcome"] == "answer"
    assert not assistant.is_open


async def test_closed_assistant_answers_unavailable(docs: Path) -> None:
    assistant = create_docs_assistant(docs, now=clock)
    transport = httpx.ASGITransport(web_app(assistant))  # no lifespan: never opened
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        health = await client.get("/healthz")
        asked = await client.post("/api/ask", content=ask_body(BACKEND_QUESTION), headers=JSON)
        answer = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
    assert health.status_code == 503
    assert asked.status_code == answer.status_code == 500
    assert asked.json()["error"]["code"] == "ASK_INTERNAL"


async def test_answer_endpoint_with_the_analyst_agent_returns_the_rendered_commit(
    docs: Path,
) -> None:
    payload = {"fields": [{"label": "Option", "value": "cache_size [1]"}], "basis": "Guide [1]."}

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("answer_commit", payload)])

    model = FunctionModel(reply, model_name="analyst-model")
    assistant = create_docs_assistant(docs, model=model, agent="analyst", now=clock)
    async with (
        serve(web_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        response = await client.post("/api/answer", json={"question": BACKEND_QUESTION})
    assert response.status_code == 200
    assert decode_answer_response(response.content).ok
    body = response.json()
    assert body["answer"]["markdown"] == "Guide [1].\n\n**Answer:** Option: cache_size [1]"
    assert body["answer"]["citations"][0]["href"] == "/docs/guide#configuring-the-cache"
    assert body["provenance"]["model"] == "analyst-model"
