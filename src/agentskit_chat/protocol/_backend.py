"""Ask backend envelopes.

The request a client posts to an Ask service, the trusted per-site configuration a server
resolves from authentication, grounded sources, the persisted session record, usage, the typed
backend diagnostic and the privacy-safe metric. Every object here is strict: an unknown key
makes it invalid. The one lenient part is the embedded deterministic escalation, which is the
``agentskit.chat.answer`` envelope (unknown keys stripped, cross-field rules enforced).

Each envelope has a decoder that accepts JSON text (``str`` or ``bytes``) or an already-parsed
value and never raises. The request decoder reports the server's own diagnostics
(``ASK_INVALID_REQUEST``); the others report ``BACKEND_INVALID_PAYLOAD``. No message ever
contains input data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BeforeValidator, Field, PlainValidator

from ._answer import EscalationAnswer, validate_answer_envelope
from ._decode import NOT_JSON, as_text, parse_candidate, validate_model
from ._result import Decoded, DecodeResult, Diagnostic, Rejected
from ._types import (
    JsBool,
    NonNegInt,
    OptSafeId,
    SafeHref,
    SafeId,
    StrictWireModel,
    Timestamp,
    VersionOne,
    WireModel,
    array,
    int_between,
    not_null,
    number_at_least,
    one_of,
    text,
    trimmed,
)

__all__ = [
    "ASK_DIAGNOSTIC_CODES",
    "ASK_MAX_SOURCES",
    "ASK_REQUEST_MAX_MESSAGES",
    "ASK_REQUEST_MAX_MESSAGE_CHARS",
    "ASK_REQUEST_PROTOCOL",
    "ASK_REQUEST_VERSION",
    "BACKEND_INVALID_PAYLOAD",
    "BACKEND_METRIC_NAMES",
    "BACKEND_METRIC_PROTOCOL",
    "BACKEND_METRIC_UNITS",
    "BACKEND_METRIC_UNIT_BY_NAME",
    "BACKEND_METRIC_VERSION",
    "BACKEND_SITE_PROTOCOL",
    "BACKEND_SITE_VERSION",
    "AskDiagnostic",
    "AskMessage",
    "AskRequest",
    "AskSessionRecord",
    "AskUsage",
    "BackendMetric",
    "BackendSiteAssistant",
    "BackendSiteConfig",
    "BackendSiteCorpus",
    "BackendSiteLimits",
    "BackendSitePersistence",
    "GroundedSource",
    "decode_ask_diagnostic",
    "decode_ask_request",
    "decode_ask_session_record",
    "decode_ask_usage",
    "decode_backend_metric",
    "decode_backend_site_config",
    "decode_grounded_source",
]

M = TypeVar("M", bound=WireModel)

#: The Ask request's ``protocol`` and ``version`` (both optional on the wire).
ASK_REQUEST_PROTOCOL: Final = "agentskit.chat.ask"
ASK_REQUEST_VERSION: Final = 1
#: At most this many messages in a request or a session record.
ASK_REQUEST_MAX_MESSAGES: Final = 64
#: At most this many UTF-16 units in one message's ``content``.
ASK_REQUEST_MAX_MESSAGE_CHARS: Final = 16384
#: The ceiling of a site's ``limits.maxSources``.
ASK_MAX_SOURCES: Final = 8
#: The backend site configuration's ``protocol`` and ``version``.
BACKEND_SITE_PROTOCOL: Final = "agentskit.chat.backend-site"
BACKEND_SITE_VERSION: Final = 1
#: The backend metric's ``protocol`` and ``version``.
BACKEND_METRIC_PROTOCOL: Final = "agentskit.chat.backend-metric"
BACKEND_METRIC_VERSION: Final = 1

#: The diagnostic code of every backend-envelope decoder except the request's.
BACKEND_INVALID_PAYLOAD: Final = "BACKEND_INVALID_PAYLOAD"

#: The eleven typed backend diagnostic codes, in spec order.
ASK_DIAGNOSTIC_CODES: Final = (
    "ASK_INVALID_REQUEST",
    "ASK_UNAUTHORIZED",
    "ASK_FORBIDDEN",
    "ASK_RATE_LIMITED",
    "ASK_TIMEOUT",
    "ASK_CANCELLED",
    "ASK_RETRIEVAL_FAILED",
    "ASK_NO_GROUNDED_SOURCES",
    "ASK_GENERATION_FAILED",
    "ASK_PERSISTENCE_CONFLICT",
    "ASK_INTERNAL",
)

#: The normative name-to-unit pairing of the reference server, in spec order.
BACKEND_METRIC_UNIT_BY_NAME: Final[Mapping[str, str]] = MappingProxyType(
    {
        "request.total_ms": "ms",
        "stream.first_event_ms": "ms",
        "stream.first_token_ms": "ms",
        "stream.bytes": "bytes",
        "stream.events": "count",
        "stream.snapshots": "count",
        "deterministic.fallback": "count",
        "retrieval.total_ms": "ms",
        "retrieval.documents": "count",
        "persistence.total_ms": "ms",
        "cancellation.count": "count",
        "conflict.count": "count",
        "error.count": "count",
        "usage.input_tokens": "tokens",
        "usage.output_tokens": "tokens",
        "usage.total_tokens": "tokens",
        "cost.usd": "usd",
    }
)
#: The seventeen metric names, in spec order.
BACKEND_METRIC_NAMES: Final = tuple(BACKEND_METRIC_UNIT_BY_NAME)
#: The five metric units.
BACKEND_METRIC_UNITS: Final = ("ms", "bytes", "count", "tokens", "usd")
_METRIC_OUTCOMES: Final = ("ok", "rejected", "cancelled", "error")

_SafeLabel = Annotated[str, PlainValidator(trimmed(1, 256))]
_Count = Annotated[int | None, PlainValidator(int_between(0))]
_Labels = Annotated[tuple[_SafeLabel, ...], BeforeValidator(array), Field(max_length=8)]
_Ids = Annotated[tuple[SafeId, ...], BeforeValidator(array), Field(max_length=64)]


# --- the Ask request -----------------------------------------------------------------------------


class AskMessage(StrictWireModel):
    """One conversation message: ``{role, content}``.

    ``role`` is ``user`` or ``assistant``; ``content`` is 0..16384 UTF-16 units, kept verbatim.
    """

    role: Annotated[Literal["user", "assistant"], PlainValidator(one_of("user", "assistant"))]
    content: Annotated[str, PlainValidator(text(0, ASK_REQUEST_MAX_MESSAGE_CHARS))]


def _escalation(value: Any) -> Any:
    """Accept only an answer envelope that is fully valid and an escalation (cross-field rules)."""
    if value is None:
        raise ValueError("null is not allowed")
    if isinstance(value, WireModel):
        value = value.to_wire()
    envelope = validate_answer_envelope(value)
    if not isinstance(envelope, EscalationAnswer):
        raise ValueError("not a valid escalation")
    return envelope


_Messages = Annotated[
    tuple[AskMessage, ...],
    BeforeValidator(array),
    Field(min_length=1, max_length=ASK_REQUEST_MAX_MESSAGES),
]


class AskRequest(StrictWireModel):
    """The body a client posts to an Ask service (``agentskit.chat.ask`` v1).

    It carries no authority: site, corpus, assistant, components and actions are unknown keys
    (so invalid); a server derives them from authenticated context.

    Attributes:
        protocol: ``"agentskit.chat.ask"`` when present (optional for older clients).
        version: ``1`` when present.
        session_id: The application session id, a safe identifier, when the client has one.
        messages: 1..64 conversation messages.
        deterministic: The deterministic plane's escalation, when it attached one: a fully
            valid ``agentskit.chat.answer`` envelope whose outcome is ``escalation``.
    """

    protocol: Annotated[
        Literal["agentskit.chat.ask"] | None, PlainValidator(one_of(ASK_REQUEST_PROTOCOL))
    ] = None
    version: Annotated[VersionOne | None, BeforeValidator(not_null)] = None
    session_id: OptSafeId = None
    messages: _Messages
    deterministic: Annotated[EscalationAnswer | None, BeforeValidator(_escalation)] = None


# --- the trusted site configuration ------------------------------------------------------------


class BackendSiteAssistant(StrictWireModel):
    """The site's persona.

    ``id`` is what a client ``persona`` hint must equal; ``name`` and the 0..8 ``suggestions``
    are safe labels (trimmed, 1..256 units).
    """

    id: SafeId
    name: _SafeLabel
    suggestions: _Labels


class BackendSiteCorpus(StrictWireModel):
    """The site's corpus: ``id`` (a client ``corpus`` hint must equal it) and retriever ``mode``."""

    id: SafeId
    mode: Annotated[Literal["local", "federated"], PlainValidator(one_of("local", "federated"))]


