"""The Ask service pipeline: the worked examples, the error catalogue, order, authority, deadlines,
persistence, metrics, and the DECISIONS rules it implements (2, 3, 4, 6, 8)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import AskServiceError, StorageError
from agentskit_chat.protocol import (
    ASK_ERROR_CASES,
    AskSessionRecord,
    BackendMetric,
    decode_ask_events,
)
from agentskit_chat.server._ask_app import serve_ask
from agentskit_chat.service import (
    AskResponse,
    AskService,
    Authenticated,
    GenerationRequest,
    RateLimitDecision,
    SessionKey,
    TextDelta,
    UsageReport,
)
from tests.service._support import (
    ANSWER,
    CONTEXT,
    ESCALATION,
    FEDERATED_SITE,
    HAPPY_METRICS,
    LOCAL_SOURCE,
    QUESTION,
    REGISTRY_SOURCE,
    FailingRetriever,
    FixedLimiter,
    HistoryGenerator,
    ListRetriever,
    MemoryStore,
    ScriptedGenerator,
    ShieldedRetriever,
    SlowRetriever,
    WaitingRetriever,
    body,
    error_body,
    make_app,
    make_service,
    names,
    read_all,
    site,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def diag(name: str) -> dict[str, Any]:
    case = ASK_ERROR_CASES[name]
    return {"error": {"code": case.code, "message": case.message, "retryable": case.retryable}}


# --- worked examples ------------------------------------------------------------------------------


async def test_vector_local_happy_path_with_persistence_and_usage() -> None:
    metrics: list[BackendMetric] = []
    store = MemoryStore()
    service = make_service(on_metric=metrics.append, session_store=store)
    response = await service.stream(
        CONTEXT,
        body(deterministic=ESCALATION),
        {"corpus": "docs-public", "persona": "docs-guide"},
    )
    assert response.status == 200
    assert response.header("x-request-id") == "request-1"
    assert response.header("content-type") == "application/x-ndjson; charset=utf-8"
    assert response.header("cache-control") == "no-store"
    assert response.header("x-content-type-options") == "nosniff"
    assert await read_all(response) == [
        {"type": "text", "delta": ANSWER},
        {
            "type": "tool",
            "id": "sources-request-1",
            "name": "cite",
            "args": {
                "sources": [{"id": "local-guide", "title": "Local guide", "path": "/docs/start"}]
            },
        },
        {"type": "done", "model": "fixture-model"},
    ]
    stored = store.records[("docs", "user-1", "session-1")]
    assert stored.revision == 1
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    assert stored.messages[-1].content == ANSWER
    assert names(metrics) == HAPPY_METRICS
    assert len(set(names(metrics))) == 14
    for metric in metrics:
        wire = metric.to_wire()
        assert list(wire) == [
            "protocol",
            "version",
            "name",
            "siteId",
            "corpusId",
            "requestId",
            "value",
            "unit",
            "outcome",
            "emittedAt",
        ]
        assert (wire["siteId"], wire["corpusId"], wire["outcome"]) == ("docs", "docs-public", "ok")
        assert QUESTION not in metric.to_json()
    values = {m.name: m.value for m in metrics}
    assert values["deterministic.fallback"] == 1
    assert values["retrieval.documents"] == 1
    assert values["usage.total_tokens"] == 18
    assert values["cost.usd"] == 0.001
    assert values["stream.events"] == 3
    assert values["stream.snapshots"] == 0


async def test_vector_federated_authority() -> None:
    federated = ListRetriever([REGISTRY_SOURCE])
    local = ListRetriever()
    service = make_service(site=FEDERATED_SITE, retrievers={"local": local, "federated": federated})

    refused = await service.stream(CONTEXT, body(), {"corpus": "private-corpus"})
    assert (refused.status, error_body(refused)) == (403, diag("forbidden"))
    assert federated.requests == []

    smuggled = await service.stream(
        CONTEXT,
        body(siteId="private-site", corpus="private-corpus"),
    )
    assert (smuggled.status, error_body(smuggled)) == (400, diag("invalid_request"))
    assert federated.requests == []

    events = await read_all(await service.stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "tool", "done"]
    assert events[1]["args"]["sources"][0]["id"] == "registry-guide"
    assert local.requests == []
    (request,) = federated.requests
    assert request.site.site_id == "registry"
    assert request.site.assistant.id == "registry-guide"
    assert request.site.assistant.suggestions == ("Find a test agent",)
    assert request.site.corpus.id == "registry-public"
    assert request.site.components == ("source-list",)
    assert request.site.actions == ("open-agent",)


@pytest.mark.parametrize("payload", [body(), b"{"])
async def test_vector_rate_limited_before_the_body(payload: bytes) -> None:
    limiter = FixedLimiter(RateLimitDecision(allowed=False, retry_after_seconds=15))
    retriever = ListRetriever()
    service = make_service(rate_limiter=limiter, retrievers={"local": retriever})
    response = await service.stream(CONTEXT, payload)
    assert (response.status, error_body(response)) == (429, diag("rate_limited"))
    assert response.header("retry-after") == "15"
    assert response.header("x-request-id") == "request-1"
    assert limiter.calls == [("docs", "user-1")]
    assert retriever.requests == []


async def test_vector_unsafe_sources_only_is_422() -> None:
    unsafe = {**LOCAL_SOURCE, "href": "javascript:alert(1)"}
    service = make_service(retrievers={"local": ListRetriever([unsafe])})
    response = await service.stream(CONTEXT, body())
    assert (response.status, error_body(response)) == (422, diag("no_grounded_sources"))


async def test_vector_retriever_error_text_never_leaks() -> None:
    metrics: list[BackendMetric] = []
    service = make_service(retrievers={"local": FailingRetriever()}, on_metric=metrics.append)
    response = await service.stream(CONTEXT, body())
    text = "".join([chunk async for chunk in response])
    assert response.status == 502
    assert orjson.loads(text) == diag("retrieval_failed")
    assert "password" not in text
    assert all("password" not in m.to_json() for m in metrics)


async def test_vector_request_deadline_with_a_waiting_retriever() -> None:
    retriever = WaitingRetriever()
    service = make_service(
        site=site(requestTimeoutMs=100, retrievalTimeoutMs=60000),
        retrievers={"local": retriever},
    )
    response = await service.stream(CONTEXT, body())
    assert response.status == 408
    assert "".join([chunk async for chunk in response]) == (
        '{"error":{"code":"ASK_TIMEOUT","message":"The Ask request timed out.","retryable":true}}'
    )
    assert retriever.cancelled


async def test_vector_generation_deadline_with_a_waiting_generator() -> None:
    generator = ScriptedGenerator(chunks=(), wait=True)
    service = make_service(site=site(generationTimeoutMs=100), generator=generator)
    response = await service.stream(CONTEXT, body())
    assert await read_all(response) == [
        {
            "type": "error",
            "message": "The Ask request timed out.",
            "code": "ASK_TIMEOUT",
            "retryable": True,
        }
    ]
    assert generator.closed.is_set()


async def test_vector_history_is_server_side() -> None:
    store = MemoryStore()
    generator = HistoryGenerator()
    service = make_service(session_store=store, generator=generator)
    await read_all(await service.stream(CONTEXT, body(("user", "first"))))
    stored = store.records[("docs", "user-1", "session-1")]
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", "first"),
        ("assistant", "history:1"),
    ]
    await read_all(
        await service.stream(
            CONTEXT, body(("user", "attacker supplied history"), ("user", "second"))
        )
    )
    seen = generator.requests[-1].messages
    assert [(m.role, m.content) for m in seen] == [
        ("user", "first"),
        ("assistant", "history:1"),
        ("user", "second"),
    ]
    assert store.records[("docs", "user-1", "session-1")].revision == 2


async def test_vector_persistence_conflict_is_a_trailing_error_event() -> None:
    metrics: list[BackendMetric] = []
    service = make_service(session_store=MemoryStore(save_result=False), on_metric=metrics.append)
    events = await read_all(await service.stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "tool", "error"]
    assert events[-1] == {
        "type": "error",
        "message": "The Ask session changed concurrently.",
        "code": "ASK_PERSISTENCE_CONFLICT",
        "retryable": True,
    }
    conflict = [m for m in metrics if m.name == "conflict.count"]
    assert [(m.value, m.outcome) for m in conflict] == [(1, "error")]
    save = [m for m in metrics if m.name == "persistence.total_ms"][-1]
    assert save.outcome == "error"
    assert names(metrics)[-2:] == ["error.count", "request.total_ms"]


async def test_vector_consumer_cancel_after_one_line() -> None:
    metrics: list[BackendMetric] = []
    generator = ScriptedGenerator(chunks=(TextDelta("partial "),), wait=True)
    service = make_service(generator=generator, on_metric=metrics.append)
    response = await service.stream(CONTEXT, body())
    first = await response.__anext__()
    assert orjson.loads(first) == {"type": "text", "delta": "partial "}
    await response.aclose()
    assert generator.closed.is_set()
    assert names(metrics)[-2:] == ["cancellation.count", "request.total_ms"]
    assert [m.outcome for m in metrics[-2:]] == ["cancelled", "cancelled"]
    assert names(metrics).count("cancellation.count") == 1
    for metric in metrics:
        assert QUESTION not in metric.to_json()
        assert len(metric.to_wire()) == 10
    # Closing twice, or reading after closing, changes nothing.
    await response.aclose()
    assert [chunk async for chunk in response] == []
    assert names(metrics).count("cancellation.count") == 1


# --- the error catalogue -------------------------------------------------------------------------


def _too_long() -> ScriptedGenerator:
    return ScriptedGenerator(chunks=(TextDelta("x" * 16384), TextDelta("y")))


async def handled(service: AskService, **arguments: Any) -> AskResponse:
    call: dict[str, Any] = {"body": body(), "authenticate": lambda: Authenticated(CONTEXT)}
    call.update(arguments)
    response = await serve_ask(service, **call)
    assert isinstance(response, AskResponse)
    return response


Overrides = Callable[[], dict[str, Any]]

CATALOGUE_HTTP: list[tuple[str, Overrides, dict[str, Any], int, str]] = [
    # (id, service overrides, handle() arguments, status, case)
    ("405", dict, {"method": "GET"}, 405, "method_not_allowed"),
    ("415", dict, {"content_type": "text/plain"}, 415, "unsupported_media_type"),
    ("415-missing", dict, {"content_type": None}, 415, "unsupported_media_type"),
    ("413-declared", dict, {"content_length": "65537"}, 413, "body_too_large"),
    ("413-read", dict, {"body": b" " * 65537}, 413, "body_too_large"),
    ("400-json", dict, {"body": b"{"}, 400, "invalid_json"),
    ("400-empty", dict, {"body": b""}, 400, "invalid_json"),
    ("400-payload", dict, {"body": body(corpus="x")}, 400, "invalid_request"),
    ("400-question", dict, {"body": body(("user", " \u00a0 "))}, 400, "question_required"),
    ("403", dict, {"query": {"persona": "other"}}, 403, "forbidden"),
    (
        "429",
        lambda: {"rate_limiter": FixedLimiter(RateLimitDecision(allowed=False))},
        {},
        429,
        "rate_limited",
    ),
    (
        "422",
        lambda: {"retrievers": {"local": ListRetriever([])}},
        {},
        422,
        "no_grounded_sources",
    ),
    (
        "408-retrieval",
        lambda: {
            "retrievers": {"local": WaitingRetriever()},
            "site": site(retrievalTimeoutMs=100),
        },
        {},
        408,
        "retrieval_timeout",
    ),
    (
        "408-request",
        lambda: {
            "retrievers": {"local": WaitingRetriever()},
            "site": site(requestTimeoutMs=100, retrievalTimeoutMs=1000),
        },
        {},
        408,
        "request_timeout",
    ),
    ("502", lambda: {"retrievers": {"local": FailingRetriever()}}, {}, 502, "retrieval_failed"),
    ("500-site", lambda: {"resolve_site": lambda c: {"siteId": "docs"}}, {}, 500, "internal"),
    ("500-site-raises", lambda: {"resolve_site": lambda c: 1 / 0}, {}, 500, "internal"),
    (
        "500-subject",
        lambda: {"resolve_subject_id": lambda c: "user 1"},
        {},
        500,
        "host_identity_invalid",
    ),
    ("500-store", lambda: {"session_store": None}, {}, 500, "persistence_not_configured"),
    (
        "500-retriever",
        lambda: {"retrievers": {"federated": ListRetriever()}},
        {},
        500,
        "retriever_unavailable",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "arguments", "status", "case"),
    [row[1:] for row in CATALOGUE_HTTP],
    ids=[row[0] for row in CATALOGUE_HTTP],
)
async def test_catalogue_pre_stream_rows(
    overrides: Overrides, arguments: dict[str, Any], status: int, case: str
) -> None:
    response = await handled(make_service(**overrides()), **arguments)
    assert response.status == status
    assert error_body(response) == diag(case)
    assert response.header("x-request-id") == "request-1"
    assert response.header("content-type") == "application/json; charset=utf-8"
    assert response.header("cache-control") == "no-store"
    # Only a limiter that says when to come back sets retry-after (see the worked examples).
    assert response.header("retry-after") is None
    assert [e async for e in response.events()] == []


CATALOGUE_STREAM: list[tuple[str, Overrides, str, str, bool]] = [
    # (id, service overrides, code, message, retryable)
    (
        "too-long",
        lambda: {"generator": _too_long()},
        "ASK_GENERATION_FAILED",
        "The grounded answer exceeded its safe limit.",
        False,
    ),
    (
        "empty",
        lambda: {"generator": ScriptedGenerator(chunks=(TextDelta(" \n "), TextDelta("")))},
        "ASK_GENERATION_FAILED",
        "The grounded answer was empty.",
        False,
    ),
    (
        "conflict",
        lambda: {"session_store": MemoryStore(save_result=False)},
        "ASK_PERSISTENCE_CONFLICT",
        "The Ask session changed concurrently.",
        True,
    ),
    (
        "timeout",
        lambda: {
            "generator": ScriptedGenerator(chunks=(), wait=True),
            "site": site(generationTimeoutMs=100),
        },
        "ASK_TIMEOUT",
        "The Ask request timed out.",
        True,
    ),
    (
        "internal",
        lambda: {
            "generator": ScriptedGenerator(
                chunks=({"type": "usage", "usage": {"inputTokens": 1.5}},)
            )
        },
        "ASK_INTERNAL",
        "The Ask request failed.",
        False,
    ),
]


@pytest.mark.parametrize(
    ("overrides", "code", "message", "retryable"),
    [row[1:] for row in CATALOGUE_STREAM],
    ids=[row[0] for row in CATALOGUE_STREAM],
)
async def test_catalogue_in_stream_rows(
    overrides: Overrides, code: str, message: str, retryable: bool
) -> None:
    response = await make_service(**overrides()).stream(CONTEXT, body())
    assert response.status == 200
    events = await read_all(response)
    assert events[-1] == {"type": "error", "message": message, "code": code, "retryable": retryable}
    assert [e for e in events if e["type"] in ("done", "error")] == [events[-1]]


async def test_catalogue_answer_limit_counts_utf16_and_stops_before_the_delta() -> None:
    exact = ScriptedGenerator(chunks=(TextDelta("😀" * 8191), TextDelta("ab")))
    events = await read_all(await make_service(generator=exact).stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "text", "tool", "done"]
    over = ScriptedGenerator(chunks=(TextDelta("😀" * 8191), TextDelta("abc")))
    events = await read_all(await make_service(generator=over).stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "error"]


@pytest.mark.parametrize("bad", [0, -1, True, 2**53, 1.5])
def test_catalogue_invalid_configuration_raises(bad: Any) -> None:
    for option in ("max_body_bytes", "bootstrap_timeout_ms"):
        with pytest.raises(AskServiceError) as raised:
            make_service(**{option: bad})
        error = raised.value
        assert (error.status, error.code, error.message, error.retryable) == (
            500,
            "ASK_INTERNAL",
            "The Ask handler configuration is invalid.",
            False,
        )


async def test_catalogue_authenticator_may_answer_with_its_own_diagnostic() -> None:
    def refuse() -> Any:
        raise AskServiceError(401, "ASK_UNAUTHORIZED", "Sign in first.", retryable=False)

    response = await handled(make_service(), authenticate=refuse)
    assert response.status == 401
    assert error_body(response)["error"] == {
        "code": "ASK_UNAUTHORIZED",
        "message": "Sign in first.",
        "retryable": False,
    }


# --- order ---------------------------------------------------------------------------------------


class RecordingReceive:
    """An ASGI receive that records whether the app asked for the body."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.calls = 0

    async def __call__(self) -> MutableMapping[str, Any]:
        self.calls += 1
        if self.calls == 1:
            return {"type": "http.request", "body": self.payload, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def call_app(
    app: Any,
    *,
    method: str = "POST",
    headers: Sequence[tuple[bytes, bytes]] = (
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer valid"),
    ),
    query: bytes = b"",
    receive: Callable[[], Any],
) -> tuple[int, dict[str, str], bytes]:
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/v1/ask",
        "raw_path": b"/v1/ask",
        "query_string": query,
        "headers": list(headers),
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5000),
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    start = sent[0]
    response_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], response_headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize(
    ("overrides", "headers", "query", "status"),
    [
        (
            lambda: {"rate_limiter": FixedLimiter(RateLimitDecision(allowed=False))},
            None,
            b"",
            429,
        ),
        (dict, None, b"corpus=private-corpus", 403),
        (dict, ((b"content-type", b"application/json"),), b"", 401),
        (dict, ((b"authorization", b"Bearer valid"),), b"", 415),
        (lambda: {"resolve_subject_id": lambda context: ""}, None, b"", 500),
    ],
    ids=["rate-limit", "hints", "authentication", "media-type", "subject"],
)
async def test_order_nothing_reads_the_body_before_the_rate_limit(
    overrides: Overrides, headers: Any, query: bytes, status: int
) -> None:
    receive = RecordingReceive(b"{")
    kwargs: dict[str, Any] = {"receive": receive, "query": query}
    if headers is not None:
        kwargs["headers"] = headers
    got, _, _ = await call_app(make_app(**overrides()), **kwargs)
    assert got == status
    assert receive.calls == 0


