"""Fixtures of the Ask service tests: the spec's sites, and tiny in-test ports.

The retrievers, generators and the store here are plain classes implementing the ports, so the
service is exercised exactly as a host would wire it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import orjson
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse

from agentskit_chat.protocol import AskSessionRecord, BackendMetric, BackendSiteConfig
from agentskit_chat.server import AskServiceApp, create_ask_service_app
from agentskit_chat.service import (
    AskResponse,
    AskService,
    Authenticated,
    AuthResult,
    GenerationRequest,
    RateLimitDecision,
    Refused,
    RetrievalRequest,
    SessionKey,
    SourceCandidate,
    TextDelta,
    UsageReport,
)

NOW = datetime(2026, 7, 13, tzinfo=UTC)
QUESTION = "How do I start?"
ANSWER = "Grounded answer for How do I start? from Local guide."

LOCAL_SITE: dict[str, Any] = {
    "protocol": "agentskit.chat.backend-site",
    "version": 1,
    "siteId": "docs",
    "assistant": {"id": "docs-guide", "name": "Docs Guide", "suggestions": ["How do I start?"]},
    "corpus": {"id": "docs-public", "mode": "local"},
    "components": ["source-list"],
    "actions": ["open-agent"],
    "limits": {
        "requestTimeoutMs": 2000,
        "retrievalTimeoutMs": 500,
        "generationTimeoutMs": 500,
        "maxSources": 5,
    },
    "persistence": {"mode": "required"},
}
FEDERATED_SITE: dict[str, Any] = {
    **LOCAL_SITE,
    "siteId": "registry",
    "assistant": {
        "id": "registry-guide",
        "name": "Registry Guide",
        "suggestions": ["Find a test agent"],
    },
    "corpus": {"id": "registry-public", "mode": "federated"},
}
LOCAL_SOURCE: dict[str, Any] = {
    "id": "local-guide",
    "title": "Local guide",
    "href": "/docs/start",
    "excerpt": "Run the installer, then open the start page.",
}
REGISTRY_SOURCE: dict[str, Any] = {
    "id": "registry-guide",
    "title": "Registry guide",
    "href": "https://registry.example/agents",
    "excerpt": "The registry lists every test agent.",
}
USAGE: dict[str, Any] = {
    "inputTokens": 10,
    "outputTokens": 8,
    "totalTokens": 18,
    "costUsd": 0.001,
    "model": "fixture-model",
}
HAPPY_METRICS = [
    "deterministic.fallback",
    "persistence.total_ms",
    "retrieval.total_ms",
    "retrieval.documents",
    "stream.first_event_ms",
    "stream.first_token_ms",
    "persistence.total_ms",
    "usage.input_tokens",
    "usage.output_tokens",
    "usage.total_tokens",
    "cost.usd",
    "stream.bytes",
    "stream.events",
    "stream.snapshots",
    "request.total_ms",
]
ESCALATION: dict[str, Any] = {
    "protocol": "agentskit.chat.answer",
    "version": 1,
    "outcome": "escalation",
    "query": QUESTION,
    "normalizedQuery": "how do i start?",
    "message": "A backend answer is required.",
    "reason": "miss",
    "confidence": {"level": "low", "basis": "miss"},
}


def site(base: Mapping[str, Any] = LOCAL_SITE, **changes: Any) -> dict[str, Any]:
    """A copy of ``base`` with top-level keys, ``limits`` or ``persistence`` changed."""
    result = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if key in ("requestTimeoutMs", "retrievalTimeoutMs", "generationTimeoutMs", "maxSources"):
            result["limits"][key] = value
        elif key == "persistence":
            result["persistence"] = {"mode": value}
        else:
            result[key] = value
    return result


def body(*messages: tuple[str, str], **extra: Any) -> bytes:
    """A request body; ``messages`` are ``(role, content)`` pairs (default: the question)."""
    pairs = messages or (("user", QUESTION),)
    payload: dict[str, Any] = {
        "protocol": "agentskit.chat.ask",
        "version": 1,
        "sessionId": "session-1",
        "messages": [{"role": role, "content": content} for role, content in pairs],
    }
    for key, value in extra.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    return orjson.dumps(payload)


# --- ports ---------------------------------------------------------------------------------------


class ListRetriever:
    """Returns fixed candidates and records every request it receives."""

    def __init__(self, candidates: Sequence[SourceCandidate] = (LOCAL_SOURCE,)) -> None:
        self.candidates = list(candidates)
        self.requests: list[RetrievalRequest] = []

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        self.requests.append(request)
        return self.candidates


class WaitingRetriever:
    """Never answers until cancelled; records that it was cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = False

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class FailingRetriever:
    """Raises an error whose text must never reach the client."""

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        raise RuntimeError("private vector password hunter2")


