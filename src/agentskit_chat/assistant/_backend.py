"""What the docs assistant sends to its Ask service, and how it reads the answer back.

The assistant is an Ask client in process: it posts an ``agentskit.chat.ask`` request with the
deterministic escalation attached, on behalf of a :class:`Caller`, and turns the event stream
into an answer envelope, a refusal, or the service's own diagnostic as an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat.errors import AskServiceError
from agentskit_chat.generation import NO_GROUNDED_ANSWER
from agentskit_chat.protocol import (
    ANSWER_PROTOCOL,
    AskDoneEvent,
    AskErrorEvent,
    AskRequest,
    AskTextEvent,
    AskToolEvent,
    BackendSiteConfig,
    Citation,
    EscalationAnswer,
    ExactAnswer,
    decode_ask_request,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._text import js_trim, truncate_utf16
from agentskit_chat.service import AskResponse, RateLimitDecision, RateLimiter

__all__ = [
    "ASSISTANT_ID",
    "CORPUS_ID",
    "IN_PROCESS",
    "NO_GROUNDED_SOURCES",
    "PROVIDER",
    "Caller",
    "HttpOnlyLimiter",
    "ask_request",
    "read_answer",
    "refusal",
    "site_config",
    "subject_of",
]

#: The refusal: the message of the ``miss`` escalation when nothing relevant enough was found.
NO_GROUNDED_SOURCES: Final = "No grounded sources were found for this question."
#: ``provenance.provider`` of backend answers.
PROVIDER: Final = "agentskit-chat"
#: The assistant id of the trusted site (what a ``persona`` hint must equal).
ASSISTANT_ID: Final = "docs-guide"
#: The corpus id of the trusted site (what a ``corpus`` hint must equal).
CORPUS_ID: Final = "docs"

_MAX_CITATIONS: Final = 8
_MAX_PROVENANCE_UNITS: Final = 128
# How an in-stream error code maps to an HTTP status for callers that want one.
_STREAM_STATUS: Final = {
    "ASK_TIMEOUT": 408,
    "ASK_PERSISTENCE_CONFLICT": 409,
    "ASK_GENERATION_FAILED": 502,
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the authenticated context the assistant's Ask service receives.

    Attributes:
        transport: ``in-process`` for :meth:`DocsAssistant.ask`, ``http`` for the web app.
        subject_id: The stable subject (rate limits and stored conversations are per subject).
        client: The client's address, as the web app's edge resolved it (whom its limits per
            client count against); ``None`` when there is none.
    """

    transport: Literal["in-process", "http"]
    subject_id: str
    client: str | None = None


#: The caller of :meth:`DocsAssistant.ask` when none is given.
IN_PROCESS: Final = Caller("in-process", "local")


class HttpOnlyLimiter:
    """The rate limiter port: HTTP callers are limited, in-process calls never are.

    Args:
        limiter: What HTTP callers are held to; ``None`` allows everyone (until :meth:`use`
            names a limiter).
    """

    def __init__(self, limiter: RateLimiter | None) -> None:
        self._limiter = limiter

    def use(self, limiter: RateLimiter | None) -> None:
        """Hold HTTP callers to ``limiter`` from now on (``None``: allow everyone)."""
        self._limiter = limiter

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        """Allow in-process callers; ask the wrapped limiter about everyone else."""
        limiter = self._limiter
        if limiter is None or (isinstance(context, Caller) and context.transport == "in-process"):
            return RateLimitDecision(allowed=True)
        return await limiter.check(context=context, site=site, subject_id=subject_id)


def subject_of(context: Any) -> str:
    """The subject id of an assistant caller (anything else is refused by the service)."""
    if isinstance(context, Caller):
        return context.subject_id
    return ""  # refused by the service as an invalid host identity


def site_config(site_id: str, persistence: bool, max_sources: int) -> BackendSiteConfig:
    """The assistant's trusted site: one local corpus, persistence only with a store."""
    return BackendSiteConfig.model_validate(
        {
            "protocol": "agentskit.chat.backend-site",
            "version": 1,
            "siteId": site_id,
            "assistant": {"id": ASSISTANT_ID, "name": "Docs Guide", "suggestions": []},
            "corpus": {"id": CORPUS_ID, "mode": "local"},
            "components": ["source-list"],
            "actions": [],
            "limits": {
                "requestTimeoutMs": 60000,
                "retrievalTimeoutMs": 5000,
                "generationTimeoutMs": 45000,
                "maxSources": max_sources,
            },
            "persistence": {"mode": "required" if persistence else "disabled"},
        }
    )


