"""The component envelope ``agentskit.chat.component`` v1: render frames and the events they emit.

A render frame asks a client to draw a registered component with some props, and carries a
semantic fallback for clients that cannot. Selection and interaction events flow back. The
envelope checks structure only: whether a component key is registered and whether props fit that
component is the application layer's decision. See ``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import PlainValidator

from agentskit_chat.errors import ProtocolError

from ._bounded import BoundedJson
from ._decode import NOT_JSON, as_text, is_object, parse_candidate, validate_model
from ._result import Decoded, DecodeResult, Diagnostic, Rejected
from ._types import SafeId, VersionOne, WireModel, one_of, pattern, text

__all__ = [
    "COMPONENT_PROTOCOL",
    "COMPONENT_VERSION",
    "ComponentEvent",
    "ComponentFrame",
    "ComponentInteractEvent",
    "ComponentSelectEvent",
    "SemanticFallback",
    "create_component_interaction_event",
    "create_component_select_event",
    "decode_component_frame",
    "encode_component_event",
    "format_semantic_fallback",
    "is_component_frame_candidate",
]

#: The component envelope's protocol id and the only version this package reads and writes.
COMPONENT_PROTOCOL: Final = "agentskit.chat.component"
COMPONENT_VERSION: Final = 1
_KEY_PATTERN: Final = r"[a-z][a-z0-9-]{0,63}"

_INVALID_CODE: Final = "COMPONENT_INVALID_FRAME"
_NOT_JSON = Diagnostic(_INVALID_CODE, "Component frame is not valid JSON.")
_INVALID = Diagnostic(_INVALID_CODE, "Component frame payload is invalid.")
_UNSUPPORTED = Diagnostic(
    "COMPONENT_UNSUPPORTED_VERSION", "Component frame uses an unsupported version."
)
_UNKNOWN_TYPE = Diagnostic("COMPONENT_UNKNOWN_TYPE", "Component frame type is unknown.")
_INVALID_EVENT_MESSAGE: Final = "Component event is invalid."

_Protocol = Annotated[
    Literal["agentskit.chat.component"], PlainValidator(one_of(COMPONENT_PROTOCOL))
]
ComponentKey = Annotated[str, PlainValidator(pattern(_KEY_PATTERN))]
_EventName = Annotated[str, PlainValidator(pattern(_KEY_PATTERN))]


class _Absent:
    """Sentinel for an interaction value that was not given (``None`` means JSON ``null``)."""

    def __repr__(self) -> str:
        return "ABSENT"


_ABSENT: Final = _Absent()


class SemanticFallback(WireModel):
    """What a client shows when it cannot render a component: a kind and a plain summary.

    Attributes:
        kind: 1..64 UTF-16 units, not trimmed.
        summary: 1..4096 UTF-16 units, not trimmed.
    """

    kind: Annotated[str, PlainValidator(text(1, 64))]
    summary: Annotated[str, PlainValidator(text(1, 4096))]


class ComponentFrame(WireModel):
    """A render frame: draw ``component_key`` as instance ``instance_id`` with ``props``.

    Attributes:
        protocol: Always ``"agentskit.chat.component"``.
        version: Always 1.
        type: Always ``"render"``.
        component_key: ``^[a-z][a-z0-9-]{0,63}$``; registration is checked by the application.
        instance_id: A safe identifier.
        props: Any bounded JSON value, ``None`` (JSON ``null``) included; the key is required.
        fallback: The semantic fallback for clients that cannot render the component.
    """

    protocol: _Protocol
    version: VersionOne
    type: Annotated[Literal["render"], PlainValidator(one_of("render"))]
    component_key: ComponentKey
    instance_id: SafeId
    props: BoundedJson
    fallback: SemanticFallback


class ComponentSelectEvent(WireModel):
    """A user picked ``choice_id`` in a rendered component instance."""

    protocol: _Protocol
    version: VersionOne
    type: Annotated[Literal["select"], PlainValidator(one_of("select"))]
    component_key: ComponentKey
    instance_id: SafeId
    choice_id: SafeId


class ComponentInteractEvent(WireModel):
    """A rendered component instance emitted ``event``, optionally with a bounded JSON ``value``.

    ``value`` may be absent or present; present ``None`` is JSON ``null`` and is kept on the
    wire. Use :attr:`has_value` to tell the two apart.
    """

    protocol: _Protocol
    version: VersionOne
    type: Annotated[Literal["interact"], PlainValidator(one_of("interact"))]
    component_key: ComponentKey
    instance_id: SafeId
    event: _EventName
    value: BoundedJson = None

    @property
    def has_value(self) -> bool:
        """Whether the event carries a value (``None`` counts: it is JSON ``null``)."""
        return "value" in self.model_fields_set


#: An event flowing back from a rendered component.
ComponentEvent = ComponentSelectEvent | ComponentInteractEvent


def _candidate(payload: object) -> Any:
    if isinstance(payload, str | bytes | bytearray | memoryview):
        return parse_candidate(as_text(payload))
    return payload


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _decode_frame(payload: object) -> DecodeResult[ComponentFrame]:
    candidate = _candidate(payload)
    if candidate is NOT_JSON:
        return Rejected(_NOT_JSON)
    if is_object(candidate):
        protocol = candidate.get("protocol")
        if type(protocol) is str and protocol == COMPONENT_PROTOCOL:
            version = candidate.get("version")
            if _is_number(version) and version != COMPONENT_VERSION:
                return Rejected(_UNSUPPORTED)
            kind = candidate.get("type")
            if type(kind) is not str or kind != "render":
                return Rejected(_UNKNOWN_TYPE)
    frame = validate_model(ComponentFrame, candidate)
    return Rejected(_INVALID) if frame is None else Decoded(frame)


def decode_component_frame(payload: object) -> DecodeResult[ComponentFrame]:
    """Decode a render frame from JSON text (``str`` or UTF-8 ``bytes``) or a parsed value.

    Checks, in order: JSON syntax, then (for the component protocol only) a numeric version
    other than 1, then a ``type`` other than ``"render"``, then the full frame schema.

    Returns:
        ``Decoded(frame)``, or ``Rejected`` with ``COMPONENT_INVALID_FRAME``,
        ``COMPONENT_UNSUPPORTED_VERSION`` or ``COMPONENT_UNKNOWN_TYPE``. Never raises.
    """
    try:
        return _decode_frame(payload)
    except Exception:
        return Rejected(_INVALID)


def is_component_frame_candidate(payload: object) -> bool:
    """Whether ``payload`` claims to be a component frame: an object with the component protocol.

    JSON text that does not parse is not a candidate. Never raises.
    """
    try:
        candidate = _candidate(payload)
        if not is_object(candidate):
            return False
        protocol = candidate.get("protocol")
        return type(protocol) is str and protocol == COMPONENT_PROTOCOL
    except Exception:
        return False


def _frame_identity(frame: ComponentFrame | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(frame, ComponentFrame):
        return {"componentKey": frame.component_key, "instanceId": frame.instance_id}
    try:
        return {"componentKey": frame["componentKey"], "instanceId": frame["instanceId"]}
    except Exception:
        raise ProtocolError(_INVALID_CODE, _INVALID_EVENT_MESSAGE) from None


def create_component_select_event(
    frame: ComponentFrame | Mapping[str, Any], choice_id: str
) -> ComponentSelectEvent:
    """The selection event for ``choice_id`` in the component instance that ``frame`` rendered.

    Raises:
        ProtocolError: ``COMPONENT_INVALID_FRAME`` when ``choice_id`` is not a safe identifier
            or the frame's key or instance id is invalid.
    """
    wire = {
        "protocol": COMPONENT_PROTOCOL,
        "version": COMPONENT_VERSION,
        "type": "select",
        **_frame_identity(frame),
        "choiceId": choice_id,
    }
    event = validate_model(ComponentSelectEvent, wire)
    if event is None:
        raise ProtocolError(_INVALID_CODE, _INVALID_EVENT_MESSAGE)
    return event


def create_component_interaction_event(
    frame: ComponentFrame | Mapping[str, Any], event: str, value: Any = _ABSENT
) -> ComponentInteractEvent:
    """The interaction event ``event`` of the component instance that ``frame`` rendered.

    Args:
        frame: The render frame (or its wire mapping) the event belongs to.
        event: The event name, ``^[a-z][a-z0-9-]{0,63}$``.
        value: Optional bounded JSON. Leave it out for no ``value`` key; pass ``None`` for an
            explicit JSON ``null``.

    Raises:
        ProtocolError: ``COMPONENT_INVALID_FRAME`` on an invalid event name, a value that is not
            bounded JSON, or an invalid frame identity.
    """
    wire = {
        "protocol": COMPONENT_PROTOCOL,
        "version": COMPONENT_VERSION,
        "type": "interact",
        **_frame_identity(frame),
        "event": event,
    }
    if value is not _ABSENT:
        wire["value"] = value
    result = validate_model(ComponentInteractEvent, wire)
    if result is None:
        raise ProtocolError(_INVALID_CODE, _INVALID_EVENT_MESSAGE)
    return result


def encode_component_event(event: ComponentEvent | Mapping[str, Any]) -> str:
    """Compact JSON text of a selection or interaction event, in schema key order.

    A mapping is validated first (by wire keys, its ``type`` picks the schema).

    Raises:
        ProtocolError: ``COMPONENT_INVALID_FRAME`` when the event is invalid.
    """
    try:
        wire = event.to_wire() if isinstance(event, WireModel) else event
        kind = wire.get("type") if is_object(wire) else None
        model: type[ComponentSelectEvent] | type[ComponentInteractEvent] | None = None
        if type(kind) is str and kind == "select":
            model = ComponentSelectEvent
        elif type(kind) is str and kind == "interact":
            model = ComponentInteractEvent
        validated = None if model is None else validate_model(model, wire)
        if validated is not None:
            return validated.to_json()
    except Exception:
        pass
    raise ProtocolError(_INVALID_CODE, _INVALID_EVENT_MESSAGE)


def format_semantic_fallback(fallback: SemanticFallback | Mapping[str, Any]) -> str:
    """The shared text rendering of a fallback: ``[unsupported visual: <kind>] <summary>``.

    Raises:
        ProtocolError: ``COMPONENT_INVALID_FRAME`` when a mapping is not a valid fallback.

    >>> format_semantic_fallback(SemanticFallback(kind="chart", summary="Revenue rose 12%."))
    '[unsupported visual: chart] Revenue rose 12%.'
    """
    model = fallback if isinstance(fallback, SemanticFallback) else None
    if model is None:
        model = validate_model(SemanticFallback, fallback)
    if model is None:
        raise ProtocolError(_INVALID_CODE, _INVALID.message)
    return f"[unsupported visual: {model.kind}] {model.summary}"