class BackendSiteLimits(StrictWireModel):
    """Per-site time budgets (milliseconds) and how many sources an answer may cite."""

    request_timeout_ms: Annotated[int, PlainValidator(int_between(100, 120000))]
    retrieval_timeout_ms: Annotated[int, PlainValidator(int_between(100, 60000))]
    generation_timeout_ms: Annotated[int, PlainValidator(int_between(100, 120000))]
    max_sources: Annotated[int, PlainValidator(int_between(1, ASK_MAX_SOURCES))]


class BackendSitePersistence(StrictWireModel):
    """Whether Ask sessions must be persisted (``required``) or never are (``disabled``)."""

    mode: Annotated[Literal["required", "disabled"], PlainValidator(one_of("required", "disabled"))]


class BackendSiteConfig(StrictWireModel):
    """The trusted server-side policy of one site (``agentskit.chat.backend-site`` v1).

    ``components`` and ``actions`` hold 0..64 safe identifiers each (duplicates allowed).
    """

    protocol: Annotated[
        Literal["agentskit.chat.backend-site"], PlainValidator(one_of(BACKEND_SITE_PROTOCOL))
    ]
    version: VersionOne
    site_id: SafeId
    assistant: BackendSiteAssistant
    corpus: BackendSiteCorpus
    components: _Ids
    actions: _Ids
    limits: BackendSiteLimits
    persistence: BackendSitePersistence


