"""The trusted Ask backend: its ports, the service pipeline and its ASGI app, rate limiting."""

from __future__ import annotations

from agentskit_chat.errors import AskServiceError

from ._metrics import MetricSink
from ._ports import (
    AskSessionStore,
    GenerationRequest,
    Generator,
    RateLimitDecision,
    RateLimiter,
    RetrievalRequest,
    Retriever,
    SessionKey,
    SourceCandidate,
    TextDelta,
    UsageReport,
)
from ._rate_limit import InMemoryRateLimiter
from ._service import (
    AskService,
    Authenticated,
    AuthResult,
    Refused,
    ResolveSite,
    ResolveSubjectId,
)
from ._service_app import AskServiceApp, Authenticate, create_ask_service_app
from ._service_stream import AskResponse

__all__ = [
    "AskResponse",
    "AskService",
    "AskServiceApp",
    "AskServiceError",
    "AskSessionStore",
    "AuthResult",
    "Authenticate",
    "Authenticated",
    "GenerationRequest",
    "Generator",
    "InMemoryRateLimiter",
    "MetricSink",
    "RateLimitDecision",
    "RateLimiter",
    "Refused",
    "ResolveSite",
    "ResolveSubjectId",
    "RetrievalRequest",
    "Retriever",
    "SessionKey",
    "SourceCandidate",
    "TextDelta",
    "UsageReport",
    "create_ask_service_app",
]
