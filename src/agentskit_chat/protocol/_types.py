"""Field types with JavaScript semantics, as pydantic ``Annotated`` types.

Every type here is strict about Python types (a ``bool`` is never a number, a number is never a
string) and lenient exactly where JavaScript is (``5.0`` is the integer 5). Lengths are UTF-16
code units; trimming uses the JavaScript whitespace set.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ._href import is_safe_href
from ._json import MAX_SAFE_INTEGER, js_stringify, plain_json
from ._text import js_trim, utf16_len
from ._time import is_timestamp

__all__ = [
    "BUILT_ON_FIRST_USE",
    "JS_INT_MAX",
    "ContentHash",
    "FrozenJson",
    "JsBool",
    "JsNumber",
    "NonNegInt",
    "OptJsBool",
    "OptSafeId",
    "OptTimestamp",
    "SafeHref",
    "SafeId",
    "StrictWireModel",
    "Timestamp",
    "VersionOne",
    "WireModel",
    "array",
    "build_wire_models",
    "first_use_adapter",
    "freeze",
    "int_between",
    "is_content_hash",
    "is_safe_id",
    "not_null",
    "number_at_least",
    "one_of",
    "pattern",
    "text",
    "thaw",
    "trimmed",
]

T = TypeVar("T")
JS_INT_MAX: Final = MAX_SAFE_INTEGER
SAFE_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
CONTENT_HASH_PATTERN: Final = r"^sha256:[a-f0-9]{64}$"
#: The configuration of the package's module-level type adapters: like the models (see
#: :class:`WireModel`), each builds its validator and serializer when first used, so importing
#: the protocol does not pay for the schemas a program never validates.
BUILT_ON_FIRST_USE: Final = ConfigDict(defer_build=True)
_ADAPTERS: Final[list[TypeAdapter[Any]]] = []


def first_use_adapter(annotation: Any) -> TypeAdapter[Any]:
    """A module-level type adapter for ``annotation`` built on first use (see
    :data:`BUILT_ON_FIRST_USE`), or by :func:`build_wire_models`."""
    adapter: TypeAdapter[Any] = TypeAdapter(annotation, config=BUILT_ON_FIRST_USE)
    _ADAPTERS.append(adapter)
    return adapter


class WireModel(BaseModel):
    """Base of every envelope model: frozen, camelCase on the wire, unknown keys dropped.

    Strict envelopes (the Ask family) override ``extra`` to ``"forbid"``. Python code may build
    models with snake_case names; decoders validate wire data by alias only. A model's validator
    and serializer are built when it is first used (``defer_build``), not when it is defined:
    a program pays only for the envelopes it handles (``agentskit-chat ask`` uses a handful of
    the package's ~70 models).
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        hide_input_in_errors=True,
        arbitrary_types_allowed=False,
        defer_build=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The wire value: camelCase keys in schema order, absent optionals omitted."""
        return _plain(self.model_dump(mode="python", by_alias=True, exclude_unset=True))  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """Compact JSON text, byte-identical to the reference's ``JSON.stringify``."""
        return js_stringify(self.to_wire())


class StrictWireModel(WireModel):
    """Base of the strict envelopes (the Ask family): any unknown key makes the object invalid.

    The one exception is a key spelled ``__proto__``, which is dropped with its value.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_proto_key(cls, data: Any) -> Any:
        # The reference copies a decoded object's keys by assignment, and assigning
        # "__proto__" sets the copy's prototype instead of adding a key: that key never reaches
        # the value, so it is not an unknown key. Dropping it (value and all, never read)
        # accepts exactly what the reference accepts, with nothing inherited from it.
        if type(data) is dict and "__proto__" in data:
            return {key: item for key, item in data.items() if key != "__proto__"}
        return data


def _plain(value: Any) -> Any:
    # Without recursion: an Ask tool call's ``args`` may nest thousands of levels.
    return plain_json(value)


# --- scalar validators ---------------------------------------------------------------------------


def _strict_str(value: Any) -> str:
    if type(value) is not str:
        raise ValueError("expected a string")
    return value


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _as_js_int(value: Any) -> int:
    if type(value) is int:
        if -JS_INT_MAX <= value <= JS_INT_MAX:
            return value
        raise ValueError("not a safe integer")
    if type(value) is float and value.is_integer() and abs(value) <= JS_INT_MAX:
        return int(value)
    raise ValueError("expected an integer")


def int_between(lo: int, hi: int = JS_INT_MAX) -> Callable[[Any], int]:
    """A validator for a safe integer in ``lo..hi`` (``3.0`` counts; ``True`` does not)."""

    def check(value: Any) -> int:
        number = _as_js_int(value)
        if not lo <= number <= hi:
            raise ValueError("integer out of range")
        return number

    return check


def number_at_least(lo: float | None = None) -> Callable[[Any], float | int]:
    """A validator for any finite JavaScript number, optionally ``>= lo``."""

    def check(value: Any) -> float | int:
        if not _is_number(value):
            raise ValueError("expected a number")
        try:
            as_float = float(value)
        except OverflowError:
            raise ValueError("not finite") from None
        if not math.isfinite(as_float):
            raise ValueError("not finite")
        if lo is not None and as_float < lo:
            raise ValueError("number out of range")
        return value  # type: ignore[no-any-return]

    return check


def _version_one(value: Any) -> Literal[1]:
    if _is_number(value) and value == 1:
        return 1
    raise ValueError("unsupported version")


def _js_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError("expected a boolean")
    return value


def text(lo: int = 0, hi: int | None = None) -> Callable[[Any], str]:
    """A validator for a string of ``lo..hi`` UTF-16 units, kept verbatim (not trimmed)."""

    def check(value: Any) -> str:
        string = _strict_str(value)
        if lo == 0 and (hi is None or len(string) * 2 <= hi):
            return string
        size = utf16_len(string)
        if size < lo or (hi is not None and size > hi):
            raise ValueError("string length out of range")
        return string

    return check


def trimmed(lo: int, hi: int) -> Callable[[Any], str]:
    """A validator that trims with the JavaScript set, then bounds the result to ``lo..hi``."""

    def check(value: Any) -> str:
        result = js_trim(_strict_str(value))
        if len(result) * 2 <= hi and len(result) >= lo:
            return result
        size = utf16_len(result)
        if size < lo or size > hi:
            raise ValueError("string length out of range")
        return result

    return check


def _safe_href(value: Any) -> str:
    if not is_safe_href(value):
        raise ValueError("unsafe link")
    return value  # type: ignore[no-any-return]


def _timestamp(value: Any) -> str:
    if not is_timestamp(_strict_str(value)):
        raise ValueError("invalid timestamp")
    return value  # type: ignore[no-any-return]


def not_null(value: Any) -> Any:
    """Reject an explicit ``null`` for an optional field: optional means *absent*, not null."""
    if value is None:
        raise ValueError("null is not allowed")
    return value


def array(value: Any) -> Any:
    """Accept only JSON arrays (lists), or tuples from an already-validated model."""
    if type(value) is not list and type(value) is not tuple:
        raise ValueError("expected an array")
    return value


# --- carried-through JSON ------------------------------------------------------------------------


def freeze(value: Any) -> Any:
    """Deep-copy JSON into read-only containers (``MappingProxyType``, ``tuple``)."""
    if isinstance(value, dict | MappingProxyType):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Copy frozen JSON back into plain ``dict`` and ``list`` values, without recursion."""
    return plain_json(value)


_SAFE_ID: Final = re.compile(SAFE_ID_PATTERN[1:-1])
_CONTENT_HASH: Final = re.compile(CONTENT_HASH_PATTERN[1:-1])


def is_safe_id(value: object) -> bool:
    """Whether ``value`` is a safe identifier: 1..128 ASCII characters, first alphanumeric."""
    return type(value) is str and _SAFE_ID.fullmatch(value) is not None


def is_content_hash(value: object) -> bool:
    """Whether ``value`` is ``sha256:`` followed by 64 lowercase hex digits."""
    return type(value) is str and _CONTENT_HASH.fullmatch(value) is not None


def pattern(regex: str) -> Callable[[Any], str]:
    """A validator for a string matching ``regex`` as a whole (ASCII classes, true end anchor)."""
    compiled = re.compile(regex)

    def check(value: Any) -> str:
        if type(value) is not str or compiled.fullmatch(value) is None:
            raise ValueError("string does not match")
        return value

    return check


def one_of(*choices: str) -> Callable[[Any], Any]:
    """A validator accepting exactly one of ``choices`` (case-sensitive, ``str`` only)."""
    allowed = frozenset(choices)

    def check(value: Any) -> Any:
        if type(value) is not str or value not in allowed:
            raise ValueError("unexpected value")
        return value

    return check


def _safe_id(value: Any) -> str:
    if not is_safe_id(value):
        raise ValueError("invalid identifier")
    return value  # type: ignore[no-any-return]


def _content_hash(value: Any) -> str:
    if not is_content_hash(value):
        raise ValueError("invalid content hash")
    return value  # type: ignore[no-any-return]


# Every validator is strict about Python types, so ``None`` fails it: ``Annotated[X | None, V]``
# with a ``None`` default therefore means "optional: may be absent, never null".
SafeId = Annotated[str, PlainValidator(_safe_id)]
OptSafeId = Annotated[str | None, PlainValidator(_safe_id)]
ContentHash = Annotated[str, PlainValidator(_content_hash)]
SafeHref = Annotated[str, PlainValidator(_safe_href)]
Timestamp = Annotated[str, PlainValidator(_timestamp)]
OptTimestamp = Annotated[str | None, PlainValidator(_timestamp)]
VersionOne = Annotated[Literal[1], PlainValidator(_version_one)]
JsBool = Annotated[bool, PlainValidator(_js_bool)]
OptJsBool = Annotated[bool | None, PlainValidator(_js_bool)]
NonNegInt = Annotated[int, PlainValidator(int_between(0))]
JsNumber = Annotated[float, PlainValidator(number_at_least())]

#: Any JSON value carried through verbatim, held read-only, written back as plain JSON.
FrozenJson = Annotated[Any, AfterValidator(freeze), PlainSerializer(thaw)]


def build_wire_models() -> None:
    """Build every wire model and type adapter of the protocol now, as their first use would.

    For a server, before it takes requests: what a command line saves by building on first use
    is nothing to a server, and pydantic's deferred build is not safe on several threads in
    every release (2.11.0 to 2.11.4 could validate a model with its parent's validator).
    Calling it again costs a walk over the models.
    """
    protocol = importlib.import_module("agentskit_chat.protocol")
    for name in protocol.__all__:
        getattr(protocol, name)  # every module of the protocol, and so every model, defined
    pending: list[type[BaseModel]] = [WireModel]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if not model.__pydantic_complete__:
            model.model_rebuild()
    for adapter in _ADAPTERS:
        adapter.rebuild()
