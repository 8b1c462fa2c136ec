"""The trusted Ask backend: ports, the service pipeline and its ASGI app, the client adapter.

Needs the ``server`` extra (Starlette for the app, httpx for the client).
"""

from __future__ import annotations

from agentskit_chat.errors import AskServiceError

from ._client import (
    ASK_CONNECT_TIMEOUT_MESSAGE,
    ASK_CONNECT_TIMEOUT_S,
    ASK_REQUEST_FAILED_MESSAGE,
    AskAdapter,
    AskSource,
    create_ask_adapter,
)
from ._client_projection import (
    ASK_CONTENT_BYTE_LIMIT_MESSAGE,
    ASK_CONTENT_RECORD_LIMIT_MESSAGE,
    ProjectTool,
    project_ask_event,
    project_ask_messages,
    trim_ask_history,
)
from ._client_request import encode_ask_request_body, resolve_ask_endpoint
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
    "ASK_CONNECT_TIMEOUT_MESSAGE",
    "ASK_CONNECT_TIMEOUT_S",
    "ASK_CONTENT_BYTE_LIMIT_MESSAGE",
    "ASK_CONTENT_RECORD_LIMIT_MESSAGE",
    "ASK_REQUEST_FAILED_MESSAGE",
    "AskAdapter",
    "AskResponse",
    "AskService",
    "AskServiceApp",
    "AskServiceError",
    "AskSessionStore",
    "AskSource",
    "AuthResult",
    "Authenticate",
    "Authenticated",
    "GenerationRequest",
    "Generator",
    "InMemoryRateLimiter",
    "MetricSink",
    "ProjectTool",
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
    "create_ask_adapter",
    "create_ask_service_app",
    "encode_ask_request_body",
    "project_ask_event",
    "project_ask_messages",
    "resolve_ask_endpoint",
    "trim_ask_history",
]
