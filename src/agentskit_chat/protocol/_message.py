"""The canonical message wire record that turn snapshots carry.

This is the upstream AgentsKit "memory record": a chat message with optional typed content parts,
tool calls and metadata. Before any field is validated, the whole ``messages`` array is checked
against structural limits counted on the synthetic record ``{"version": 1, "messages": [...]}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    PlainSerializer,
    PlainValidator,
    Tag,
    TypeAdapter,
)

from ._json import js_number
from ._text import utf16_len
from ._time import is_message_timestamp
from ._types import WireModel, array, first_use_adapter, number_at_least, one_of, thaw
from ._types import text as text_units

__all__ = [
    "MESSAGE_MAX_CONTAINER_SIZE",
    "MESSAGE_MAX_DEPTH",
    "MESSAGE_MAX_KEY_UNITS",
    "MESSAGE_MAX_NODES",
    "MessageAudioPart",
    "MessageFilePart",
    "MessageImagePart",
    "MessagePart",
    "MessageRecord",
    "MessageTextPart",
    "MessageVideoPart",
    "ToolCall",
    "is_within_message_limits",
    "message_record_nodes",
    "validate_message_records",
]

MESSAGE_MAX_NODES: Final = 10000
#: Nodes of the memory record outside its messages: the wrapper, its version and the array.
MEMORY_RECORD_WRAPPER_NODES: Final = 3
MESSAGE_MAX_DEPTH: Final = 32
MESSAGE_MAX_CONTAINER_SIZE: Final = 10000
MESSAGE_MAX_KEY_UNITS: Final = 256

# --- structural limits ---------------------------------------------------------------------------


class _Walk:
    __slots__ = ("nodes", "seen")

    def __init__(self) -> None:
        self.nodes = 0
        self.seen: set[int] = set()


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _fits(value: Any, depth: int, walk: _Walk) -> bool:
    walk.nodes += 1
    if walk.nodes > MESSAGE_MAX_NODES or depth > MESSAGE_MAX_DEPTH:
        return False
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return True
    if kind is int or kind is float:
        return _finite(value)
    if kind is not list and kind is not dict:
        # Only plain containers are JSON: subclasses, mappings, tuples and objects are not.
        return False
    if id(value) in walk.seen:
        # A container that contains itself: a cycle. (A container shared by two parents is
        # fine: the reference copies the input once, and the node count still bounds the walk.)
        return False
    if len(value) > MESSAGE_MAX_CONTAINER_SIZE:
        return False
    walk.seen.add(id(value))
    try:
        if kind is list:
            return all(_fits(item, depth + 1, walk) for item in value)
        for key, item in value.items():
            if type(key) is not str or utf16_len(key) > MESSAGE_MAX_KEY_UNITS:
                return False
            if not _fits(item, depth + 1, walk):
                return False
        return True
    finally:
        walk.seen.discard(id(value))


def message_record_nodes(record: object) -> int | None:
    """How many nodes one message record counts toward :data:`MESSAGE_MAX_NODES`, as an element
    of the memory record's ``messages`` (at depth 2); ``None`` when it breaks a limit on its
    own. A ``messages`` array is within the limits when every record fits, the array has at most
    :data:`MESSAGE_MAX_CONTAINER_SIZE` records and their nodes total at most
    ``MESSAGE_MAX_NODES - MEMORY_RECORD_WRAPPER_NODES`` (the wrapper, its version and the
    array). Never raises.
    """
    walk = _Walk()
    try:
        return walk.nodes if _fits(record, 2, walk) else None
    except Exception:
        return None


def is_within_message_limits(messages: object) -> bool:
    """Whether ``messages`` satisfies the structural limits of the memory record.

    The limits are counted on the synthetic record ``{"version": 1, "messages": messages}``:
    at most 10000 nodes (the wrapper and its version number included), depth at most 32 (the
    wrapper is depth 0, each message depth 2), at most 10000 elements or keys per container,
    keys of at most 256 UTF-16 units, finite numbers, and only plain ``dict``/``list``/``str``/
    ``int``/``float``/``bool``/``None`` values with no cycles. Never raises.
    """
    try:
        return _fits({"version": 1, "messages": messages}, 0, _Walk())
    except Exception:
        return False


# --- field types ---------------------------------------------------------------------------------


def _created_at(value: Any) -> str:
    if type(value) is not str or not is_message_timestamp(value):
        raise ValueError("invalid createdAt")
    return value


def _json_copy(value: Any, depth: int) -> Any:
    if depth > MESSAGE_MAX_DEPTH:
        raise ValueError("too deep")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int or kind is float:
        if not _finite(value):
            raise ValueError("not finite")
        return value
    if kind is dict or kind is MappingProxyType:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError("keys must be strings")
            copied[key] = _json_copy(item, depth + 1)
        return MappingProxyType(copied)
    if kind is list or kind is tuple:
        return tuple(_json_copy(item, depth + 1) for item in value)
    raise ValueError("not JSON")


def _json_object(value: Any) -> Any:
    """A plain JSON object carried through verbatim, held read-only."""
    if type(value) is not dict and type(value) is not MappingProxyType:
        raise ValueError("expected an object")
    return _json_copy(value, 0)


def _js_string(value: Any, depth: int = 0) -> str:
    """JavaScript ``String(value)`` for a JSON value (arrays join their elements with commas)."""
    if depth > MESSAGE_MAX_DEPTH:
        raise ValueError("too deep")
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if type(value) is int or type(value) is float:
        return js_number(value)
    if isinstance(value, list | tuple):
        return ",".join("" if item is None else _js_string(item, depth + 1) for item in value)
    return "[object Object]"


_DETAILS: Final = frozenset({"low", "high", "auto"})


def _image_detail(value: Any) -> Any:
    # The reference compares String(detail), so ["low"] passes and is kept as an array.
    if type(value) is str:
        if value in _DETAILS:
            return value
        raise ValueError("invalid detail")
    if type(value) is not list and type(value) is not tuple:
        raise ValueError("invalid detail")
    if _js_string(value) not in _DETAILS:
        raise ValueError("invalid detail")
    return _json_copy(value, 0)


NonEmptyText = Annotated[str, PlainValidator(text_units(1))]
AnyText = Annotated[str, PlainValidator(text_units(0))]
OptText = Annotated[str | None, PlainValidator(text_units(0))]
CreatedAt = Annotated[str, PlainValidator(_created_at)]
JsonObject = Annotated[Mapping[str, Any], PlainValidator(_json_object), PlainSerializer(thaw)]
OptJsonObject = Annotated[
    Mapping[str, Any] | None, PlainValidator(_json_object), PlainSerializer(thaw)
]
ImageDetail = Annotated[
    str | tuple[Any, ...] | None, PlainValidator(_image_detail), PlainSerializer(thaw)
]
Duration = Annotated[float | None, PlainValidator(number_at_least(0))]
Role = Annotated[
    Literal["user", "assistant", "system", "tool"],
    PlainValidator(one_of("user", "assistant", "system", "tool")),
]
MessageStatus = Annotated[
    Literal["pending", "streaming", "complete", "error"],
    PlainValidator(one_of("pending", "streaming", "complete", "error")),
]
ToolCallStatus = Annotated[
    Literal["pending", "running", "complete", "error", "requires_confirmation"],
    PlainValidator(one_of("pending", "running", "complete", "error", "requires_confirmation")),
]


# --- content parts and tool calls ----------------------------------------------------------------


class MessageTextPart(WireModel):
    """A text part: ``{type: "text", text}``."""

    type: Annotated[Literal["text"], PlainValidator(one_of("text"))]
    text: AnyText


class MessageImagePart(WireModel):
    """An image part: ``{type: "image", source, mimeType?, detail?}``.

    ``detail`` is accepted when its JavaScript string conversion is ``low``, ``high`` or
    ``auto`` (so the array ``["low"]`` passes), and is kept unchanged, as the reference does.
    """

    type: Annotated[Literal["image"], PlainValidator(one_of("image"))]
    source: AnyText
    mime_type: OptText = None
    detail: ImageDetail = None


class MessageAudioPart(WireModel):
    """An audio part: ``{type: "audio", source, mimeType?, durationSec?}`` (duration ≥ 0)."""

    type: Annotated[Literal["audio"], PlainValidator(one_of("audio"))]
    source: AnyText
    mime_type: OptText = None
    duration_sec: Duration = None


class MessageVideoPart(WireModel):
    """A video part: ``{type: "video", source, mimeType?, durationSec?}`` (duration ≥ 0)."""

    type: Annotated[Literal["video"], PlainValidator(one_of("video"))]
    source: AnyText
    mime_type: OptText = None
    duration_sec: Duration = None


class MessageFilePart(WireModel):
    """A file part: ``{type: "file", source, mimeType?, filename?}``."""

    type: Annotated[Literal["file"], PlainValidator(one_of("file"))]
    source: AnyText
    mime_type: OptText = None
    filename: OptText = None


_PART_TYPES: Final = frozenset({"text", "image", "audio", "video", "file"})


def _part_type(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if type(kind) is str and kind in _PART_TYPES else None


#: A message content part, discriminated by ``type``. Only the fields of its own type are kept.
MessagePart = Annotated[
    Annotated[MessageTextPart, Tag("text")]
    | Annotated[MessageImagePart, Tag("image")]
    | Annotated[MessageAudioPart, Tag("audio")]
    | Annotated[MessageVideoPart, Tag("video")]
    | Annotated[MessageFilePart, Tag("file")],
    Discriminator(_part_type),
]


class ToolCall(WireModel):
    """A tool call on a message: ``{id, name, args, status, result?, error?}``.

    ``id`` and ``name`` are non-empty strings (not safe identifiers); ``args`` is a JSON object
    carried through verbatim and held read-only.
    """

    id: NonEmptyText
    name: NonEmptyText
    args: JsonObject
    status: ToolCallStatus
    result: OptText = None
    error: OptText = None


class MessageRecord(WireModel):
    """One chat message as snapshots carry it (the upstream memory record).

    ``id`` is any non-empty string; ``createdAt`` is exactly ``YYYY-MM-DDTHH:MM:SS.sssZ`` naming
    a real instant; ``toolCallId`` may be empty; ``metadata`` is a JSON object carried through.
    """

    id: NonEmptyText
    role: Role
    content: AnyText
    status: MessageStatus
    created_at: CreatedAt
    parts: Annotated[tuple[MessagePart, ...] | None, BeforeValidator(array)] = None
    tool_calls: Annotated[tuple[ToolCall, ...] | None, BeforeValidator(array)] = None
    tool_call_id: OptText = None
    metadata: OptJsonObject = None


def message_wire(value: Any) -> Any:
    """The wire form of a message: a model's ``to_wire()``, anything else unchanged."""
    return value.to_wire() if isinstance(value, MessageRecord) else value


def checked_messages(value: Any) -> Any:
    """Before-validator of a ``messages`` array: structural limits first, then the schema.

    Already-validated :class:`MessageRecord` instances (in a tuple) are checked through their
    wire form, so the limits hold for the array as a whole however it was built.
    """
    if type(value) is tuple:
        value = [message_wire(item) for item in value]
    if type(value) is not list:
        raise ValueError("expected an array")
    if not is_within_message_limits(value):
        raise ValueError("message record exceeds its structural limits")
    return value


#: The ``messages`` field of a snapshot: limits checked on the raw array, then each record.
Messages = Annotated[tuple[MessageRecord, ...], BeforeValidator(checked_messages)]

_MESSAGES: Final[TypeAdapter[tuple[MessageRecord, ...]]] = first_use_adapter(Messages)


def validate_message_records(messages: object) -> tuple[MessageRecord, ...] | None:
    """Validate a ``messages`` array as the memory-record validator does; ``None`` if invalid.

    Applies the structural limits of :func:`is_within_message_limits`, then each record's
    schema; unknown keys are dropped. Never raises.
    """
    try:
        return _MESSAGES.validate_python(messages, by_alias=True, by_name=False)
    except Exception:
        return None