async def test_order_the_body_is_read_once_allowed() -> None:
    receive = RecordingReceive(body())
    status, headers, payload = await call_app(make_app(), receive=receive)
    assert status == 200
    assert receive.calls >= 1
    assert headers["x-request-id"] == "request-1"
    assert [e.type for e in decode_ask_events(payload.decode()).events] == ["text", "tool", "done"]


@pytest.mark.parametrize(
    ("arguments", "case"),
    [
        (
            {"method": "GET", "content_type": "text/plain", "query": {"corpus": "x"}},
            "method_not_allowed",
        ),
        ({"content_type": "text/plain", "query": {"corpus": "x"}}, "unsupported_media_type"),
        ({"query": {"corpus": "x"}, "body": b"{"}, "forbidden"),
        ({"body": b"{", "content_length": "999999"}, "body_too_large"),
        ({"body": body(("assistant", "hi"), extra=1)}, "invalid_request"),
        ({"body": body(("user", "  "), ("user", "  "))}, "question_required"),
    ],
    ids=[
        "method-first",
        "media-type-second",
        "hints-before-body",
        "size-before-json",
        "schema",
        "question",
    ],
)
async def test_order_earliest_failure_wins(arguments: dict[str, Any], case: str) -> None:
    assert error_body(await handled(make_service(), **arguments)) == diag(case)


