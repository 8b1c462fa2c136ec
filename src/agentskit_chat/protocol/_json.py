"""JSON text with JavaScript semantics: ``JSON.parse`` and compact ``JSON.stringify``.

The reference runs on JavaScript, so "valid JSON", number values and output bytes follow
ECMAScript, not Python's ``json`` module (see ``protocol-deterministic.md`` §0.6 and §0.7).

Parsing tries orjson first: everything orjson accepts, JavaScript accepts with the same value
(checked for BOMs, constants, leading zeros, control characters, duplicate keys). What orjson
refuses but JavaScript accepts (lone-surrogate escapes, numbers that overflow to infinity, nesting
deeper than 1024) goes to a small iterative parser with no depth limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from json import decoder as _stdlib_decoder
from json.encoder import encode_basestring
from typing import Any, Final

import orjson

__all__ = [
    "JsonSyntaxError",
    "js_number",
    "js_stringify",
    "parse_json_text",
    "utf8_len",
]

MAX_SAFE_INTEGER: Final = 9007199254740991


# The C string scanner of the standard library: JSON string escapes exactly as JSON.parse reads
# them, lone surrogates included.
scanstring: Callable[[str, int, bool], tuple[str, int]] = _stdlib_decoder.scanstring  # type: ignore[attr-defined]


class JsonSyntaxError(ValueError):
    """The text is not valid JSON under ``JSON.parse`` rules. Carries no input data."""


# --- parsing -------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_ARRAY = 0
_OBJECT = 1


def parse_json_text(text: str) -> Any:
    """Parse ``text`` as ``JSON.parse`` would.

    Numbers become ``int`` when they are integral literals within the safe-integer range and
    ``float`` otherwise (so ``1e400`` is ``inf``, as in JavaScript). Lone-surrogate escapes stay
    in the string. Nesting depth is unlimited.

    Raises:
        JsonSyntaxError: when JavaScript would raise a ``SyntaxError``.
    """
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError, UnicodeError):
        pass
    try:
        return _parse_slow(text)
    except JsonSyntaxError:
        raise
    except (ValueError, IndexError, UnicodeError) as exc:  # pragma: no cover - defensive
        raise JsonSyntaxError("invalid JSON") from exc


def _number(text: str, start: int) -> tuple[Any, int]:
    m = _NUMBER.match(text, start)
    if m is None:
        raise JsonSyntaxError("invalid JSON")
    literal = m.group(0)
    # Same shapes as orjson: integral literals are ints, the rest floats (``1e400`` is inf).
    if m.group(1) is None and m.group(2) is None and len(literal) <= 20:
        return int(literal), m.end()
    return float(literal), m.end()


def _scalar(text: str, pos: int) -> tuple[Any, int]:
    ch = text[pos : pos + 1]
    if ch == '"':
        try:
            return scanstring(text, pos + 1, True)
        except ValueError as exc:
            raise JsonSyntaxError("invalid JSON") from exc
    if ch == "t" and text.startswith("true", pos):
        return True, pos + 4
    if ch == "f" and text.startswith("false", pos):
        return False, pos + 5
    if ch == "n" and text.startswith("null", pos):
        return None, pos + 4
    return _number(text, pos)


def _parse_slow(text: str) -> Any:
    """An iterative recursive-descent parser: no recursion, so no depth limit."""
    stack: list[tuple[int, Any, Any]] = []
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    end = len(text)
    while True:
        # Parse one value starting at pos, pushing containers.
        if pos >= end:
            raise JsonSyntaxError("invalid JSON")
        ch = text[pos]
        value: Any
        if ch == "[":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "]":
                value, pos = [], pos + 1
            else:
                stack.append((_ARRAY, [], None))
                continue
        elif ch == "{":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "}":
                value, pos = {}, pos + 1
            else:
                key, pos = _key(text, pos)
                stack.append((_OBJECT, {}, key))
                continue
        else:
            value, pos = _scalar(text, pos)
        # Attach the finished value to its containers, closing as many as end here.
        while True:
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if not stack:
                if pos != end:
                    raise JsonSyntaxError("invalid JSON")
                return value
            kind, container, key = stack[-1]
            sep = text[pos : pos + 1]
            if kind == _ARRAY:
                container.append(value)
                if sep == ",":
                    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                    break
                if sep != "]":
                    raise JsonSyntaxError("invalid JSON")
            else:
                container[key] = value
                if sep == ",":
                    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                    next_key, pos = _key(text, pos)
                    stack[-1] = (kind, container, next_key)
                    break
                if sep != "}":
                    raise JsonSyntaxError("invalid JSON")
            stack.pop()
            value, pos = container, pos + 1


def _key(text: str, pos: int) -> tuple[str, int]:
    if text[pos : pos + 1] != '"':
        raise JsonSyntaxError("invalid JSON")
    try:
        key, pos = scanstring(text, pos + 1, True)
    except ValueError as exc:
        raise JsonSyntaxError("invalid JSON") from exc
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != ":":
        raise JsonSyntaxError("invalid JSON")
    return key, _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


# --- serializing ---------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")


def _escape_surrogate(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def js_number(value: float) -> str:
    """Format a finite number as ECMAScript ``Number::toString`` does.

    >>> js_number(1.0), js_number(1e21), js_number(1e-7), js_number(0.000001)
    ('1', '1e+21', '1e-7', '0.000001')
    """
    if isinstance(value, int) and abs(value) <= MAX_SAFE_INTEGER:
        return str(value)
    try:
        x = float(value)
    except OverflowError:  # an integer beyond the double range is Infinity in JavaScript
        return "null"
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) <= MAX_SAFE_INTEGER:
        return str(int(x))
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # n: the position of the decimal point relative to the start of the digits.
    n = len(int_part) + (int(exp) if exp else 0)
    if int_part == "0":
        stripped = frac_part.lstrip("0")
        n = (int(exp) if exp else 0) - (len(frac_part) - len(stripped))
        digits = stripped
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp_text = f"e+{e}" if e >= 0 else f"e-{-e}"
    if k == 1:
        return sign + digits + exp_text
    return sign + digits[0] + "." + digits[1:] + exp_text


def _ordered_items(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """JavaScript property order: canonical array-index keys ascending, then insertion order."""
    items = list(obj.items())
    index_keys = [
        (int(k), k, v)
        for k, v in items
        if _INDEX_KEY.fullmatch(k) is not None and int(k) <= 4294967294
    ]
    if not index_keys:
        return items
    index_keys.sort(key=lambda t: t[0])
    seen = {k for _, k, _ in index_keys}
    return [(k, v) for _, k, v in index_keys] + [(k, v) for k, v in items if k not in seen]


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(encode_basestring(value))
    elif isinstance(value, int | float):
        out.append(js_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        first = True
        for key, item in _ordered_items(value):
            if not first:
                out.append(",")
            first = False
            out.append(encode_basestring(key))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")


def js_stringify(value: Any) -> str:
    """Serialize ``value`` exactly as compact ``JSON.stringify`` does.

    Dicts are written in JavaScript property order, numbers in ECMAScript format, and lone
    surrogates as lowercase ``\\udxxx`` escapes; everything else non-ASCII is written raw.

    Raises:
        TypeError: when ``value`` holds something that is not JSON.
    """
    out: list[str] = []
    _write(value, out)
    text = "".join(out)
    if not text.isascii() and _SURROGATE.search(text) is not None:
        # A high and a low surrogate held as two code points are one character in JavaScript.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text


def utf8_len(text: str) -> int:
    """UTF-8 length as a WHATWG ``TextEncoder`` measures it (a lone surrogate counts 3)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