# --- records of the Ask pipeline -----------------------------------------------------------------


class GroundedSource(StrictWireModel):
    """One retrieved document an answer may cite.

    ``title`` is a safe label and ``excerpt`` is trimmed to 1..4096 units; ``href`` must pass
    the safe-link rule.
    """

    id: SafeId
    title: _SafeLabel
    href: SafeHref
    excerpt: Annotated[str, PlainValidator(trimmed(1, 4096))]


class AskSessionRecord(StrictWireModel):
    """The persisted conversation of one (site, subject, session).

    ``revision`` is the compare-and-set version (each save writes ``revision + 1``);
    ``messages`` holds 0..64 Ask messages.
    """

    revision: NonNegInt
    messages: Annotated[
        tuple[AskMessage, ...],
        BeforeValidator(array),
        Field(max_length=ASK_REQUEST_MAX_MESSAGES),
    ]


class AskUsage(StrictWireModel):
    """Token and cost accounting from a generator; every field is optional (``{}`` is valid).

    Token counts are integers ``>= 0``; ``cost_usd`` is any finite number ``>= 0``; ``model``
    is trimmed to 1..256 units.
    """

    input_tokens: _Count = None
    output_tokens: _Count = None
    total_tokens: _Count = None
    cost_usd: Annotated[float | None, PlainValidator(number_at_least(0))] = None
    model: Annotated[str | None, PlainValidator(trimmed(1, 256))] = None


class AskDiagnostic(StrictWireModel):
    """The typed diagnostic an Ask server reports: ``{code, message, retryable}``.

    ``code`` is one of :data:`ASK_DIAGNOSTIC_CODES`; ``message`` is trimmed to 1..4096 units.
    """

    code: Annotated[
        Literal[
            "ASK_INVALID_REQUEST",
            "ASK_UNAUTHORIZED",
            "ASK_FORBIDDEN",
            "ASK_RATE_LIMITED",
            "ASK_TIMEOUT",
            "ASK_CANCELLED",
            "ASK_RETRIEVAL_FAILED",
            "ASK_NO_GROUNDED_SOURCES",
            "ASK_GENERATION_FAILED",
            "ASK_PERSISTENCE_CONFLICT",
            "ASK_INTERNAL",
        ],
        PlainValidator(one_of(*ASK_DIAGNOSTIC_CODES)),
    ]
    message: Annotated[str, PlainValidator(trimmed(1, 4096))]
    retryable: JsBool


