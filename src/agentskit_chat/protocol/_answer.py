"""The answer envelope ``agentskit.chat.answer`` v1.

One envelope for every outcome a question can have: an exact ``answer`` (local or backend),
``choices`` when several local entries match, or an ``escalation`` that says why no answer
could be given. Cross-field rules tie confidence to provenance and outcome.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BeforeValidator, Field, PlainValidator, TypeAdapter, model_validator

from ._decode import validate_model
from ._deterministic import ANSWER_MAX_BYTES, bounded_decode
from ._knowledge import Citation
from ._result import DecodeResult
from ._text import normalize_knowledge_key, truncate_utf16
from ._types import (
    ContentHash,
    SafeId,
    VersionOne,
    WireModel,
    array,
    first_use_adapter,
    one_of,
    text,
    trimmed,
)

__all__ = [
    "ANSWER_PROTOCOL",
    "AnswerBody",
    "AnswerEnvelope",
    "AnswerResponse",
    "BackendProvenance",
    "ChoicesAnswer",
    "Confidence",
    "EscalationAnswer",
    "ExactAnswer",
    "LocalProvenance",
    "Suggestion",
    "decode_answer_response",
    "validate_answer_envelope",
]

ANSWER_PROTOCOL: Final = "agentskit.chat.answer"
QUERY_MAX_UNITS: Final = 512

Protocol = Annotated[Literal["agentskit.chat.answer"], PlainValidator(one_of(ANSWER_PROTOCOL))]
Query = Annotated[str, PlainValidator(text(0, QUERY_MAX_UNITS))]
Message = Annotated[str, PlainValidator(text(1, 4096))]
Level = Annotated[Literal["high", "medium", "low"], PlainValidator(one_of("high", "medium", "low"))]
Basis = Annotated[
    Literal["exact", "ambiguous", "miss", "stale", "corrupt", "offline", "backend"],
    PlainValidator(one_of("exact", "ambiguous", "miss", "stale", "corrupt", "offline", "backend")),
]
Reason = Annotated[
    Literal["miss", "stale", "corrupt", "offline"],
    PlainValidator(one_of("miss", "stale", "corrupt", "offline")),
]
Ids = Annotated[tuple[SafeId, ...], BeforeValidator(array), Field(min_length=1, max_length=8)]
ProviderName = Annotated[str | None, PlainValidator(trimmed(1, 128))]


class Confidence(WireModel):
    """How sure the answer is, and why: ``{level, basis}``."""

    level: Level
    basis: Basis


class LocalProvenance(WireModel):
    """The answer came from a verified local artifact."""

    source: Literal["local"]
    artifact_id: SafeId
    content_hash: ContentHash
    entry_ids: Ids


class BackendProvenance(WireModel):
    """The answer came from a backend (provider and model are optional, trimmed 1..128)."""

    source: Literal["backend"]
    provider: ProviderName = None
    model: ProviderName = None


class AnswerBody(WireModel):
    """Answer Markdown (1..16384 units, kept verbatim) and up to 8 safe citations."""

    markdown: Annotated[str, PlainValidator(text(1, 16384))]
    citations: Annotated[tuple[Citation, ...], BeforeValidator(array), Field(max_length=8)]


class Suggestion(WireModel):
    """One choice among ambiguous entries; ``value`` is the alias a user can send to pick it."""

    id: SafeId
    label: Annotated[str, PlainValidator(trimmed(1, 256))]
    value: Annotated[str, PlainValidator(trimmed(1, QUERY_MAX_UNITS))]


class _Envelope(WireModel):
    protocol: Protocol
    version: VersionOne
    outcome: str
    query: Query
    normalized_query: Query

    @model_validator(mode="after")
    def _normalized_query_matches(self) -> Any:
        expected = truncate_utf16(normalize_knowledge_key(self.query), QUERY_MAX_UNITS)
        if self.normalized_query != expected:
            raise ValueError("normalizedQuery does not match query")
        return self


class ExactAnswer(_Envelope):
    """``outcome: "answer"``: local (``high/exact``, one entry) or backend (``high/backend``)."""

    outcome: Literal["answer"]
    answer: AnswerBody
    provenance: Annotated[LocalProvenance | BackendProvenance, Field(discriminator="source")]
    confidence: Confidence

    @model_validator(mode="after")
    def _confidence_matches(self) -> ExactAnswer:
        level, basis = self.confidence.level, self.confidence.basis
        if isinstance(self.provenance, LocalProvenance):
            ok = level == "high" and basis == "exact" and len(self.provenance.entry_ids) == 1
        else:
            ok = level == "high" and basis == "backend"
        if not ok:
            raise ValueError("confidence does not match provenance")
        return self


class ChoicesAnswer(_Envelope):
    """``outcome: "choices"``: 2..8 suggestions, ``medium/ambiguous``, ids in provenance order."""

    outcome: Literal["choices"]
    message: Message
    suggestions: Annotated[
        tuple[Suggestion, ...], BeforeValidator(array), Field(min_length=2, max_length=8)
    ]
    provenance: LocalProvenance
    confidence: Confidence

    @model_validator(mode="after")
    def _choices_consistent(self) -> ChoicesAnswer:
        if (self.confidence.level, self.confidence.basis) != ("medium", "ambiguous"):
            raise ValueError("choices must be medium/ambiguous")
        if self.provenance.entry_ids != tuple(s.id for s in self.suggestions):
            raise ValueError("provenance must list the suggestion ids in order")
        return self


class EscalationAnswer(_Envelope):
    """``outcome: "escalation"``: no exact answer; ``low`` confidence whose basis is the reason."""

    outcome: Literal["escalation"]
    message: Message
    reason: Reason
    candidate_entry_ids: Annotated[
        tuple[SafeId, ...] | None, BeforeValidator(array), Field(max_length=8)
    ] = None
    confidence: Confidence

    @model_validator(mode="after")
    def _confidence_is_reason(self) -> EscalationAnswer:
        if self.confidence.level != "low" or self.confidence.basis != self.reason:
            raise ValueError("escalation confidence must be low/<reason>")
        return self


AnswerEnvelope = Annotated[
    ExactAnswer | ChoicesAnswer | EscalationAnswer, Field(discriminator="outcome")
]
#: Alias kept for symmetry with the reference's ``AnswerResponse`` type name.
AnswerResponse = AnswerEnvelope

_ENVELOPE: Final[TypeAdapter[ExactAnswer | ChoicesAnswer | EscalationAnswer]] = first_use_adapter(
    AnswerEnvelope
)


def validate_answer_envelope(
    candidate: object,
) -> ExactAnswer | ChoicesAnswer | EscalationAnswer | None:
    """Validate an already-parsed answer envelope; ``None`` when invalid. Never raises."""
    return validate_model(_ENVELOPE, candidate)


def decode_answer_response(
    payload: object,
) -> DecodeResult[ExactAnswer | ChoicesAnswer | EscalationAnswer]:
    """Decode an ``agentskit.chat.answer`` v1 envelope (256 KiB limit). Never raises."""
    return bounded_decode(
        payload,
        protocol=ANSWER_PROTOCOL,
        limit=ANSWER_MAX_BYTES,
        model=_ENVELOPE,
    )