class SlowRetriever:
    """Answers after ``seconds`` (ignoring nothing: it is cancellable)."""

    def __init__(self, seconds: float, candidates: Sequence[SourceCandidate] = ()) -> None:
        self.seconds = seconds
        self.candidates = list(candidates)

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        await anyio.sleep(self.seconds)
        return self.candidates


class ShieldedRetriever:
    """Ignores cancellation for ``seconds``, then returns nothing (a badly behaved retriever)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(self.seconds)
        return []


@dataclass
class ScriptedGenerator:
    """Yields ``chunks`` in order; then, with ``wait``, waits until cancelled or released."""

    chunks: Sequence[TextDelta | UsageReport | Mapping[str, Any]] = (
        TextDelta(ANSWER),
        UsageReport(USAGE),
    )
    wait: bool = False
    requests: list[GenerationRequest] = field(default_factory=list)
    first_sent: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    finished_normally: bool = False

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        self.requests.append(request)
        try:
            for chunk in self.chunks:
                yield chunk  # type: ignore[misc]
                self.first_sent.set()
            if self.wait:
                await self.release.wait()
            self.finished_normally = True
        finally:
            if not self.finished_normally:
                self.closed.set()


class HistoryGenerator:
    """Answers ``history:<n>`` where n is the number of messages it saw."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        self.requests.append(request)
        yield TextDelta(f"history:{len(request.messages)}")


class MemoryStore:
    """A plain in-test CAS store; ``save_result`` forces the answer of ``save``."""

    def __init__(self, save_result: bool | None = None) -> None:
        self.records: dict[tuple[str, str, str], AskSessionRecord] = {}
        self.loads = 0
        self.saves = 0
        self.save_result = save_result

    async def load(self, key: SessionKey) -> AskSessionRecord | None:
        self.loads += 1
        return self.records.get((key.site_id, key.subject_id, key.session_id))

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        self.saves += 1
        if self.save_result is not None:
            return self.save_result
        k = (key.site_id, key.subject_id, key.session_id)
        current = self.records.get(k)
        if (current.revision if current else 0) != expected_revision:
            return False
        self.records[k] = record
        return True


class FixedLimiter:
    """Always answers ``decision``; records whether it was asked."""

    def __init__(self, decision: RateLimitDecision) -> None:
        self.decision = decision
        self.calls: list[tuple[str, str]] = []

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        self.calls.append((site.site_id, subject_id))
        return self.decision


# --- hooks ---------------------------------------------------------------------------------------


def authenticate(request: Request) -> AuthResult:
    """Accepts ``authorization: Bearer valid`` as subject ``user-1``."""
    if request.headers.get("authorization") == "Bearer valid":
        return Authenticated({"subject": "user-1"})
    return Refused(JSONResponse({"error": "unauthorized"}, status_code=401))


def subject_of(context: Any) -> str:
    return str(context["subject"])


def counting_ids(prefix: str = "request") -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"{prefix}-{n}"


def options(**overrides: Any) -> dict[str, Any]:
    """Service options of the spec's local fixture, with ``overrides``."""
    site_config = overrides.pop("site", LOCAL_SITE)
    result: dict[str, Any] = {
        "resolve_site": lambda context: site_config,
        "resolve_subject_id": subject_of,
        "retrievers": {"local": ListRetriever(), "federated": ListRetriever([REGISTRY_SOURCE])},
        "generator": ScriptedGenerator(),
        "session_store": MemoryStore(),
        "create_id": lambda: "request-1",
        "now": lambda: NOW,
        "clock": _ticks(),
    }
    result.update(overrides)
    return result


def _ticks() -> Any:
    state = {"t": 0.0}

    def clock() -> float:
        state["t"] += 1.0
        return state["t"]

    return clock


def make_service(**overrides: Any) -> AskService:
    return AskService(**options(**overrides))


def make_app(**overrides: Any) -> AskServiceApp:
    return create_ask_service_app(authenticate=authenticate, **options(**overrides))


CONTEXT = {"subject": "user-1"}


async def read_all(response: AskResponse) -> list[dict[str, Any]]:
    """Every NDJSON event of a ``200`` response, as wire dicts."""
    assert response.status == 200, response.diagnostic
    return [orjson.loads(line) async for line in response]


def error_body(response: AskResponse) -> dict[str, Any]:
    assert response.diagnostic is not None
    return {"error": response.diagnostic.to_wire()}


def names(metrics: Sequence[BackendMetric]) -> list[str]:
    return [metric.name for metric in metrics]


# --- a real server on a loopback port -------------------------------------------------------------


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1, port 0; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


def finite(value: float) -> bool:
    return math.isfinite(value)
