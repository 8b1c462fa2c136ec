"""The trusted Ask backend: its ports now; the service, client and pipeline build on them."""

from __future__ import annotations

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

__all__ = [
    "AskSessionStore",
    "GenerationRequest",
    "Generator",
    "RateLimitDecision",
    "RateLimiter",
    "RetrievalRequest",
    "Retriever",
    "SessionKey",
    "SourceCandidate",
    "TextDelta",
    "UsageReport",
]
