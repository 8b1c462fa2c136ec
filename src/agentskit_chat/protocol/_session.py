"""The persistent application session ``agentskit.chat.session`` v1, with its v0 migration.

A session snapshot holds application metadata only (never chat messages): session and
definition identity, a compare-and-set cursor, the deterministic conversation's decisions, the
current turn lease, recent terminal turns and action-confirmation bindings. See
``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeVar, get_args

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, PlainValidator

from agentskit_chat.errors import ProtocolError

from ._bounded import is_bounded_json
from ._decode import NOT_JSON, as_text, is_object, parse_candidate, validate_model
from ._result import Decoded, DecodeResult, Diagnostic, Rejected
from ._types import (
    NonNegInt,
    SafeId,
    Timestamp,
    VersionOne,
    WireModel,
    array,
    freeze,
    int_between,
    not_null,
    one_of,
    text,
    thaw,
)

__all__ = [
    "SESSION_PROTOCOL",
    "SESSION_VERSION",
    "ActiveTurn",
    "Confirmation",
    "ConfirmationStatus",
    "ConversationState",
    "Decision",
    "SessionSnapshot",
    "TerminalTurn",
    "decode_session_snapshot",
    "encode_session_snapshot",
]

#: The session envelope's protocol id and current version (version 0 is migrated on decode).
SESSION_PROTOCOL: Final = "agentskit.chat.session"
SESSION_VERSION: Final = 1

_INVALID_CODE: Final = "SESSION_INVALID_SNAPSHOT"
_NOT_JSON = Diagnostic(_INVALID_CODE, "Session snapshot is not valid JSON.")
_INVALID = Diagnostic(_INVALID_CODE, "Session snapshot payload is invalid.")
_UNSUPPORTED = Diagnostic(
    "SESSION_UNSUPPORTED_VERSION", "Session snapshot uses an unsupported version."
)

T = TypeVar("T")

_State = Annotated[str, PlainValidator(text(1, 128))]

#: Where a confirmation stands: pending, claimed (``approving``, ``rejecting``, ``expiring``,
#: persisted before the upstream call completes) or terminal (``approved``, ``rejected``,
#: ``expired``).
ConfirmationStatus = Literal[
    "pending", "approving", "rejecting", "expiring", "approved", "rejected", "expired"
]


def _unique(key: Callable[[Any], str]) -> Callable[[tuple[T, ...]], tuple[T, ...]]:
    """A validator for a tuple whose items have pairwise different ``key`` (exact equality)."""

    def check(items: tuple[T, ...]) -> tuple[T, ...]:
        keys = {key(item) for item in items}
        if len(keys) != len(items):
            raise ValueError("duplicate key")
        return items

    return check


def _confirmation_input(value: Any) -> Any:
    if type(value) is not dict and type(value) is not MappingProxyType:
        raise ValueError("expected an object")
    # The reference builds a JavaScript record, where assigning "__proto__" sets the prototype
    # instead of an own key: a top-level "__proto__" key never survives.
    record = {key: item for key, item in value.items() if key != "__proto__"}
    if not is_bounded_json(record):
        raise ValueError("not bounded JSON")
    return freeze(record)


class ActiveTurn(WireModel):
    """The current turn lease: ``turn_id`` holds the session until ``expires_at`` (epoch ms)."""

    turn_id: SafeId
    expires_at: NonNegInt


class TerminalTurn(WireModel):
    """A finished turn and how it ended."""

    turn_id: SafeId
    outcome: Annotated[
        Literal["completed", "indeterminate"],
        PlainValidator(one_of("completed", "indeterminate")),
    ]


class Decision(WireModel):
    """One deterministic routing decision replayed to rebuild the conversation state.

    Attributes:
        message_id: The user message the decision answered (unique within the conversation).
        input: The user's input, 0..16384 UTF-16 units.
        route_id: The route that matched.
        kind: ``deterministic``, ``repaired`` or ``fallback``.
        content: The reply, 0..65536 units.
        from_state: The state before, 1..128 units.
        to_state: The state after, 1..128 units.
    """

    message_id: SafeId
    input: Annotated[str, PlainValidator(text(0, 16384))]
    route_id: SafeId
    kind: Annotated[
        Literal["deterministic", "repaired", "fallback"],
        PlainValidator(one_of("deterministic", "repaired", "fallback")),
    ]
    content: Annotated[str, PlainValidator(text(0, 65536))]
    from_state: _State
    to_state: _State


class ConversationState(WireModel):
    """The deterministic conversation: its current state and the decisions that led there."""

    state: _State
    decisions: Annotated[
        tuple[Decision, ...],
        BeforeValidator(array),
        Field(max_length=1000),
        AfterValidator(_unique(lambda d: d.message_id)),
    ]


class Confirmation(WireModel):
    """An action waiting for (or past) the user's approval, bound to one upstream tool call.

    Attributes:
        token: The confirmation token (unique in the snapshot).
        action: The action or tool name, a safe identifier such as ``email.send``.
        input: The action's arguments: a bounded JSON object, held read-only.
        tool_call_id: The upstream tool call (unique in the snapshot).
        expires_at: Epoch milliseconds.
        status: See :data:`ConfirmationStatus`.
    """

    token: SafeId
    action: SafeId
    input: Annotated[Any, PlainValidator(_confirmation_input), PlainSerializer(thaw)]
    tool_call_id: SafeId
    expires_at: NonNegInt
    status: Annotated[
        ConfirmationStatus,
        PlainValidator(one_of(*get_args(ConfirmationStatus))),
    ]


class SessionSnapshot(WireModel):
    """A persistent application session, version 1.

    Attributes:
        protocol: Always ``"agentskit.chat.session"``.
        version: Always 1 (decoding migrates version 0).
        session_id: The session.
        definition_id: The chat definition the session runs.
        definition_revision: The definition's revision, at least 1.
        updated_at: When the snapshot was written (timestamp grammar, offsets allowed).
        cursor: The compare-and-set version: a writer stores ``cursor + 1`` only if the stored
            cursor still equals the one it loaded.
        active_turn: The current turn lease, if any.
        terminal_turns: Up to 64 finished turns with unique ids, if any.
        conversation: The deterministic conversation, if any.
        confirmations: Up to 1000 confirmations with unique tokens and unique tool call ids.
    """

    protocol: Annotated[Literal["agentskit.chat.session"], PlainValidator(one_of(SESSION_PROTOCOL))]
    version: VersionOne
    session_id: SafeId
    definition_id: SafeId
    definition_revision: Annotated[int, PlainValidator(int_between(1))]
    updated_at: Timestamp
    cursor: NonNegInt
    active_turn: Annotated[ActiveTurn | None, BeforeValidator(not_null)] = None
    terminal_turns: Annotated[
        tuple[TerminalTurn, ...] | None,
        BeforeValidator(array),
        Field(max_length=64),
        AfterValidator(_unique(lambda t: t.turn_id)),
    ] = None
    conversation: Annotated[ConversationState | None, BeforeValidator(not_null)] = None
    confirmations: Annotated[
        tuple[Confirmation, ...],
        BeforeValidator(array),
        Field(max_length=1000),
        AfterValidator(_unique(lambda c: c.token)),
        AfterValidator(_unique(lambda c: c.tool_call_id)),
    ]


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _decode(payload: object) -> DecodeResult[SessionSnapshot]:
    if isinstance(payload, str | bytes | bytearray | memoryview):
        candidate = parse_candidate(as_text(payload))
        if candidate is NOT_JSON:
            return Rejected(_NOT_JSON)
    else:
        candidate = payload
    if not is_object(candidate):
        return Rejected(_INVALID)
    version = candidate.get("version")
    # Not scoped by protocol: any other numeric version is unsupported, whatever the protocol.
    if _is_number(version) and version not in (0, 1):
        return Rejected(_UNSUPPORTED)
    snapshot = validate_model(SessionSnapshot, candidate)
    if snapshot is None and _is_number(version) and version == 0:
        # Version 0 has the same fields without ``protocol`` (ignored if present), so validating
        # it and migrating it is validating the record with the v1 identity put in place.
        migrated = {**candidate, "protocol": SESSION_PROTOCOL, "version": SESSION_VERSION}
        snapshot = validate_model(SessionSnapshot, migrated)
    return Rejected(_INVALID) if snapshot is None else Decoded(snapshot)


def decode_session_snapshot(payload: object) -> DecodeResult[SessionSnapshot]:
    """Decode a session snapshot from JSON text (``str`` or UTF-8 ``bytes``) or a parsed value.

    A version 0 record (no ``protocol``; any ``protocol`` value is ignored) is migrated to
    version 1.

    Returns:
        ``Decoded(snapshot)``, or ``Rejected`` with ``SESSION_INVALID_SNAPSHOT`` or
        ``SESSION_UNSUPPORTED_VERSION``. Never raises.
    """
    try:
        return _decode(payload)
    except Exception:
        return Rejected(_INVALID)


def encode_session_snapshot(snapshot: SessionSnapshot | Mapping[str, Any]) -> str:
    """Compact JSON text of a version 1 snapshot, in schema key order, absent optionals omitted.

    A mapping is validated as version 1 first (no migration: encoders write the current form).

    Raises:
        ProtocolError: ``SESSION_INVALID_SNAPSHOT`` when the snapshot is invalid.
    """
    try:
        wire = snapshot.to_wire() if isinstance(snapshot, WireModel) else snapshot
        validated = validate_model(SessionSnapshot, wire)
        if validated is not None:
            return validated.to_json()
    except Exception:
        pass
    raise ProtocolError(_INVALID.code, _INVALID.message)