async def test_order_a_chunked_body_is_cut_at_the_limit() -> None:
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield b"x" * 1000

    response = await handled(make_service(max_body_bytes=4096), body=endless())
    assert error_body(response) == diag("body_too_large")
    assert pulled == 5


async def test_order_refused_authentication_is_the_host_response() -> None:
    metrics: list[BackendMetric] = []
    receive = RecordingReceive(body())
    status, headers, payload = await call_app(
        make_app(on_metric=metrics.append),
        headers=((b"content-type", b"application/json"), (b"authorization", b"Bearer nope")),
        receive=receive,
    )
    assert (status, orjson.loads(payload)) == (401, {"error": "unauthorized"})
    assert "x-request-id" not in headers
    assert metrics == []


@pytest.mark.parametrize(
    "resolve_site",
    [lambda context: {"siteId": "docs"}, lambda context: 1 / 0],
    ids=["invalid-site", "raising"],
)
async def test_order_no_metrics_before_the_site_is_known(resolve_site: Any) -> None:
    metrics: list[BackendMetric] = []
    service = make_service(resolve_site=resolve_site, on_metric=metrics.append)
    response = await service.stream(CONTEXT, body())
    assert response.status == 500
    assert metrics == []


# --- hints and authority -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({}, 200),
        ({"corpus": "docs-public"}, 200),
        ({"persona": "docs-guide"}, 200),
        ({"corpus": "docs-public", "persona": "docs-guide"}, 200),
        ({"corpus": "registry-public"}, 403),
        ({"persona": "registry-guide"}, 403),
        ({"corpus": ""}, 403),
        ({"persona": ""}, 403),
        ({"corpus": "DOCS-PUBLIC"}, 403),
        ({"corpus": "docs-public", "persona": "x"}, 403),
    ],
)
async def test_hints_only_confirm_the_trusted_site(query: dict[str, str], status: int) -> None:
    retriever = ListRetriever()
    service = make_service(retrievers={"local": retriever})
    response = await service.stream(CONTEXT, body(), query)
    assert response.status == status
    await response.aclose()
    assert len(retriever.requests) == (1 if status == 200 else 0)


AUTHORITY_KEYS = st.sampled_from(
    ["siteId", "corpus", "persona", "assistant", "components", "actions", "tenant", "subject"]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=AUTHORITY_KEYS,
    value=st.one_of(st.text(max_size=20), st.integers(-(2**53), 2**53), st.none()),
)
def test_authority_smuggled_in_the_body_is_refused(key: str, value: Any) -> None:
    retriever = ListRetriever()

    async def run() -> Any:
        service = make_service(retrievers={"local": retriever})
        payload = orjson.loads(body())
        payload[key] = value
        return await service.stream(CONTEXT, orjson.dumps(payload))

    response = anyio.run(run)
    assert error_body(response) == diag("invalid_request")
    assert retriever.requests == []


async def test_authority_the_retriever_sees_only_the_trusted_site_and_server_history() -> None:
    retriever = ListRetriever()
    store = MemoryStore()
    store.records[("docs", "user-1", "session-1")] = AskSessionRecord.model_validate(
        {"revision": 3, "messages": [{"role": "user", "content": "stored"}]}
    )
    service = make_service(retrievers={"local": retriever}, session_store=store)
    await read_all(
        await service.stream(
            CONTEXT,
            body(("assistant", "forged"), ("user", "  real question  ")),
            {"corpus": "docs-public"},
        )
    )
    (request,) = retriever.requests
    assert request.query == "real question"
    assert [m.content for m in request.messages] == ["stored", "  real question  "]
    assert request.site.corpus.id == "docs-public"
    assert store.records[("docs", "user-1", "session-1")].revision == 4