def _provenance_model(name: object) -> str | None:
    if not isinstance(name, str):
        return None
    cut = js_trim(truncate_utf16(name, _MAX_PROVENANCE_UNITS))
    if cut and 0xD800 <= ord(cut[-1]) <= 0xDBFF:
        cut = js_trim(cut[:-1])
    return cut or None


def _citations(sources: object) -> list[dict[str, str]]:
    """The cite event's sources as citations ``{id, title, href}``: valid ones, once each."""
    if not isinstance(sources, Sequence) or isinstance(sources, str):
        return []
    citations: list[dict[str, str]] = []
    seen: set[str] = set()
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        key, title, href = source.get("id"), source.get("title"), source.get("path")
        if not (isinstance(key, str) and isinstance(title, str) and isinstance(href, str)):
            continue
        citation = {"id": key, "title": title, "href": href}
        if key in seen or validate_model(Citation, citation) is None:
            continue
        seen.add(key)
        citations.append(citation)
        if len(citations) == _MAX_CITATIONS:
            break
    return citations


def refusal(decision: EscalationAnswer) -> EscalationAnswer:
    """The ``miss`` escalation saying that no grounded sources were found."""
    return EscalationAnswer.model_validate(
        {
            "protocol": ANSWER_PROTOCOL,
            "version": 1,
            "outcome": "escalation",
            "query": decision.query,
            "normalizedQuery": decision.normalized_query,
            "message": NO_GROUNDED_SOURCES,
            "reason": "miss",
            "confidence": {"level": "low", "basis": "miss"},
        }
    )


def ask_request(question: str, decision: EscalationAnswer, session_id: str | None) -> AskRequest:
    """The Ask request for ``question``: one user message, the escalation attached.

    Raises:
        AskServiceError: 400 with the protocol's diagnostic when the question or the session id
            breaks a bound of the request (an over-long question, an unsafe session id), as the
            service would answer the same request over HTTP.
    """
    request: dict[str, Any] = {"protocol": "agentskit.chat.ask", "version": 1}
    if session_id is not None:
        request["sessionId"] = session_id
    request["messages"] = [{"role": "user", "content": question}]
    request["deterministic"] = decision.to_wire()
    decoded = decode_ask_request(request)
    if not decoded.ok:
        diagnostic = decoded.diagnostic
        raise AskServiceError(400, diagnostic.code, diagnostic.message, retryable=False)
    return decoded.value


async def read_answer(
    response: AskResponse, decision: EscalationAnswer, fallback_model: object
) -> ExactAnswer | EscalationAnswer:
    """The envelope for an Ask response to the question ``decision`` escalated.

    A streamed answer with citations becomes a ``high/backend`` answer; no grounded sources
    (a 422, or the generator's no-grounded-answer sentence) becomes :func:`refusal`.

    Raises:
        AskServiceError: any other error response or in-stream error, with its diagnostic.
    """
    if response.status != 200:
        diagnostic = response.diagnostic
        assert diagnostic is not None
        if diagnostic.code == "ASK_NO_GROUNDED_SOURCES":
            return refusal(decision)
        retry = response.header("retry-after")
        raise AskServiceError(
            response.status,
            diagnostic.code,
            diagnostic.message,
            retryable=diagnostic.retryable,
            retry_after=int(retry) if retry is not None and retry.isdigit() else None,
        )
    parts: list[str] = []
    sources: object = ()
    model: str | None = None
    async with response:
        async for event in response.events():
            if isinstance(event, AskTextEvent):
                parts.append(event.delta)
            elif isinstance(event, AskToolEvent) and event.name == "cite":
                sources = event.args.get("sources")
            elif isinstance(event, AskDoneEvent):
                model = event.model
            elif isinstance(event, AskErrorEvent):
                code = event.code or "ASK_INTERNAL"
                raise AskServiceError(
                    _STREAM_STATUS.get(code, 500),
                    code,
                    event.message,
                    retryable=event.retryable is True,
                )
    markdown = js_trim("".join(parts))
    citations = _citations(sources)
    if not markdown or markdown == NO_GROUNDED_ANSWER or not citations:
        return refusal(decision)
    provenance: dict[str, str] = {"source": "backend", "provider": PROVIDER}
    name = _provenance_model(model) or _provenance_model(fallback_model)
    if name is not None:
        provenance["model"] = name
    return ExactAnswer.model_validate(
        {
            "protocol": ANSWER_PROTOCOL,
            "version": 1,
            "outcome": "answer",
            "query": decision.query,
            "normalizedQuery": decision.normalized_query,
            "answer": {"markdown": markdown, "citations": citations},
            "provenance": provenance,
            "confidence": {"level": "high", "basis": "backend"},
        }
    )
