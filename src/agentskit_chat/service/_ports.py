"""The seams of the Ask service: what it asks of retrievers, generators, stores and limiters.

The service owns trust and order; everything behind these ports is injected. Cancellation and
deadlines reach every port through anyio cancellation: an implementation only has to be
cancellable at its ``await`` points (and must not block the event loop).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from agentskit_chat.protocol import (
    AskMessage,
    AskSessionRecord,
    AskUsage,
    BackendSiteConfig,
    GroundedSource,
)

__all__ = [
    "AskSessionStore",
    "CitedSources",
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

#: What a retriever returns: validated by the service as a strict grounded source
#: ``{id, title, href, excerpt}``; invalid or unsafe candidates are dropped, never repaired.
SourceCandidate = GroundedSource | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """One retrieval: the trimmed question, the conversation, and the trusted site.

    The site (and so the corpus) comes from authentication, never from the client.
    """

    query: str
    messages: tuple[AskMessage, ...]
    site: BackendSiteConfig


@runtime_checkable
class Retriever(Protocol):
    """Finds grounded sources for a question within one trusted corpus, best first."""

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        """Return candidate sources, best first (the service keeps ``limits.maxSources``)."""
        ...


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: the question, the conversation, the trusted site and the kept sources."""

    query: str
    messages: tuple[AskMessage, ...]
    site: BackendSiteConfig
    sources: tuple[GroundedSource, ...]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text, streamed in order."""

    delta: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Token and cost accounting; the last report of a generation wins."""

    usage: AskUsage | Mapping[str, Any]
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class CitedSources:
    """The sources an answer cites, when the generator knows them: 0-based positions in the
    request's sources, in the order the answer numbers them.

    The ``cite`` event then lists only these sources, in this order, so ``[n]`` in the text
    is the n-th of them. A generator that never yields one cites every source, in order.
    """

    positions: tuple[int, ...]
    type: Literal["sources"] = "sources"


class Generator(Protocol):
    """Streams a grounded answer for a question and its sources."""

    def generate(
        self, request: GenerationRequest
    ) -> AsyncIterator[TextDelta | UsageReport | CitedSources]:
        """Yield text deltas (and optionally usage reports and the cited sources) in order."""
        ...


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Where an Ask conversation is stored: one record per (site, subject, session)."""

    site_id: str
    subject_id: str
    session_id: str


class AskSessionStore(Protocol):
    """Revisioned compare-and-set storage of Ask conversations.

    ``save`` writes ``record`` only if the stored revision still equals ``expected_revision``
    (0 when nothing is stored) and returns whether it did. Any invariant that holds for one
    worker holds across workers through this check.
    """

    async def load(self, key: SessionKey) -> AskSessionRecord | Mapping[str, Any] | None:
        """The stored record, or ``None`` when there is none."""
        ...

    async def save(self, key: SessionKey, record: AskSessionRecord, expected_revision: int) -> bool:
        """Store ``record`` if the stored revision equals ``expected_revision``."""
        ...


@dataclass(frozen=True, slots=True)
class RateLimitDecision:
    """Whether a request may proceed, and when to retry if not."""

    allowed: bool
    retry_after_seconds: int | None = None


class RateLimiter(Protocol):
    """Decides, before any body byte is read, whether a subject may ask now."""

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        """Consume one request's allowance for ``subject_id`` on ``site``.

        ``context`` is the host's authenticated context, for limits that depend on it.
        """
        ...
