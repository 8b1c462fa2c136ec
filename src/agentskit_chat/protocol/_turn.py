"""The snapshot-first turn protocol ``agentskit.chat.turn`` v1 (see ``docs/protocol.md``).

Three events share one envelope: ``client.turn.submit`` (the user's input),
``server.turn.snapshot`` (a complete projection of the turn, never a delta) and
``server.turn.diagnostic``. Decoders return values and never raise; the encoder and the snapshot
constructor raise :class:`~agentskit_chat.errors.ProtocolError` on invalid input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal, NotRequired, Required, TypedDict, cast

from pydantic import BeforeValidator, Discriminator, PlainValidator, Tag, TypeAdapter

from agentskit_chat.errors import ProtocolError

from ._decode import NOT_JSON, as_text, parse_candidate, validate_model
from ._message import MessageRecord, checked_messages
from ._result import Decoded, DecodeResult, Diagnostic, Rejected
from ._text import js_trim
from ._types import (
    JsBool,
    NonNegInt,
    SafeId,
    Timestamp,
    VersionOne,
    WireModel,
    first_use_adapter,
    is_safe_id,
    not_null,
    one_of,
    pattern,
    text,
)

__all__ = [
    "TURN_PROTOCOL",
    "TURN_PROTOCOL_VERSION",
    "DerivedLineage",
    "DiagnosticEvent",
    "SnapshotEvent",
    "SnapshotMessage",
    "SnapshotPayload",
    "SubmitEvent",
    "SubmitLineage",
    "SubmitPayload",
    "TokenUsage",
    "TurnDiagnostic",
    "TurnEvent",
    "TurnLineage",
    "create_snapshot_event",
    "decode_turn_event",
    "encode_turn_event",
    "snapshot_messages",
]

TURN_PROTOCOL: Final = "agentskit.chat.turn"
TURN_PROTOCOL_VERSION: Final = 1
SUBMIT: Final = "client.turn.submit"
SNAPSHOT: Final = "server.turn.snapshot"
DIAGNOSTIC: Final = "server.turn.diagnostic"
_EVENTS: Final = frozenset({SUBMIT, SNAPSHOT, DIAGNOSTIC})

INVALID_PAYLOAD: Final = "PROTOCOL_INVALID_PAYLOAD"
UNSUPPORTED_VERSION: Final = "PROTOCOL_UNSUPPORTED_VERSION"
UNKNOWN_EVENT: Final = "PROTOCOL_UNKNOWN_EVENT"
NOT_JSON_MESSAGE: Final = "Turn event is not valid JSON."
INVALID_MESSAGE: Final = "Turn event payload is invalid."
UNSUPPORTED_VERSION_MESSAGE: Final = "Turn event uses an unsupported protocol version."
UNKNOWN_EVENT_MESSAGE: Final = "Turn event kind is unknown."
UNREPRESENTABLE_MESSAGE: Final = "Message createdAt cannot be represented as a datetime."
NAIVE_DATETIME_MESSAGE: Final = "Turn event datetimes must be timezone-aware."

_TEXT_TYPES: Final = (str, bytes, bytearray, memoryview)


# --- models --------------------------------------------------------------------------------------


def _non_blank(value: Any) -> str:
    # Kept verbatim: only the non-blank check uses the JavaScript trim set.
    if type(value) is not str or not js_trim(value):
        raise ValueError("input must not be blank")
    return value


class SubmitPayload(WireModel):
    """The payload of ``client.turn.submit``: ``{input}``, non-blank after JS trim, no cap."""

    input: Annotated[str, PlainValidator(_non_blank)]


class TurnDiagnostic(WireModel):
    """A turn diagnostic ``{version: 1, code, message, retryable}``.

    It is the payload of ``server.turn.diagnostic`` and the optional ``error`` of a snapshot.
    ``code`` matches ``^[A-Z][A-Z0-9_]*$``; ``message`` is any non-empty string (not trimmed).
    """

    version: VersionOne
    code: Annotated[str, PlainValidator(pattern(r"[A-Z][A-Z0-9_]*"))]
    message: Annotated[str, PlainValidator(text(1))]
    retryable: JsBool


class TokenUsage(WireModel):
    """Token counts, each an integer ≥ 0; they are not cross-checked."""

    prompt_tokens: NonNegInt
    completion_tokens: NonNegInt
    total_tokens: NonNegInt


class SubmitLineage(WireModel):
    """Lineage of a turn started by a plain submit: ``{operation: "submit"}``."""

    operation: Annotated[Literal["submit"], PlainValidator(one_of("submit"))]


class DerivedLineage(WireModel):
    """Lineage of a retried, edited or regenerated turn, naming its parent turn and message."""

    operation: Annotated[
        Literal["retry", "edit", "regenerate"],
        PlainValidator(one_of("retry", "edit", "regenerate")),
    ]
    parent_turn_id: SafeId
    source_message_id: SafeId


_LINEAGE_TAGS: Final = {
    "submit": "submit",
    "retry": "derived",
    "edit": "derived",
    "regenerate": "derived",
}
_EVENT_TAGS: Final = {name: name for name in _EVENTS}


def _tag(value: Any, key: str, tags: Mapping[str, str]) -> str | None:
    found = value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
    return tags.get(found) if type(found) is str else None


def _lineage_tag(value: Any) -> str | None:
    return _tag(value, "operation", _LINEAGE_TAGS)


#: A snapshot's optional lineage, discriminated by ``operation``.
TurnLineage = Annotated[
    Annotated[SubmitLineage, Tag("submit")] | Annotated[DerivedLineage, Tag("derived")],
    Discriminator(_lineage_tag),
]
TurnStatus = Annotated[
    Literal["idle", "streaming", "complete", "error"],
    PlainValidator(one_of("idle", "streaming", "complete", "error")),
]


class SnapshotPayload(WireModel):
    """The payload of ``server.turn.snapshot``: the whole turn, not a delta.

    ``messages`` are validated as one memory record (structural limits first); ``status`` and
    ``error`` are not cross-checked.
    """

    messages: Annotated[tuple[MessageRecord, ...], BeforeValidator(checked_messages)]
    status: TurnStatus
    usage: TokenUsage
    error: Annotated[TurnDiagnostic | None, BeforeValidator(not_null)] = None
    lineage: Annotated[TurnLineage | None, BeforeValidator(not_null)] = None


class _Envelope(WireModel):
    protocol: Annotated[Literal["agentskit.chat.turn"], PlainValidator(one_of(TURN_PROTOCOL))]
    version: VersionOne
    event_id: SafeId
    session_id: SafeId
    turn_id: SafeId
    sequence: NonNegInt
    emitted_at: Timestamp


class SubmitEvent(_Envelope):
    """``client.turn.submit``: the client asks the application to run a turn."""

    event: Annotated[Literal["client.turn.submit"], PlainValidator(one_of(SUBMIT))]
    payload: SubmitPayload


class SnapshotEvent(_Envelope):
    """``server.turn.snapshot``: the complete current state of a turn."""

    event: Annotated[Literal["server.turn.snapshot"], PlainValidator(one_of(SNAPSHOT))]
    payload: SnapshotPayload


class DiagnosticEvent(_Envelope):
    """``server.turn.diagnostic``: a safe, fixed-text diagnostic about the turn."""

    event: Annotated[Literal["server.turn.diagnostic"], PlainValidator(one_of(DIAGNOSTIC))]
    payload: TurnDiagnostic


def _event_tag(value: Any) -> str | None:
    return _tag(value, "event", _EVENT_TAGS)


#: Any turn event, discriminated by ``event``.
TurnEvent = Annotated[
    Annotated[SubmitEvent, Tag(SUBMIT)]
    | Annotated[SnapshotEvent, Tag(SNAPSHOT)]
    | Annotated[DiagnosticEvent, Tag(DIAGNOSTIC)],
    Discriminator(_event_tag),
]

_TURN_EVENT: Final[TypeAdapter[SubmitEvent | SnapshotEvent | DiagnosticEvent]] = first_use_adapter(
    TurnEvent
)


# --- decoding ------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _echo_id(candidate: Any) -> str | None:
    try:
        if isinstance(candidate, Mapping):
            event_id = candidate.get("eventId")
            if is_safe_id(event_id):
                return event_id
    except Exception:
        return None
    return None


def _gate(candidate: Any) -> str | None:
    """The version gate, then the event-kind gate, before the schema: a code or ``None``."""
    if not isinstance(candidate, Mapping):
        return None
    protocol = candidate.get("protocol")
    if type(protocol) is not str or protocol != TURN_PROTOCOL:
        return None
    version = candidate.get("version")
    if not _is_number(version):
        return None
    if version != 1:
        return UNSUPPORTED_VERSION
    event = candidate.get("event")
    if type(event) is str and event not in _EVENTS:
        return UNKNOWN_EVENT
    return None


_MESSAGES_BY_CODE: Final = {
    INVALID_PAYLOAD: INVALID_MESSAGE,
    UNSUPPORTED_VERSION: UNSUPPORTED_VERSION_MESSAGE,
    UNKNOWN_EVENT: UNKNOWN_EVENT_MESSAGE,
}


def _reject(code: str, event_id: str | None) -> Rejected:
    return Rejected(Diagnostic(code, _MESSAGES_BY_CODE[code], event_id=event_id))


def decode_turn_event(
    payload: object,
) -> DecodeResult[SubmitEvent | SnapshotEvent | DiagnosticEvent]:
    """Decode an ``agentskit.chat.turn`` v1 event. Never raises.

    Args:
        payload: JSON text (``str`` or UTF-8 bytes) or an already-parsed value.

    Returns:
        :class:`Decoded` with the event (unknown keys dropped, schema key order), or
        :class:`Rejected` with ``PROTOCOL_INVALID_PAYLOAD``, ``PROTOCOL_UNSUPPORTED_VERSION`` or
        ``PROTOCOL_UNKNOWN_EVENT``. The diagnostic carries the event's own ``eventId`` only when
        it is a safe identifier, and never for text that is not JSON.

    >>> decode_turn_event("{").diagnostic.message
    'Turn event is not valid JSON.'
    """
    if isinstance(payload, _TEXT_TYPES):
        try:
            candidate = parse_candidate(as_text(payload))
        except Exception:
            candidate = NOT_JSON
        if candidate is NOT_JSON:
            return Rejected(Diagnostic(INVALID_PAYLOAD, NOT_JSON_MESSAGE))
    else:
        candidate = payload
    event_id = _echo_id(candidate)
    try:
        code = _gate(candidate)
        if code is not None:
            return _reject(code, event_id)
        value = validate_model(_TURN_EVENT, candidate)
    except Exception:
        value = None
    if value is None:
        return _reject(INVALID_PAYLOAD, event_id)
    return Decoded(value)


# --- encoding and construction -------------------------------------------------------------------

_EVENT_MODELS: Final = (SubmitEvent, SnapshotEvent, DiagnosticEvent)


def _invalid() -> ProtocolError:
    return ProtocolError(INVALID_PAYLOAD, INVALID_MESSAGE)


def encode_turn_event(
    event: SubmitEvent | SnapshotEvent | DiagnosticEvent | Mapping[str, Any],
) -> str:
    """Validate a turn event and serialize it exactly as the reference does.

    Output is compact ``JSON.stringify`` text in schema key order with unknown keys removed, so
    for every valid event ``decode_turn_event(encode_turn_event(e))`` equals the decoded ``e``.

    Raises:
        ProtocolError: ``PROTOCOL_INVALID_PAYLOAD`` when ``event`` is not a valid turn event.
    """
    candidate: Any = event.to_wire() if isinstance(event, _EVENT_MODELS) else event
    if not isinstance(candidate, Mapping):
        raise _invalid()
    value = validate_model(_TURN_EVENT, candidate)
    if value is None:
        raise _invalid()
    try:
        return value.to_json()
    except Exception:
        raise _invalid() from None


def _iso(moment: datetime) -> str:
    """A timezone-aware datetime as ``YYYY-MM-DDTHH:MM:SS.sssZ`` (microseconds truncated)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ProtocolError(INVALID_PAYLOAD, NAIVE_DATETIME_MESSAGE)
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise _invalid() from None
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


