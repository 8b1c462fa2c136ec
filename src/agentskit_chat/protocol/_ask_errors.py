"""The diagnostics an Ask server reports, as data.

Before streaming starts, a server answers ``{"error": <diagnostic>}`` with the case's HTTP
status; after it has started, it ends the stream with an ``error`` record carrying the case's
code, message and ``retryable``. Messages are fixed and never carry request data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from ._backend import AskDiagnostic

__all__ = ["ASK_ERROR_CASES", "AskErrorCase"]


@dataclass(frozen=True, slots=True)
class AskErrorCase:
    """One row of the server's diagnostic table.

    Attributes:
        status: The HTTP status; for in-stream failures, the server's internal classification.
        code: One of the eleven ``ASK_*`` diagnostic codes.
        message: The exact fixed message.
        retryable: The reference's ``retryable`` flag. (Our server may report ``false`` for
            in-stream failures a retry cannot fix: it says ``true`` only when a retry can
            succeed.)
    """

    status: int
    code: str
    message: str
    retryable: bool

    def to_diagnostic(self) -> AskDiagnostic:
        """The typed diagnostic ``{code, message, retryable}`` of this case."""
        return AskDiagnostic.model_validate(
            {"code": self.code, "message": self.message, "retryable": self.retryable}
        )


def _case(status: int, code: str, message: str, retryable: bool) -> AskErrorCase:
    return AskErrorCase(status, code, message, retryable)


#: Every case of the reference server's diagnostic table, by a short name, in spec order.
ASK_ERROR_CASES: Final[Mapping[str, AskErrorCase]] = MappingProxyType(
    {
        "method_not_allowed": _case(405, "ASK_INVALID_REQUEST", "Only POST is supported.", False),
        "unsupported_media_type": _case(
            415, "ASK_INVALID_REQUEST", "Content-Type must be application/json.", False
        ),
        "forbidden": _case(
            403,
            "ASK_FORBIDDEN",
            "The requested assistant or corpus is not authorized for this site.",
            False,
        ),
        "rate_limited": _case(429, "ASK_RATE_LIMITED", "The Ask rate limit was exceeded.", True),
        "body_too_large": _case(413, "ASK_INVALID_REQUEST", "Request body is too large.", False),
        "invalid_json": _case(400, "ASK_INVALID_REQUEST", "Request body is not valid JSON.", False),
        "invalid_request": _case(
            400, "ASK_INVALID_REQUEST", "The Ask request payload is invalid.", False
        ),
        "question_required": _case(
            400, "ASK_INVALID_REQUEST", "A user question is required.", False
        ),
        "retrieval_timeout": _case(408, "ASK_TIMEOUT", "Grounded retrieval timed out.", True),
        "retrieval_failed": _case(
            502, "ASK_RETRIEVAL_FAILED", "Grounded retrieval is temporarily unavailable.", True
        ),
        "no_grounded_sources": _case(
            422,
            "ASK_NO_GROUNDED_SOURCES",
            "No grounded sources were found for this question.",
            False,
        ),
        "answer_too_long": _case(
            502, "ASK_GENERATION_FAILED", "The grounded answer exceeded its safe limit.", True
        ),
        "answer_empty": _case(502, "ASK_GENERATION_FAILED", "The grounded answer was empty.", True),
        "persistence_conflict": _case(
            409, "ASK_PERSISTENCE_CONFLICT", "The Ask session changed concurrently.", True
        ),
        "request_timeout": _case(408, "ASK_TIMEOUT", "The Ask request timed out.", True),
        "cancelled": _case(499, "ASK_CANCELLED", "The Ask request was cancelled.", True),
        "internal": _case(500, "ASK_INTERNAL", "The Ask request failed.", True),
        "persistence_not_configured": _case(
            500, "ASK_INTERNAL", "Required Ask persistence is not configured.", False
        ),
        "retriever_unavailable": _case(
            500, "ASK_INTERNAL", "The configured Ask retriever is unavailable.", False
        ),
        "host_identity_invalid": _case(
            500, "ASK_INTERNAL", "The Ask host identity is invalid.", False
        ),
    }
)
