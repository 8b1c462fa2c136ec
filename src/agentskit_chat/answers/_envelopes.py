"""Building answer envelopes: the fixed decision texts, query rules and a validation-free path.

The resolver answers from an artifact it has just verified, so every piece of an envelope it
builds is already known to satisfy the answer schema. :func:`construct` assembles such a model
without running validation again; the tests prove that every envelope built this way decodes
back (``decode_answer_response``) to an equal value.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agentskit_chat.protocol import ANSWER_PROTOCOL, Confidence, EscalationAnswer
from agentskit_chat.protocol._text import normalize_knowledge_key, truncate_utf16, utf16_len

__all__ = [
    "BACKEND_INCOMPLETE",
    "BACKEND_INVALID",
    "BACKEND_OVERFLOW",
    "BACKEND_TOO_LONG",
    "CHOICES",
    "CORRUPT",
    "MISS",
    "OFFLINE",
    "QUERY_MAX_UNITS",
    "STALE",
    "UNAVAILABLE",
    "confidence",
    "construct",
    "escalation",
    "normalized_query",
    "truncate_query",
]

M = TypeVar("M", bound=BaseModel)

QUERY_MAX_UNITS: Final = 512

CORRUPT: Final = "Local knowledge is corrupt. A backend answer is required."
STALE: Final = "Local knowledge is stale. A backend answer is required."
MISS: Final = "No exact local answer was found. A backend answer is required."
UNAVAILABLE: Final = "The selected local answer is unavailable. A backend answer is required."
CHOICES: Final = "More than one exact local answer matches. Choose one to continue."
OFFLINE: Final = "This question needs the backend, which is not available."
BACKEND_INVALID: Final = "Backend answer contained invalid ordered content."
BACKEND_INCOMPLETE: Final = "Backend answer ended with incomplete ordered content."
BACKEND_TOO_LONG: Final = "Backend answer exceeded the unified response limit."
BACKEND_OVERFLOW: Final = "Backend stream exceeded the observation limit."

_set = object.__setattr__


def construct(cls: type[M], values: dict[str, Any], unset: frozenset[str] = frozenset()) -> M:
    """A model holding ``values`` (field name → already-valid value), without validation.

    This is what ``model_construct`` does, minus its per-field default handling: ``values``
    holds every field, in schema order, and ``unset`` names the ones holding their default
    (left out on the wire). ``values`` is owned by the model afterwards.
    """
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values).difference(unset))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


_CONFIDENCE: Final = {
    (level, basis): construct(Confidence, {"level": level, "basis": basis})
    for level, basis in (
        ("high", "exact"),
        ("high", "backend"),
        ("medium", "ambiguous"),
        ("low", "miss"),
        ("low", "stale"),
        ("low", "corrupt"),
        ("low", "offline"),
    )
}


def confidence(level: str, basis: str) -> Confidence:
    """The shared, immutable ``{level, basis}`` model."""
    return _CONFIDENCE[level, basis]


def truncate_query(query: str) -> str:
    """The first 512 UTF-16 units of ``query``, never splitting a surrogate pair.

    When unit 512 would cut an astral character in half, the cut moves one unit earlier.
    """
    if len(query) <= QUERY_MAX_UNITS // 2 or utf16_len(query) <= QUERY_MAX_UNITS:
        return query
    units = query.encode("utf-16-le", "surrogatepass")
    cut = QUERY_MAX_UNITS * 2
    # Little-endian: the high byte of unit i is at 2i+1. A high surrogate (D800-DBFF) as the
    # last kept unit followed by a low surrogate (DC00-DFFF) is a pair the cut would split.
    if 0xD8 <= units[cut - 1] <= 0xDB and 0xDC <= units[cut + 1] <= 0xDF:
        cut -= 2
    return units[:cut].decode("utf-16-le", "surrogatepass")


def normalized_query(query: str) -> str:
    """The envelope's ``normalizedQuery`` for an already-truncated query.

    The protocol defines it as the first 512 units of the normalized query, cut by code unit.
    """
    return truncate_utf16(normalize_knowledge_key(query), QUERY_MAX_UNITS)


_UNSET_CANDIDATES: Final = frozenset({"candidate_entry_ids"})


def escalation(
    reason: str, message: str, query: str, normalized: str | None = None
) -> EscalationAnswer:
    """A low-confidence escalation for an already-truncated ``query``.

    Args:
        reason: ``miss``, ``stale``, ``corrupt`` or ``offline``.
        message: One of the fixed decision texts.
        query: The query, at most 512 units (see :func:`truncate_query`).
        normalized: Its ``normalizedQuery`` when the caller already has it.
    """
    return construct(
        EscalationAnswer,
        {
            "protocol": ANSWER_PROTOCOL,
            "version": 1,
            "outcome": "escalation",
            "query": query,
            "normalized_query": normalized_query(query) if normalized is None else normalized,
            "message": message,
            "reason": reason,
            "candidate_entry_ids": None,
            "confidence": _CONFIDENCE["low", reason],
        },
        _UNSET_CANDIDATES,
    )
