"""Ask service v1 event records.

An Ask service streams one strict JSON record per line: ``text`` deltas, ``tool`` calls, then a
final ``done`` or ``error``. Every record is strict (an unknown key makes it invalid) and carries
no version: the endpoint (``/v1/ask``) does. :func:`encode_ask_event` writes one validated line;
decoding lives in :mod:`._ask_ndjson`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import Field, PlainSerializer, PlainValidator, TypeAdapter

from agentskit_chat.errors import ProtocolError

from ._decode import validate_model
from ._json import MAX_JSON_DEPTH, MAX_SAFE_INTEGER
from ._text import utf16_len
from ._types import OptJsBool, StrictWireModel, first_use_adapter, pattern, text, thaw

__all__ = [
    "ASK_EVENT_MAX_BYTES",
    "ASK_EVENT_MAX_RECORDS",
    "ASK_SERVICE_PROTOCOL_VERSION",
    "AskDoneEvent",
    "AskErrorEvent",
    "AskEvent",
    "AskEventModel",
    "AskTextEvent",
    "AskToolEvent",
    "encode_ask_event",
    "validate_ask_event",
]

#: The Ask service protocol version. Records carry no version: the endpoint (``/v1/ask``) does.
ASK_SERVICE_PROTOCOL_VERSION: Final = 1
#: The per-record, per-partial-line and ``text.delta`` bound (bytes; UTF-16 units for ``delta``).
ASK_EVENT_MAX_BYTES: Final = 1048576
#: How many LF-terminated lines one ``decode_ask_events`` call consumes at most.
ASK_EVENT_MAX_RECORDS: Final = 4096

#: What :func:`encode_ask_event` raises with: ``ProtocolError(code, message)``.
INVALID_EVENT_CODE: Final = "ASK_INVALID_EVENT"
INVALID_EVENT_MESSAGE: Final = "The Ask event is invalid."

_ARGS_KEY_MAX_UNITS: Final = 128
# The record is one level and ``args`` another: a value inside ``args`` may nest this deep for
# the whole line to stay within the bound the decoder parses.
_ARGS_VALUE_MAX_DEPTH: Final = MAX_JSON_DEPTH - 2
_CONTAINERS: Final = (dict, list, tuple, MappingProxyType)


# --- the four records ----------------------------------------------------------------------------


class _AskEventBase(StrictWireModel):
    def model_post_init(self, context: Any, /) -> None:
        # ``type`` has a default for ergonomic construction, but it is always on the wire.
        self.__pydantic_fields_set__.add("type")


class AskTextEvent(_AskEventBase):
    """A piece of answer text: ``{"type": "text", "delta": ...}``.

    ``delta`` is 0..1048576 UTF-16 units, kept verbatim; consumers ignore an empty delta.

    >>> AskTextEvent(delta="hello").to_json()
    '{"type":"text","delta":"hello"}'
    """

    type: Literal["text"] = "text"
    delta: Annotated[str, PlainValidator(text(0, ASK_EVENT_MAX_BYTES))]


def _json_scalar(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is bool or kind is float or value is None:
        return value
    if kind is not int:
        # Subclasses (enums, say) become the plain value; their own methods are not called.
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, float):
            return float.__float__(value)
        if not isinstance(value, int):
            raise ValueError("not a JSON value")
        value = int.__int__(value)
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    # JavaScript holds every number as a double: huge integers round, overflow is infinite.
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _json_key(key: Any) -> str:
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str.__str__(key)
    raise ValueError("object keys must be strings")


def _freeze_json(root: Any, max_depth: int = _ARGS_VALUE_MAX_DEPTH) -> Any:
    """A read-only deep copy of a JSON value, without recursion, at most ``max_depth`` deep.

    Raises:
        ValueError: when ``root`` holds something that is not JSON, is cyclic, or nests more
            than ``max_depth`` arrays and objects.
    """
    if not isinstance(root, _CONTAINERS):
        return _json_scalar(root)
    holder: list[Any] = []
    # Frames: (source, item iterator, target, target is a mapping, parent target, key in parent).
    stack: list[tuple[Any, Iterator[Any], Any, bool, Any, Any]] = []
    open_ids: set[int] = set()

    def push(source: Any, parent: Any, key: Any) -> None:
        if id(source) in open_ids:
            raise ValueError("cyclic value")
        if len(stack) >= max_depth:
            raise ValueError("nested too deeply")
        open_ids.add(id(source))
        if isinstance(source, dict):
            stack.append((source, iter(dict.items(source)), {}, True, parent, key))
        elif isinstance(source, MappingProxyType):
            stack.append((source, iter(source.items()), {}, True, parent, key))
        else:
            stack.append((source, iter(source), [], False, parent, key))

    push(root, holder, None)
    while stack:
        source, items, target, is_mapping, parent, key = stack[-1]
        for item in items:
            if is_mapping:
                child_key, child = item
                child_key = _json_key(child_key)
            else:
                child_key, child = None, item
            if isinstance(child, _CONTAINERS):
                push(child, target, child_key)
                break
            if is_mapping:
                target[child_key] = _json_scalar(child)
            else:
                target.append(_json_scalar(child))
        else:
            stack.pop()
            open_ids.discard(id(source))
            frozen = MappingProxyType(target) if is_mapping else tuple(target)
            if type(parent) is dict:
                parent[key] = frozen
            else:
                parent.append(frozen)
    return holder[0]


def _tool_args(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict | MappingProxyType):
        raise ValueError("args must be a JSON object")
    items = dict.items(value) if isinstance(value, dict) else value.items()
    args: dict[str, Any] = {}
    for raw_key, item in items:
        key = _json_key(raw_key)
        if len(key) > _ARGS_KEY_MAX_UNITS // 2 and utf16_len(key) > _ARGS_KEY_MAX_UNITS:
            raise ValueError("args key too long")
        if key == "__proto__":
            # The reference copies record keys by assignment, which turns this key into a
            # prototype instead of a property: it never reaches the decoded value.
            continue
        args[key] = _freeze_json(item)
    return MappingProxyType(args)


class AskToolEvent(_AskEventBase):
    """A tool call: ``{"type": "tool", "id", "name", "args"}``.

    ``id`` is 0..256 units and ``name`` 0..128 (both may be empty). ``args`` is a JSON object
    whose keys are at most 128 units; its values are any JSON, carried through read-only, as
    deep as the record's line may nest (``MAX_JSON_DEPTH`` levels, the record included).
    A top-level ``__proto__`` key of ``args`` is dropped, as the reference does.

    >>> AskToolEvent(id="c1", name="cite", args={"sources": []}).to_json()
    '{"type":"tool","id":"c1","name":"cite","args":{"sources":[]}}'
    """

    type: Literal["tool"] = "tool"
    id: Annotated[str, PlainValidator(text(0, 256))]
    name: Annotated[str, PlainValidator(text(0, 128))]
    args: Annotated[Mapping[str, Any], PlainValidator(_tool_args), PlainSerializer(thaw)]


class AskDoneEvent(_AskEventBase):
    """The successful end of a stream: ``{"type": "done", "model"?}`` (``model`` 0..256 units).

    >>> AskDoneEvent(model="test").to_json()
    '{"type":"done","model":"test"}'
    """

    type: Literal["done"] = "done"
    model: Annotated[str | None, PlainValidator(text(0, 256))] = None


class AskErrorEvent(_AskEventBase):
    """The failed end of a stream: ``{"type": "error", "message", "code"?, "retryable"?}``.

    ``message`` is 1..4096 units and not trimmed; ``code`` matches ``^[A-Z][A-Z0-9_]{0,127}$``.

    >>> AskErrorEvent(message="The Ask request timed out.", code="ASK_TIMEOUT").to_json()
    '{"type":"error","message":"The Ask request timed out.","code":"ASK_TIMEOUT"}'
    """

    type: Literal["error"] = "error"
    message: Annotated[str, PlainValidator(text(1, 4096))]
    code: Annotated[str | None, PlainValidator(pattern(r"[A-Z][A-Z0-9_]{0,127}"))] = None
    retryable: OptJsBool = None


#: One Ask service record, discriminated by ``type``.
AskEvent = Annotated[
    AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent, Field(discriminator="type")
]
_EVENT: Final[TypeAdapter[AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent]] = (
    first_use_adapter(AskEvent)
)


def validate_ask_event(
    candidate: object,
) -> AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent | None:
    """Validate an already-parsed record against the four strict schemas; ``None`` if invalid.

    Never raises, whatever ``candidate`` is.
    """
    return validate_model(_EVENT, candidate)


def encode_ask_event(
    event: AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent | Mapping[str, Any],
) -> str:
    """One NDJSON line for ``event``: compact JavaScript-compatible JSON plus a LF.

    The event (a model or its wire mapping) is validated first. Keys follow schema order;
    ``args`` keeps its own order, array-index keys first, as ``JSON.stringify`` writes it.

    Raises:
        ProtocolError: ``ASK_INVALID_EVENT`` when ``event`` is not a valid Ask record (or its
            ``args`` nest too deeply to serialize).

    >>> encode_ask_event({"type": "done"})
    '{"type":"done"}\\n'
    """
    try:
        wire = event.to_wire() if isinstance(event, StrictWireModel) else event
    except Exception:
        raise ProtocolError(INVALID_EVENT_CODE, INVALID_EVENT_MESSAGE) from None
    validated = validate_model(_EVENT, wire)
    if validated is None:
        raise ProtocolError(INVALID_EVENT_CODE, INVALID_EVENT_MESSAGE)
    try:
        return validated.to_json() + "\n"
    except (RecursionError, MemoryError, TypeError, ValueError):
        raise ProtocolError(INVALID_EVENT_CODE, INVALID_EVENT_MESSAGE) from None


#: Any one of the four record models (the plain union, for annotations and ``isinstance``).
AskEventModel = AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent
