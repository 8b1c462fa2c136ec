"""The trusted Ask pipeline and its ports, with no transport.

:class:`AskService` takes one request through the fixed order of checks (identity, trusted site,
subject, rate limit, request, stored history, retrieval under its deadline, grounded sources)
and answers with an :class:`AskResponse`: a fixed diagnostic, or the NDJSON event stream that
generates, cites, persists and reports usage as it is read. In process, call
:meth:`AskService.answer` with a typed :class:`~agentskit_chat.protocol.AskRequest`; over HTTP,
:func:`agentskit_chat.server.create_ask_service_app` decodes the bytes at the edge.

Everything behind the ports (:class:`Retriever`, :class:`Generator`, :class:`AskSessionStore`,
:class:`RateLimiter`, :data:`MetricSink`) is injected. See ``docs/ask-service.md``.
"""

from __future__ import annotations

from agentskit_chat.errors import AskServiceError

from ._metrics import MetricSink
from ._pipeline import (
    AskService,
    Authenticated,
    AuthResult,
    Refused,
    RequestReader,
    ResolveSite,
    ResolveSubjectId,
)
from ._ports import (
    AskSessionStore,
    CitedSources,
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
from ._stream import AskResponse

__all__ = [
    "AskResponse",
    "AskService",
    "AskServiceError",
    "AskSessionStore",
    "AuthResult",
    "Authenticated",
    "CitedSources",
    "GenerationRequest",
    "Generator",
    "InMemoryRateLimiter",
    "MetricSink",
    "RateLimitDecision",
    "RateLimiter",
    "Refused",
    "RequestReader",
    "ResolveSite",
    "ResolveSubjectId",
    "RetrievalRequest",
    "Retriever",
    "SessionKey",
    "SourceCandidate",
    "TextDelta",
    "UsageReport",
]
