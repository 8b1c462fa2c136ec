"""Plumbing shared by every decoder: untrusted input in, a candidate value or a failure out."""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel, TypeAdapter

from ._json import JsonSyntaxError, JsonTooDeepError, parse_json_text
from ._text import combine_surrogates

__all__ = ["NOT_JSON", "TOO_DEEP", "as_text", "is_object", "parse_candidate", "validate_model"]

M = TypeVar("M", bound=BaseModel)


class _NotJson:
    """Sentinel for JSON text that does not parse."""

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final = _NotJson()


class _TooDeep:
    """Sentinel for JSON text nested too deeply to parse: no schema accepts it."""

    def __repr__(self) -> str:
        return "TOO_DEEP"


#: What :func:`parse_candidate` gives for text nested deeper than ``MAX_JSON_DEPTH``. Every
#: envelope it can be is shallow, so a decoder reports it with its "invalid" diagnostic: the
#: reference's verdict on such text whenever it is well-formed.
TOO_DEEP: Final = _TooDeep()


def as_text(payload: bytes | bytearray | memoryview | str) -> str:
    """Text of a payload given as a string or as bytes.

    Bytes are decoded as a WHATWG UTF-8 decoder does: invalid sequences become U+FFFD and one
    leading byte-order mark is removed. Surrogate pairs held as two code points are joined.
    """
    if isinstance(payload, str):
        return combine_surrogates(payload)
    text = bytes(payload).decode("utf-8", "replace")
    return text[1:] if text.startswith("\ufeff") else text


def parse_candidate(text: str) -> Any:
    """Parse JSON text with ``JSON.parse`` rules; :data:`NOT_JSON` when it does not parse.

    Text nested deeper than ``MAX_JSON_DEPTH`` gives :data:`TOO_DEEP`, which fails every
    schema, so the decoder's "invalid" diagnostic reports it.
    """
    try:
        return parse_json_text(text)
    except JsonTooDeepError:
        return TOO_DEEP
    except JsonSyntaxError:
        return NOT_JSON
    except (RecursionError, MemoryError):  # pragma: no cover - the parser is iterative
        return NOT_JSON


def is_object(value: Any) -> bool:
    """A JSON object (a ``dict``), as opposed to an array, a scalar or null."""
    return isinstance(value, dict)


def validate_model(model: type[M] | TypeAdapter[M], candidate: Any) -> M | None:
    """Validate ``candidate`` by wire aliases only; ``None`` on any failure, never an exception.

    Hostile programmatic input (cycles, objects whose accessors raise) is a failure too.
    """
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(candidate, by_alias=True, by_name=False)
        return model.model_validate(candidate, by_alias=True, by_name=False)
    except Exception:
        return None
