"""JSON text with JavaScript semantics: ``JSON.parse`` and compact ``JSON.stringify``.

The reference runs on JavaScript, so "valid JSON", number values and output bytes follow
ECMAScript, not Python's ``json`` module.

Parsing tries orjson first: everything orjson accepts, JavaScript accepts with the same value
(checked for BOMs, constants, leading zeros, control characters, duplicate keys). What orjson
refuses but JavaScript accepts (lone-surrogate escapes, numbers that overflow to infinity, nesting
deeper than 1024) takes the fallback: a linear scan first refuses text nested deeper than
:data:`MAX_JSON_DEPTH`, then shallow text goes to the standard library's C scanner and deep text
to a small iterative parser.

Both directions share the one nesting bound, :data:`MAX_JSON_DEPTH`: whatever parses can be
serialized again, and :func:`js_stringify` refuses exactly what would not parse.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from itertools import accumulate
from json import JSONDecoder
from json import decoder as _stdlib_decoder
from json.encoder import encode_basestring
from typing import Any, Final

import orjson

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonSyntaxError",
    "JsonTooDeepError",
    "js_number",
    "js_stringify",
    "nests_deeper_than",
    "parse_json_text",
    "plain_json",
    "utf8_len",
]

MAX_SAFE_INTEGER: Final = 9007199254740991
#: The deepest nesting (arrays and objects open at once; ``[]`` is 1) that JSON text may have
#: to parse, and that a value may have to be serialized. JavaScript's ``JSON.parse`` has no
#: bound, but every envelope but an Ask tool call's ``args`` is shallow, and a bound keeps a
#: hostile line from costing seconds of CPU: 10000 covers anything a 16 KiB site config can
#: hold (8192 levels) and the 2000-level ``args`` the reference re-serializes.
MAX_JSON_DEPTH: Final = 10000


# The C string scanner of the standard library: JSON string escapes exactly as JSON.parse reads
# them, lone surrogates included.
scanstring: Callable[[str, int, bool], tuple[str, int]] = _stdlib_decoder.scanstring  # type: ignore[attr-defined]


class JsonSyntaxError(ValueError):
    """The text is not valid JSON under ``JSON.parse`` rules. Carries no input data."""


class JsonTooDeepError(JsonSyntaxError):
    """The text nests deeper than :data:`MAX_JSON_DEPTH`, and was refused unparsed."""


# --- parsing -------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_OPEN_SIMPLE_KEY = re.compile(r'\{[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
_WS_CHARS: Final = frozenset(" \t\n\r")
_ARRAY = 0
_OBJECT = 1


# Openers become 1 and closers -1 once read as signed bytes; every other byte is deleted.
_BRACKET_STEPS: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_STEP_CHUNK: Final = 4096
# The standard library's C scanner recurses once per level; below this depth that is safe
# whatever the caller's own stack depth.
_C_SCANNER_DEPTH: Final = 200


def _brackets(text: str) -> bytes:
    """The brackets of ``text`` outside strings, in order (ASCII bytes).

    Only C-speed string operations, each one pass: escaped backslashes are paired off from the
    left (as a string's escapes pair them), then escaped quotes removed, so every quote left
    opens or closes a string and every other segment between quotes is outside strings.
    """
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    if '"' in text:
        text = "".join(text.split('"')[::2])
    return text.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)


def _balanced(brackets: bytes) -> bool:
    # As many closers as openers of each kind: what well-formed text has (a cheap necessary test).
    arrays = brackets.count(b"[") == brackets.count(b"]")
    return arrays and brackets.count(b"{") == brackets.count(b"}")


def _nests_deeper_than(steps: bytes, limit: int) -> bool:
    # A chunk can only pass the limit if the depth at its start plus its openers does, so most
    # chunks are skipped on two counts; the rest are summed in C.
    if steps.count(1) <= limit:
        return False
    depth = 0
    for start in range(0, len(steps), _STEP_CHUNK):
        chunk = steps[start : start + _STEP_CHUNK]
        opening = chunk.count(1)
        if (
            depth + opening > limit
            and max(accumulate(memoryview(chunk).cast("b"), initial=depth)) > limit
        ):
            return True
        depth += 2 * opening - len(chunk)
    return False


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests more than ``limit`` arrays and objects, in linear time.

    Brackets inside strings do not count. Exact for valid JSON. For invalid text the answer
    may be either, but never below the depth a parser reaches before it finds the error, so
    the text still fails to parse, at no more than that cost.
    """
    return _nests_deeper_than(_brackets(text).translate(_BRACKET_STEPS), limit)


def _raise_constant(name: str) -> Any:
    # NaN, Infinity and -Infinity are not JSON.
    raise JsonSyntaxError("invalid JSON")


def _int_literal(literal: str) -> Any:
    # Same shapes as orjson: integral literals are ints, up to 20 characters; longer ones are
    # floats (the ``int`` of a huge literal is refused by Python, and is a double in JavaScript).
    return int(literal) if len(literal) <= 20 else float(literal)


def parse_json_text(text: str) -> Any:
    """Parse ``text`` as ``JSON.parse`` would, up to :data:`MAX_JSON_DEPTH` levels of nesting.

    Numbers become ``int`` when they are integral literals within the safe-integer range and
    ``float`` otherwise (so ``1e400`` is ``inf``, as in JavaScript). Lone-surrogate escapes stay
    in the string. Text nested deeper than :data:`MAX_JSON_DEPTH` is refused before any of it
    is parsed, in time linear in its length.

    Raises:
        JsonSyntaxError: when JavaScript would raise a ``SyntaxError``.
        JsonTooDeepError: when the text nests deeper than :data:`MAX_JSON_DEPTH` (and its
            brackets balance, so it may well be valid).
    """
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError, UnicodeError):
        pass
    brackets = _brackets(text)
    steps = brackets.translate(_BRACKET_STEPS)
    if _nests_deeper_than(steps, MAX_JSON_DEPTH):
        if not _balanced(brackets):
            raise JsonSyntaxError("invalid JSON")
        raise JsonTooDeepError("nested too deeply")
    if not _nests_deeper_than(steps, _C_SCANNER_DEPTH):
        try:
            return _c_decoder().decode(text)
        except JsonSyntaxError:
            raise
        except RecursionError:  # pragma: no cover - a caller already near the limit
            pass
        except ValueError as exc:
            raise JsonSyntaxError("invalid JSON") from exc
    try:
        return _parse_slow(text, max(accumulate(memoryview(steps).cast("b"))))
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