# --- deadlines -----------------------------------------------------------------------------------


async def test_deadline_a_retriever_ignoring_cancellation_still_times_out() -> None:
    service = make_service(
        site=site(requestTimeoutMs=100, retrievalTimeoutMs=1000),
        retrievers={"local": ShieldedRetriever(0.3)},
    )
    response = await service.stream(CONTEXT, body())
    assert (response.status, error_body(response)) == (408, diag("request_timeout"))


async def test_deadline_persistence_is_bounded_by_the_request_deadline() -> None:
    class HangingStore(MemoryStore):
        async def save(self, key: SessionKey, record: AskSessionRecord, expected: int) -> bool:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    service = make_service(session_store=HangingStore(), site=site(requestTimeoutMs=200))
    events = await read_all(await service.stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "tool", "error"]
    assert events[-1]["code"] == "ASK_TIMEOUT"


async def test_deadline_outside_cancellation_is_propagated_and_recorded() -> None:
    metrics: list[BackendMetric] = []
    retriever = WaitingRetriever()
    service = make_service(
        retrievers={"local": retriever},
        on_metric=metrics.append,
        site=site(retrievalTimeoutMs=60000, requestTimeoutMs=120000),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.stream, CONTEXT, body())
        await retriever.started.wait()
        tg.cancel_scope.cancel()
    assert retriever.cancelled
    assert names(metrics)[-2:] == ["cancellation.count", "request.total_ms"]


