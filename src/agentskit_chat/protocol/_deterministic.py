"""Bounded decoding of the deterministic-plane envelopes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter

from ._decode import NOT_JSON, as_text, is_object, parse_candidate, validate_model
from ._json import utf8_len
from ._result import Decoded, DecodeResult, Diagnostic, Rejected
from ._types import WireModel

__all__ = [
    "ANSWER_MAX_BYTES",
    "ARTIFACT_MAX_BYTES",
    "HASH_PLACEHOLDER",
    "SITE_CONFIG_MAX_BYTES",
    "bounded_decode",
]

M = TypeVar("M", bound=WireModel)

SITE_CONFIG_MAX_BYTES: Final = 16384
ARTIFACT_MAX_BYTES: Final = 524288
ANSWER_MAX_BYTES: Final = 262144
HASH_PLACEHOLDER: Final = "sha256:" + "0" * 64

LIMIT_EXCEEDED: Final = Rejected(
    Diagnostic("DETERMINISTIC_LIMIT_EXCEEDED", "Deterministic payload exceeds its safety limit.")
)
NOT_VALID_JSON: Final = Rejected(
    Diagnostic("DETERMINISTIC_INVALID_PAYLOAD", "Deterministic payload is not valid JSON.")
)
UNSUPPORTED_VERSION: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_UNSUPPORTED_VERSION", "Deterministic payload uses an unsupported version."
    )
)
INVALID: Final = Rejected(
    Diagnostic("DETERMINISTIC_INVALID_PAYLOAD", "Deterministic payload is invalid.")
)
CONFIGURED_HASH_MISMATCH: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_HASH_MISMATCH",
        "Deterministic artifact does not match the configured content hash.",
    )
)
DIFFERENT_SITE: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_INVALID_PAYLOAD", "Deterministic artifact belongs to a different site."
    )
)
TRUSTED_CONFIG_INVALID: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_INVALID_PAYLOAD",
        "Trusted deterministic artifact configuration is invalid.",
    )
)
CONTENT_HASH_MISMATCH: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_HASH_MISMATCH",
        "Deterministic artifact content does not match its SHA-256 hash.",
    )
)
INTEGRITY_UNVERIFIED: Final = Rejected(
    Diagnostic(
        "DETERMINISTIC_INVALID_PAYLOAD", "Deterministic artifact integrity could not be verified."
    )
)

TEXT_TYPES: Final = (str, bytes, bytearray, memoryview)


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def bounded_decode(
    payload: object,
    *,
    protocol: str,
    limit: int,
    model: type[M] | TypeAdapter[M],
    size_of: Callable[[M], int] | None = None,
) -> DecodeResult[M]:
    """The algorithm all three decoders share: size, parse, version gate, schema, programmatic size.

    Args:
        payload: JSON text (``str``/bytes) or an already-parsed value.
        protocol: The envelope's protocol id, for the version gate.
        limit: The envelope's byte limit.
        model: The model (or adapter) that validates the candidate.
        size_of: UTF-8 size of a decoded value's serialization; defaults to ``to_json``.
    """
    is_text = isinstance(payload, TEXT_TYPES)
    if is_text:
        text = as_text(payload)  # type: ignore[arg-type]
        if utf8_len(text) > limit:
            return LIMIT_EXCEEDED
        candidate = parse_candidate(text)
        if candidate is NOT_JSON:
            return NOT_VALID_JSON
    else:
        candidate = payload
    try:
        if is_object(candidate) and candidate.get("protocol") == protocol:
            version = candidate.get("version")
            if _is_number(version) and version != 1:
                return UNSUPPORTED_VERSION
        value = validate_model(model, candidate)
        if value is None:
            return INVALID
        if not is_text:
            size = size_of(value) if size_of is not None else utf8_len(value.to_json())
            if size > limit:
                return LIMIT_EXCEEDED
    except Exception:
        return INVALID
    return Decoded(value)