class BackendMetric(StrictWireModel):
    """One privacy-safe measurement (``agentskit.chat.backend-metric`` v1).

    By construction it has no field for prompts, answers, sources, credentials, subject or
    session ids. The schema does not tie ``unit`` to ``name``; the reference server always
    emits the pairing of :data:`BACKEND_METRIC_UNIT_BY_NAME`.
    """

    protocol: Annotated[
        Literal["agentskit.chat.backend-metric"],
        PlainValidator(one_of(BACKEND_METRIC_PROTOCOL)),
    ]
    version: VersionOne
    name: Annotated[str, PlainValidator(one_of(*BACKEND_METRIC_NAMES))]
    site_id: SafeId
    corpus_id: SafeId
    request_id: SafeId
    value: Annotated[float, PlainValidator(number_at_least(0))]
    unit: Annotated[
        Literal["ms", "bytes", "count", "tokens", "usd"],
        PlainValidator(one_of(*BACKEND_METRIC_UNITS)),
    ]
    outcome: Annotated[
        Literal["ok", "rejected", "cancelled", "error"], PlainValidator(one_of(*_METRIC_OUTCOMES))
    ]
    emitted_at: Timestamp


# --- decoders ------------------------------------------------------------------------------------


def _rejections(code: str, subject: str) -> tuple[Rejected, Rejected]:
    return (
        Rejected(Diagnostic(code, f"{subject} is not valid JSON.")),
        Rejected(Diagnostic(code, f"{subject} is invalid.")),
    )


_REQUEST_NOT_JSON: Final = Rejected(
    Diagnostic("ASK_INVALID_REQUEST", "Request body is not valid JSON.")
)
_REQUEST_INVALID: Final = Rejected(
    Diagnostic("ASK_INVALID_REQUEST", "The Ask request payload is invalid.")
)


def _decode(
    payload: object, model: type[M], rejections: tuple[Rejected, Rejected]
) -> DecodeResult[M]:
    not_json, invalid = rejections
    try:
        if isinstance(payload, str | bytes | bytearray | memoryview):
            candidate = parse_candidate(as_text(payload))
            if candidate is NOT_JSON:
                return not_json
        else:
            candidate = payload
        value = validate_model(model, candidate)
    except Exception:
        # Hostile programmatic input (a ``str`` subclass whose methods raise, say).
        return invalid
    return invalid if value is None else Decoded(value)


def decode_ask_request(payload: object) -> DecodeResult[AskRequest]:
    """Decode an Ask request body (JSON text, bytes, or a parsed value). Never raises.

    Diagnostics (both ``ASK_INVALID_REQUEST``, not retryable): ``Request body is not valid
    JSON.`` when the text does not parse, ``The Ask request payload is invalid.`` otherwise.
    The body-size limit (413) is the HTTP layer's, not this function's.
    """
    return _decode(payload, AskRequest, (_REQUEST_NOT_JSON, _REQUEST_INVALID))


_SITE: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The backend site configuration")
_SOURCE: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The grounded source")
_SESSION: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The Ask session record")
_USAGE: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The Ask usage record")
_DIAGNOSTIC: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The Ask diagnostic")
_METRIC: Final = _rejections(BACKEND_INVALID_PAYLOAD, "The backend metric")


def decode_backend_site_config(payload: object) -> DecodeResult[BackendSiteConfig]:
    """Decode a backend site configuration. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The backend site configuration is not valid
    JSON.`` or ``The backend site configuration is invalid.``
    """
    return _decode(payload, BackendSiteConfig, _SITE)


def decode_grounded_source(payload: object) -> DecodeResult[GroundedSource]:
    """Decode a grounded source. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The grounded source is not valid JSON.`` or
    ``The grounded source is invalid.``
    """
    return _decode(payload, GroundedSource, _SOURCE)


def decode_ask_session_record(payload: object) -> DecodeResult[AskSessionRecord]:
    """Decode a persisted Ask session record. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The Ask session record is not valid JSON.`` or
    ``The Ask session record is invalid.``
    """
    return _decode(payload, AskSessionRecord, _SESSION)


def decode_ask_usage(payload: object) -> DecodeResult[AskUsage]:
    """Decode a usage record. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The Ask usage record is not valid JSON.`` or
    ``The Ask usage record is invalid.``
    """
    return _decode(payload, AskUsage, _USAGE)


def decode_ask_diagnostic(payload: object) -> DecodeResult[AskDiagnostic]:
    """Decode a typed backend diagnostic. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The Ask diagnostic is not valid JSON.`` or
    ``The Ask diagnostic is invalid.``
    """
    return _decode(payload, AskDiagnostic, _DIAGNOSTIC)


def decode_backend_metric(payload: object) -> DecodeResult[BackendMetric]:
    """Decode a backend metric. Never raises.

    Diagnostics (``BACKEND_INVALID_PAYLOAD``): ``The backend metric is not valid JSON.`` or
    ``The backend metric is invalid.``
    """
    return _decode(payload, BackendMetric, _METRIC)