# --- DECISIONS -----------------------------------------------------------------------------------


async def test_decision_2_missing_session_id_under_required_persistence_is_a_client_error() -> None:
    metrics: list[BackendMetric] = []
    service = make_service(on_metric=metrics.append)
    response = await service.stream(CONTEXT, body(sessionId=None))
    assert (response.status, error_body(response)) == (400, diag("invalid_request"))
    assert [m.outcome for m in metrics[-2:]] == ["rejected", "rejected"]
    # Without a store it stays the server's fault.
    response = await make_service(session_store=None).stream(CONTEXT, body(sessionId=None))
    assert (response.status, error_body(response)) == (500, diag("persistence_not_configured"))


@pytest.mark.parametrize("session", ["session-1", None])
async def test_decision_3_disabled_persistence_never_loads_or_saves(session: str | None) -> None:
    store = MemoryStore()
    store.records[("docs", "user-1", "session-1")] = AskSessionRecord.model_validate(
        {"revision": 1, "messages": [{"role": "user", "content": "old"}]}
    )
    generator = HistoryGenerator()
    service = make_service(
        site=site(persistence="disabled"), session_store=store, generator=generator
    )
    events = await read_all(await service.stream(CONTEXT, body(sessionId=session)))
    assert events[-1]["type"] == "done"
    assert (store.loads, store.saves) == (0, 0)
    assert [m.content for m in generator.requests[0].messages] == [QUESTION]


@pytest.mark.parametrize(
    "messages",
    [(("user", QUESTION), ("assistant", "an answer")), (("assistant", "only me"),)],
)
async def test_decision_4_last_message_not_from_the_user_is_an_invalid_request(
    messages: tuple[tuple[str, str], ...],
) -> None:
    store = MemoryStore()
    store.records[("docs", "user-1", "session-1")] = AskSessionRecord.model_validate(
        {"revision": 1, "messages": [{"role": "user", "content": "older question"}]}
    )
    generator = ScriptedGenerator()
    service = make_service(session_store=store, generator=generator)
    response = await service.stream(CONTEXT, body(*messages))
    assert (response.status, error_body(response)) == (400, diag("invalid_request"))
    assert generator.requests == []


class _RaisingStore(MemoryStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def save(self, key: SessionKey, record: AskSessionRecord, expected: int) -> bool:
        raise self.error


class _CrashingGenerator:
    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        yield TextDelta("partial")
        raise RuntimeError("model exploded: secret")


@pytest.mark.parametrize(
    ("overrides", "code", "retryable"),
    [
        (
            lambda: {
                "site": site(generationTimeoutMs=100),
                "generator": ScriptedGenerator((), wait=True),
            },
            "ASK_TIMEOUT",
            True,
        ),
        (
            lambda: {"session_store": MemoryStore(save_result=False)},
            "ASK_PERSISTENCE_CONFLICT",
            True,
        ),
        (
            lambda: {"session_store": _RaisingStore(StorageError("Unreachable.", retryable=True))},
            "ASK_INTERNAL",
            True,
        ),
        (
            lambda: {"session_store": _RaisingStore(StorageError("Corrupt.", retryable=False))},
            "ASK_INTERNAL",
            False,
        ),
        (lambda: {"session_store": _RaisingStore(RuntimeError("boom"))}, "ASK_INTERNAL", False),
        (lambda: {"generator": _CrashingGenerator()}, "ASK_INTERNAL", False),
        (lambda: {"generator": _too_long()}, "ASK_GENERATION_FAILED", False),
        (
            lambda: {"generator": ScriptedGenerator((TextDelta("  "),))},
            "ASK_GENERATION_FAILED",
            False,
        ),
    ],
    ids=[
        "timeout",
        "conflict",
        "transient-storage",
        "corrupt-storage",
        "store-bug",
        "generator-crash",
        "too-long",
        "empty",
    ],
)
async def test_decision_6_in_stream_retryable_only_when_a_retry_can_succeed(
    overrides: Overrides, code: str, retryable: bool
) -> None:
    events = await read_all(await make_service(**overrides()).stream(CONTEXT, body()))
    last = events[-1]
    assert (last["type"], last["code"], last["retryable"]) == ("error", code, retryable)
    assert "secret" not in orjson.dumps(events).decode()


async def test_decision_8_bootstrap_deadline_stops_when_bootstrap_ends() -> None:
    slow_empty = make_service(
        bootstrap_timeout_ms=100,
        site=site(retrievalTimeoutMs=5000, requestTimeoutMs=10000),
        retrievers={"local": SlowRetriever(0.3)},
    )
    response = await slow_empty.stream(CONTEXT, body())
    assert (response.status, error_body(response)) == (422, diag("no_grounded_sources"))

    class LateFailure:
        async def retrieve(self, request: Any) -> Sequence[Any]:
            await anyio.sleep(0.3)
            raise RuntimeError("late")

    late = make_service(
        bootstrap_timeout_ms=100,
        site=site(retrievalTimeoutMs=5000, requestTimeoutMs=10000),
        retrievers={"local": LateFailure()},
    )
    response = await late.stream(CONTEXT, body())
    assert (response.status, error_body(response)) == (502, diag("retrieval_failed"))


async def test_decision_8_bootstrap_deadline_still_bounds_bootstrap() -> None:
    async def never(context: Any) -> Any:
        await anyio.sleep_forever()

    response = await make_service(bootstrap_timeout_ms=100, resolve_site=never).stream(
        CONTEXT, body()
    )
    assert (response.status, error_body(response)) == (408, diag("request_timeout"))


# --- persistence and history ----------------------------------------------------------------------


async def test_history_identical_pending_question_is_not_duplicated() -> None:
    store = MemoryStore()
    store.records[("docs", "user-1", "session-1")] = AskSessionRecord.model_validate(
        {"revision": 2, "messages": [{"role": "user", "content": QUESTION}]}
    )
    generator = HistoryGenerator()
    service = make_service(session_store=store, generator=generator)
    await read_all(await service.stream(CONTEXT, body()))
    assert [m.content for m in generator.requests[0].messages] == [QUESTION]


async def test_history_keeps_the_last_64_messages() -> None:
    store = MemoryStore()
    stored = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(64)]
    store.records[("docs", "user-1", "session-1")] = AskSessionRecord.model_validate(
        {"revision": 7, "messages": stored}
    )
    generator = HistoryGenerator()
    service = make_service(session_store=store, generator=generator)
    await read_all(await service.stream(CONTEXT, body(("user", "new"))))
    seen = generator.requests[0].messages
    assert (len(seen), seen[0].content, seen[-1].content) == (64, "m1", "new")
    saved = store.records[("docs", "user-1", "session-1")]
    assert (saved.revision, len(saved.messages), saved.messages[-1].content) == (
        8,
        64,
        "history:64",
    )


