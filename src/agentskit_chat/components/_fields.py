"""The field types every standard component's props share, and the props base model.

Each type validates with JavaScript semantics (a ``bool`` is never a number, a number is never
a string, lengths are UTF-16 code units) and carries its own JSON Schema, so a props model's
schema describes exactly what it accepts and can be handed to a tool-calling model as is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final

from pydantic import ConfigDict, PlainSerializer, PlainValidator, WithJsonSchema, model_validator

from agentskit_chat.protocol import is_bounded_json, is_safe_href
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.protocol._types import (
    JS_INT_MAX,
    SAFE_ID_PATTERN,
    WireModel,
    freeze,
    int_between,
    is_safe_id,
    text,
    thaw,
)

__all__ = [
    "ID_SCHEMA",
    "LABEL_SCHEMA",
    "MAX_PORTABLE_URL_UNITS",
    "PORTABLE_URL_PATTERN",
    "TEXT_SCHEMA",
    "URL_SCHEMA",
    "AnyJson",
    "Id",
    "JsonRecord",
    "Label",
    "OptBool",
    "OptJsonRecord",
    "OptLabel",
    "OptPortableUrl",
    "OptText",
    "PortableUrl",
    "StandardProps",
    "Text",
    "is_portable_url",
    "number_between",
    "safe_integer",
    "table_row",
    "unique_by",
]

#: The longest portable URL, in UTF-16 code units.
MAX_PORTABLE_URL_UNITS: Final = 2048
_MAX_RECORD_KEY_UNITS: Final = 128
_MAX_CELL_UNITS: Final = 4096
_UNSAFE_URL_CHAR: Final = re.compile(r"[\x00-\x1f\x7f\\]")
_URL_CHAR: Final = r"[^\\\u0000-\u001f\u007f]"
_FIRST_PATH_CHAR: Final = r"[^/\\\u0000-\u001f\u007f]"
#: A necessary condition for a portable URL, as an ECMA-262 pattern without look-ahead (which
#: some tool-calling providers refuse): a root-relative path, or text after an ``http:`` or
#: ``https:`` scheme. The URL parser has the last word on absolute URLs.
PORTABLE_URL_PATTERN: Final = (
    rf"^(?:/(?:{_FIRST_PATH_CHAR}{_URL_CHAR}*)?|[Hh][Tt][Tt][Pp][Ss]?:{_URL_CHAR}*)$"
)

#: The schema of a safe identifier.
ID_SCHEMA: Final[dict[str, Any]] = {"type": "string", "pattern": SAFE_ID_PATTERN}
#: The schema of a 1..4,096-unit text.
TEXT_SCHEMA: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 4096}
#: The schema of a 1..256-unit label.
LABEL_SCHEMA: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 256}
#: The schema of a portable URL.
URL_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_PORTABLE_URL_UNITS,
    "pattern": PORTABLE_URL_PATTERN,
}
_RECORD_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "propertyNames": {"maxLength": _MAX_RECORD_KEY_UNITS},
}


def is_portable_url(value: object) -> bool:
    """Whether ``value`` is a portable URL.

    At most 2,048 UTF-16 units, no control character (U+0000..U+001F, U+007F) and no
    backslash anywhere, and either root-relative (``/docs``, never ``//host``) or an absolute
    ``http``/``https`` URL, by the WHATWG URL parser, without a username or password.

    >>> is_portable_url("/docs"), is_portable_url("//evil.example")
    (True, False)
    """
    if type(value) is not str or not value:
        return False
    if utf16_len(value) > MAX_PORTABLE_URL_UNITS or _UNSAFE_URL_CHAR.search(value):
        return False
    if value.startswith("/"):
        return not value.startswith("//")
    # What is left is the safe-link rule's absolute branch: the text must start with a scheme
    # (text that the URL parser accepts only after stripping leading spaces is not an absolute
    # URL as written) and parse as http(s) without credentials.
    return is_safe_href(value)


def _portable_url(value: Any) -> str:
    if not is_portable_url(value):
        raise ValueError("not a portable URL")
    return value  # type: ignore[no-any-return]


def _id(value: Any) -> str:
    if not is_safe_id(value):
        raise ValueError("invalid identifier")
    return value  # type: ignore[no-any-return]


def _json_record(value: Any) -> Mapping[str, Any]:
    if type(value) is not dict and type(value) is not MappingProxyType:
        raise ValueError("expected an object")
    for key in value:
        if type(key) is not str or utf16_len(key) > _MAX_RECORD_KEY_UNITS:
            raise ValueError("record key too long")
    if not is_bounded_json(value):
        raise ValueError("not bounded JSON")
    return freeze(value)  # type: ignore[no-any-return]


def _any_json(value: Any) -> Any:
    if not is_bounded_json(value):
        raise ValueError("not bounded JSON")
    return freeze(value)


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError("expected a boolean")
    return value


def _finite(value: Any) -> float | None:
    if type(value) is not int and type(value) is not float:
        return None
    try:
        as_float = float(value)
    except OverflowError:  # an integer beyond the double range is Infinity in JavaScript
        return None
    return as_float if math.isfinite(as_float) else None


def number_between(lo: float, hi: float) -> Callable[[Any], float]:
    """A validator for a finite number within ``lo..hi`` (``True`` and ``"1"`` are not numbers)."""

    def check(value: Any) -> float:
        as_float = _finite(value)
        if as_float is None or not lo <= as_float <= hi:
            raise ValueError("number out of range")
        return value  # type: ignore[no-any-return]

    return check


def safe_integer(lo: int, hi: int = JS_INT_MAX) -> Callable[[Any], int]:
    """A validator for an integer within ``lo..hi``: ``5.0`` counts as 5, ``True`` does not."""
    return int_between(lo, hi)


def unique_by(name: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A validator that the items' attribute ``name`` never repeats within the array."""

    def check(values: tuple[Any, ...]) -> tuple[Any, ...]:
        seen = [getattr(item, name) for item in values]
        if len(set(seen)) != len(seen):
            raise ValueError("ids are not unique")
        return values

    return check


def _table_cell(value: Any) -> None:
    if value is None or type(value) is bool:
        return
    if type(value) is str:
        if utf16_len(value) > _MAX_CELL_UNITS:
            raise ValueError("cell too long")
        return
    if _finite(value) is None:
        raise ValueError("invalid cell")


def table_row(value: Any) -> Mapping[str, Any]:
    """A validator for a table row: string keys, cells that are short strings, numbers, bools or
    null. Row keys are not checked against the columns."""
    if type(value) is not dict and type(value) is not MappingProxyType:
        raise ValueError("expected an object")
    for key, cell in value.items():
        if type(key) is not str:
            raise ValueError("expected string keys")
        _table_cell(cell)
    return MappingProxyType(dict(value))


#: A safe identifier: 1..128 of ``A-Z a-z 0-9 . _ : -``, the first alphanumeric.
Id = Annotated[str, PlainValidator(_id), WithJsonSchema(ID_SCHEMA)]
#: A string of 1..4,096 UTF-16 units, not trimmed.
Text = Annotated[str, PlainValidator(text(1, 4096)), WithJsonSchema(TEXT_SCHEMA)]
#: A string of 1..256 UTF-16 units, not trimmed.
Label = Annotated[str, PlainValidator(text(1, 256)), WithJsonSchema(LABEL_SCHEMA)]
#: See :func:`is_portable_url`.
PortableUrl = Annotated[str, PlainValidator(_portable_url), WithJsonSchema(URL_SCHEMA)]
#: An object with keys of at most 128 UTF-16 units and bounded JSON values, held read-only.
JsonRecord = Annotated[
    Mapping[str, Any],
    PlainValidator(_json_record),
    PlainSerializer(thaw),
    WithJsonSchema(_RECORD_SCHEMA),
]
#: Any bounded JSON value, ``null`` included, held read-only.
AnyJson = Annotated[Any, PlainValidator(_any_json), PlainSerializer(thaw), WithJsonSchema({})]

# Optional fields: absent is ``None`` in Python, and an explicit JSON ``null`` is invalid, since
# every validator here rejects ``None`` and defaults are never validated.
OptText = Annotated[str | None, PlainValidator(text(1, 4096)), WithJsonSchema(TEXT_SCHEMA)]
OptLabel = Annotated[str | None, PlainValidator(text(1, 256)), WithJsonSchema(LABEL_SCHEMA)]
OptPortableUrl = Annotated[str | None, PlainValidator(_portable_url), WithJsonSchema(URL_SCHEMA)]
OptBool = Annotated[bool | None, PlainValidator(_bool), WithJsonSchema({"type": "boolean"})]
OptJsonRecord = Annotated[
    Mapping[str, Any] | None,
    PlainValidator(_json_record),
    PlainSerializer(thaw),
    WithJsonSchema(_RECORD_SCHEMA),
]


def _drop_property_noise(schema: dict[str, Any]) -> None:
    # Titles only repeat the names, and a ``null`` default would tell a model null is allowed.
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        prop.pop("default", None)


class StandardProps(WireModel):
    """Base of the standard components' props: frozen, strict, camelCase on the wire.

    Unknown keys are refused, wire data validates by its camelCase names only, and no value is
    coerced (``"1"`` is not a number, ``true`` is not a number).
    """

    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=False,
        validate_by_alias=True,
        json_schema_extra=_drop_property_noise,
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_object(cls, data: Any) -> Any:
        # Frames hold their props frozen; anything that is not a JSON object is refused here,
        # before pydantic would read attributes or mappings of other kinds.
        if isinstance(data, cls) or type(data) is dict:
            return data
        if type(data) is MappingProxyType:
            return dict(data)
        raise ValueError("expected an object")