def _c_decoder() -> JSONDecoder:
    # A decoder per parse: its scanner's key memo is not meant to be shared by threads.
    return JSONDecoder(parse_int=_int_literal, parse_constant=_raise_constant)


def _parse_slow(text: str, depth: int | None = None) -> Any:
    """An iterative recursive-descent parser: no recursion, so no depth limit.

    ``depth`` is the text's nesting depth (counted when not given). Once so few levels can
    remain below the current one that the C scanner's recursion is safe, each value is handed
    to it whole: only the levels above are parsed here, in Python.
    """
    if depth is None:
        steps = _brackets(text).translate(_BRACKET_STEPS)
        depth = max(accumulate(memoryview(steps).cast("b")), default=0)
    delegate_from = depth - _C_SCANNER_DEPTH
    # The decoder's scanner (typeshed does not declare the attribute): (text, pos) -> (value, end).
    scan_once: Callable[[str, int], tuple[Any, int]] = _c_decoder().scan_once  # type: ignore[attr-defined]
    stack: list[tuple[int, Any, Any]] = []
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    end = len(text)
    while True:
        # Parse one value starting at pos, pushing containers.
        if pos >= end:
            raise JsonSyntaxError("invalid JSON")
        ch = text[pos]
        value: Any
        if len(stack) >= delegate_from and ch in "[{":
            try:
                value, pos = scan_once(text, pos)
            except StopIteration as exc:
                raise JsonSyntaxError("invalid JSON") from exc
            except JsonSyntaxError:
                raise
            except ValueError as exc:
                raise JsonSyntaxError("invalid JSON") from exc
        elif ch == "[":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "]":
                value, pos = [], pos + 1
            else:
                stack.append((_ARRAY, [], None))
                continue
        elif ch == "{":
            # The common opening, ``{"key":`` with a key free of escapes, in one match.
            opening = _OPEN_SIMPLE_KEY.match(text, pos)
            if opening is not None:
                stack.append((_OBJECT, {}, opening.group(1)))
                pos = opening.end()
                continue
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
            if text[pos : pos + 1] in _WS_CHARS:  # a character test is cheaper than a match
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