async def test_history_an_invalid_stored_record_is_an_internal_error() -> None:
    class CorruptStore(MemoryStore):
        async def load(self, key: SessionKey) -> Any:
            return {"revision": -1, "messages": []}

    response = await make_service(session_store=CorruptStore()).stream(CONTEXT, body())
    assert (response.status, error_body(response)) == (500, diag("internal"))


async def test_history_concurrent_requests_on_one_session_never_lose_an_update() -> None:
    store = MemoryStore()
    service = make_service(session_store=store, generator=HistoryGenerator())
    outcomes: list[str] = []

    async def ask(n: int) -> None:
        response = await service.stream(CONTEXT, body(("user", f"q{n}")))
        events = await read_all(response)
        outcomes.append(events[-1]["type"] if events[-1]["type"] == "done" else events[-1]["code"])

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(ask, n)
    saved = store.records[("docs", "user-1", "session-1")]
    assert outcomes.count("done") == saved.revision
    assert set(outcomes) <= {"done", "ASK_PERSISTENCE_CONFLICT"}
    assert len(saved.messages) == 2 * saved.revision


# --- sources, usage, events ---------------------------------------------------------------------


async def test_sources_are_validated_kept_in_order_and_bounded() -> None:
    candidates: list[Any] = [
        {**LOCAL_SOURCE, "id": "bad id"},
        {**LOCAL_SOURCE, "id": "a", "title": "  A  "},
        {**LOCAL_SOURCE, "id": "b", "href": "//evil.example/x"},
        {**LOCAL_SOURCE, "id": "c", "excerpt": "   "},
        {**LOCAL_SOURCE, "id": "d", "extra": 1},
        "not a source",
        {**LOCAL_SOURCE, "id": "e"},
        {**LOCAL_SOURCE, "id": "f"},
    ]
    metrics: list[BackendMetric] = []
    generator = ScriptedGenerator()
    service = make_service(
        site=site(maxSources=2),
        retrievers={"local": ListRetriever(candidates)},
        generator=generator,
        on_metric=metrics.append,
    )
    events = await read_all(await service.stream(CONTEXT, body()))
    cited = events[-2]["args"]["sources"]
    assert [(s["id"], s["title"]) for s in cited] == [("a", "A"), ("e", "Local guide")]
    assert [s.id for s in generator.requests[0].sources] == ["a", "e"]
    assert {m.name: m.value for m in metrics}["retrieval.documents"] == 2


async def test_usage_is_optional_and_the_last_report_wins() -> None:
    plain = ScriptedGenerator(chunks=(TextDelta("answer"),))
    events = await read_all(await make_service(generator=plain).stream(CONTEXT, body()))
    assert events[-1] == {"type": "done"}
    twice = ScriptedGenerator(
        chunks=(UsageReport({"model": "first"}), TextDelta("a"), UsageReport({"model": " second "}))
    )
    metrics: list[BackendMetric] = []
    service = make_service(generator=twice, on_metric=metrics.append)
    events = await read_all(await service.stream(CONTEXT, body()))
    assert events[-1] == {"type": "done", "model": "second"}
    assert not any(m.name.startswith("usage.") for m in metrics)


async def test_events_and_lines_agree() -> None:
    lines = [line async for line in await make_service().stream(CONTEXT, body())]
    events = [
        e.to_json() + "\n" async for e in (await make_service().stream(CONTEXT, body())).events()
    ]
    assert lines == events
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)


async def test_request_ids_fall_back_to_uuids() -> None:
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")

    def broken() -> str:
        raise RuntimeError("no ids")

    for create_id in (broken, lambda: "not safe!", lambda: ""):
        response = await make_service(create_id=create_id).stream(CONTEXT, body())
        assert uuid.fullmatch(response.request_id)
        events = await read_all(response)
        assert events[1]["id"] == f"sources-{response.request_id}"


# --- metrics ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "query", "expected"),
    [
        (dict, {"corpus": "nope"}, [("error.count", "rejected"), ("request.total_ms", "rejected")]),
        (
            lambda: {
                "retrievers": {"local": WaitingRetriever()},
                "site": site(requestTimeoutMs=100),
            },
            {},
            [
                ("deterministic.fallback", "ok"),
                ("persistence.total_ms", "ok"),
                ("cancellation.count", "cancelled"),
                ("request.total_ms", "cancelled"),
            ],
        ),
        (
            lambda: {"retrievers": {"local": ListRetriever([])}},
            {},
            [
                ("deterministic.fallback", "ok"),
                ("persistence.total_ms", "ok"),
                ("retrieval.total_ms", "ok"),
                ("retrieval.documents", "ok"),
                ("error.count", "rejected"),
                ("request.total_ms", "rejected"),
            ],
        ),
        (
            lambda: {"retrievers": {"local": FailingRetriever()}},
            {},
            [
                ("deterministic.fallback", "ok"),
                ("persistence.total_ms", "ok"),
                ("error.count", "error"),
                ("request.total_ms", "error"),
            ],
        ),
        (
            lambda: {"resolve_subject_id": lambda context: "bad subject"},
            {},
            [("error.count", "error"), ("request.total_ms", "error")],
        ),
    ],
    ids=["forbidden", "request-timeout", "no-sources", "retrieval-failed", "identity"],
)
async def test_metrics_of_failed_requests(
    overrides: Overrides, query: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    metrics: list[BackendMetric] = []
    service = make_service(on_metric=metrics.append, **overrides())
    await service.stream(CONTEXT, body(), query)
    assert [(m.name, m.outcome) for m in metrics] == expected
    assert metrics[-1].name == "request.total_ms"


async def test_metrics_of_an_in_stream_timeout() -> None:
    metrics: list[BackendMetric] = []
    service = make_service(
        on_metric=metrics.append,
        site=site(generationTimeoutMs=100),
        generator=ScriptedGenerator((), wait=True),
    )
    await read_all(await service.stream(CONTEXT, body()))
    assert [(m.name, m.outcome) for m in metrics][-3:] == [
        ("stream.first_event_ms", "ok"),
        ("error.count", "error"),
        ("request.total_ms", "error"),
    ]


async def test_metrics_fallback_is_zero_without_an_escalation() -> None:
    metrics: list[BackendMetric] = []
    await read_all(await make_service(on_metric=metrics.append).stream(CONTEXT, body()))
    assert (metrics[0].name, metrics[0].value) == ("deterministic.fallback", 0)


async def test_metrics_a_raising_sink_changes_nothing() -> None:
    def sink(metric: BackendMetric) -> None:
        raise RuntimeError("sink down")

    events = await read_all(await make_service(on_metric=sink).stream(CONTEXT, body()))
    assert [e["type"] for e in events] == ["text", "tool", "done"]


async def test_metrics_negative_durations_are_clamped() -> None:
    metrics: list[BackendMetric] = []
    ticks = iter(range(1000, 0, -1))
    service = make_service(on_metric=metrics.append, clock=lambda: float(next(ticks)))
    await read_all(await service.stream(CONTEXT, body()))
    assert all(m.value >= 0 for m in metrics)
    assert {m.name: m.value for m in metrics}["request.total_ms"] == 0


@settings(max_examples=60, deadline=None)
@given(question=st.text(st.characters(categories=["L", "N"]), min_size=3, max_size=40))
def test_metrics_never_contain_the_question_subject_or_session(question: str) -> None:
    marker = f"zq{question}"
    metrics: list[BackendMetric] = []

    async def run() -> None:
        service = make_service(
            on_metric=metrics.append,
            session_store=MemoryStore(),
            resolve_subject_id=lambda context: "subject-secret-7",
        )
        payload = body(("user", marker), sessionId="session-secret-9")
        await read_all(await service.stream(CONTEXT, payload))

    anyio.run(run)
    assert names(metrics) == HAPPY_METRICS
    for metric in metrics:
        text = metric.to_json()
        assert marker not in text
        assert "subject-secret-7" not in text
        assert "session-secret-9" not in text