def _json(value: Any) -> Any:
    """What a JSON round trip makes of an in-memory value: plain dicts and lists, ISO dates."""
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, WireModel):
        return value.to_wire()
    if isinstance(value, Mapping):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json(item) for item in value]
    return value


def _record(value: Any) -> Any:
    """A message, content part or tool call: fields set to ``None`` are absent, as in JS."""
    if not isinstance(value, Mapping):
        return _json(value)
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        if key in ("parts", "toolCalls") and isinstance(item, list | tuple):
            out[key] = [_record(entry) for entry in item]
        else:
            # Carried JSON (metadata, args) keeps its nulls.
            out[key] = _json(item)
    return out


def create_snapshot_event(
    *,
    event_id: str,
    session_id: str,
    turn_id: str,
    sequence: int,
    emitted_at: str | datetime,
    messages: Sequence[MessageRecord | Mapping[str, Any]],
    status: str,
    usage: TokenUsage | Mapping[str, Any],
    lineage: SubmitLineage | DerivedLineage | Mapping[str, Any] | None = None,
    error: TurnDiagnostic | Mapping[str, Any] | None = None,
) -> SnapshotEvent:
    """Build and validate a ``server.turn.snapshot`` event from in-memory messages.

    Messages may be :class:`MessageRecord` instances or mappings with wire (camelCase) keys.
    Mappings are converted as a JSON round trip would: ``datetime`` values (``createdAt`` among
    them) become UTC ``YYYY-MM-DDTHH:MM:SS.sssZ`` strings with microseconds truncated, and
    record fields whose value is ``None`` are treated as absent (``None`` inside ``metadata``
    and ``args`` is kept as JSON null). ``lineage`` and ``error`` appear only when given.

    Raises:
        ProtocolError: ``PROTOCOL_INVALID_PAYLOAD`` when the snapshot would be invalid, or a
            datetime is naive or cannot be expressed in UTC within years 0001-9999.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise _invalid()
    try:
        payload: dict[str, Any] = {
            "messages": [_record(message) for message in messages],
            "status": status,
            "usage": _json(usage),
        }
        if error is not None:
            payload["error"] = _json(error)
        if lineage is not None:
            payload["lineage"] = _json(lineage)
        event = {
            "protocol": TURN_PROTOCOL,
            "version": TURN_PROTOCOL_VERSION,
            "eventId": event_id,
            "sessionId": session_id,
            "turnId": turn_id,
            "sequence": sequence,
            "emittedAt": _iso(emitted_at) if isinstance(emitted_at, datetime) else emitted_at,
            "event": SNAPSHOT,
            "payload": payload,
        }
    except ProtocolError:
        raise
    except Exception:
        raise _invalid() from None
    value = validate_model(SnapshotEvent, event)
    if value is None:
        raise _invalid()
    return value


# --- projecting back -----------------------------------------------------------------------------


class SnapshotMessage(TypedDict, total=False):
    """A message projected back from a snapshot: wire keys, ``createdAt`` as a ``datetime``.

    Every other field is the wire value as plain ``dict``/``list`` data.
    """

    id: Required[str]
    role: Required[str]
    content: Required[str]
    status: Required[str]
    createdAt: Required[datetime]
    parts: NotRequired[list[dict[str, Any]]]
    toolCalls: NotRequired[list[dict[str, Any]]]
    toolCallId: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]


def _created_at(value: str) -> datetime:
    try:
        return datetime(
            int(value[0:4]),
            int(value[5:7]),
            int(value[8:10]),
            int(value[11:13]),
            int(value[14:16]),
            int(value[17:19]),
            int(value[20:23]) * 1000,
            tzinfo=UTC,
        )
    except ValueError:
        # Year 0000 is a valid wire timestamp, but Python's datetime starts at year 1.
        raise ProtocolError(INVALID_PAYLOAD, UNREPRESENTABLE_MESSAGE) from None


def snapshot_messages(event: object) -> list[SnapshotMessage]:
    """The messages of a snapshot event, with ``createdAt`` as an aware UTC ``datetime``.

    ``event`` is validated strictly as a ``server.turn.snapshot`` event (a model, a mapping or
    JSON text). The result is a fresh list of plain dicts; the event is not changed.

    Raises:
        ProtocolError: ``PROTOCOL_INVALID_PAYLOAD`` when ``event`` is not a valid snapshot event,
            or when a ``createdAt`` is in year 0000, which ``datetime`` cannot represent.
    """
    result = decode_turn_event(event)
    if not isinstance(result, Decoded) or not isinstance(result.value, SnapshotEvent):
        raise _invalid()
    projected: list[SnapshotMessage] = []
    for message in result.value.payload.messages:
        wire = message.to_wire()
        wire["createdAt"] = _created_at(message.created_at)
        projected.append(cast(SnapshotMessage, wire))
    return projected