def _write_scalar(value: Any, out: list[str]) -> None:
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
    else:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")


_END: Final[Any] = object()
# Values nested at most this deep (nearly all) are written by plain recursion, which is about a
# third cheaper than the explicit stack; deeper ones start over on the stack.
_RECURSIVE_DEPTH: Final = 64


class _TooDeepToRecurse(Exception):
    """The value nests deeper than the recursive writer goes."""


def _write_shallow(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif isinstance(value, Mapping):
        if depth == _RECURSIVE_DEPTH:
            raise _TooDeepToRecurse
        out.append("{")
        first = True
        for key, item in _ordered_items(value):
            if not first:
                out.append(",")
            first = False
            out.append(encode_basestring(key))
            out.append(":")
            _write_shallow(item, out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        if depth == _RECURSIVE_DEPTH:
            raise _TooDeepToRecurse
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write_shallow(item, out, depth + 1)
        out.append("]")
    else:
        _write_scalar(value, out)


def _write(root: Any, out: list[str]) -> None:
    """Write ``root``; nesting beyond :data:`MAX_JSON_DEPTH` is refused."""
    mark = len(out)
    try:
        _write_shallow(root, out, 0)
        return
    except _TooDeepToRecurse:
        del out[mark:]
    _write_deep(root, out)


def _write_deep(root: Any, out: list[str]) -> None:
    """Write ``root`` without recursion; nesting beyond :data:`MAX_JSON_DEPTH` is refused."""
    # Frames: [item iterator, is an object, items written so far]
    stack: list[list[Any]] = []
    value = root
    while True:
        if isinstance(value, Mapping):
            out.append("{")
            stack.append([iter(_ordered_items(value)), True, 0])
        elif isinstance(value, list | tuple):
            out.append("[")
            stack.append([iter(value), False, 0])
        else:
            _write_scalar(value, out)
        if len(stack) > MAX_JSON_DEPTH:
            raise ValueError("nested too deeply to serialize")
        while stack:
            frame = stack[-1]
            item = next(frame[0], _END)
            if item is _END:
                out.append("}" if frame[1] else "]")
                stack.pop()
                continue
            if frame[2]:
                out.append(",")
            frame[2] += 1
            if frame[1]:
                key: str
                key, value = item
                out.append(encode_basestring(key))
                out.append(":")
            else:
                value = item
            break
        else:
            return


def plain_json(root: Any) -> Any:
    """A copy of JSON data with every mapping a ``dict`` and every array a ``list``.

    Iterative, so as deep as :data:`MAX_JSON_DEPTH`; deeper (or cyclic) data is refused.

    Raises:
        ValueError: when ``root`` nests deeper than :data:`MAX_JSON_DEPTH`.
    """
    if isinstance(root, Mapping):
        top: Any = {}
        items: Iterator[Any] = iter(root.items())
    elif isinstance(root, tuple | list):
        top, items = [], iter(root)
    else:
        return root
    # Frames: (item iterator, target container)
    stack: list[tuple[Iterator[Any], Any]] = [(items, top)]
    while stack:
        items, target = stack[-1]
        for item in items:
            if type(target) is dict:
                key, child = item
            else:
                key, child = None, item
            if isinstance(child, Mapping):
                copy: Any = {}
                nested: Iterator[Any] = iter(child.items())
            elif isinstance(child, tuple | list):
                copy, nested = [], iter(child)
            else:
                copy = None
            if copy is None:
                if key is None:
                    target.append(child)
                else:
                    target[key] = child
                continue
            if key is None:
                target.append(copy)
            else:
                target[key] = copy
            if len(stack) >= MAX_JSON_DEPTH:
                raise ValueError("nested too deeply")
            stack.append((nested, copy))
            break
        else:
            stack.pop()
    return top


def js_stringify(value: Any) -> str:
    """Serialize ``value`` exactly as compact ``JSON.stringify`` does.

    Dicts are written in JavaScript property order, numbers in ECMAScript format, and lone
    surrogates as lowercase ``\\udxxx`` escapes; everything else non-ASCII is written raw.

    Raises:
        TypeError: when ``value`` holds something that is not JSON.
        ValueError: when ``value`` nests deeper than :data:`MAX_JSON_DEPTH` (or is cyclic).
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
