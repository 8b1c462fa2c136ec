"""String rules of every envelope: JavaScript whitespace, UTF-16 lengths, key normalization."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Final

import unicodedata2

from ._unicode_case import CASE_IGNORABLE, CASED, LOWER_DELTA

__all__ = [
    "JS_WHITESPACE",
    "base36",
    "combine_surrogates",
    "js_trim",
    "normalize_knowledge_key",
    "truncate_utf16",
    "utf16_len",
]

#: The ECMAScript WhiteSpace + LineTerminator set (``String.prototype.trim``, ``/\s/u``).
#: Unlike Python's ``str.isspace``: no U+001C..U+001F, no U+0085, but U+FEFF.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_RUN: Final = re.compile("[" + re.escape(JS_WHITESPACE) + "]+")
_LOWER_TABLE: Final = dict(LOWER_DELTA)
_NEEDS_DELTA: Final = re.compile("[" + "".join(chr(cp) for cp in LOWER_DELTA) + "]")
_DIGITS36: Final = "0123456789abcdefghijklmnopqrstuvwxyz"


def js_trim(value: str) -> str:
    """``String.prototype.trim``: strip the JavaScript whitespace set from both ends."""
    return value.strip(JS_WHITESPACE)


def base36(number: int) -> str:
    """``number.toString(36)`` for a positive integer (lower case); ``"0"`` for anything less:
    how generated ids write a counter or a clock."""
    if number <= 0:
        return "0"
    digits: list[str] = []
    while number:
        number, rest = divmod(number, 36)
        digits.append(_DIGITS36[rest])
    return "".join(reversed(digits))


def utf16_len(value: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``.length`` counts it."""
    if value.isascii():
        return len(value)
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def truncate_utf16(value: str, units: int) -> str:
    """The first ``units`` UTF-16 code units; may leave a lone high surrogate, as ``slice`` does."""
    if len(value) <= units // 2 or (value.isascii() and len(value) <= units):
        return value
    encoded = value.encode("utf-16-le", "surrogatepass")
    if len(encoded) <= units * 2:
        return value
    return encoded[: units * 2].decode("utf-16-le", "surrogatepass")


def combine_surrogates(value: str) -> str:
    """Join a high and a low surrogate held as two code points into one character.

    JavaScript strings are UTF-16, so such a pair *is* the astral character there.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")  # fails exactly when the string holds a surrogate code point
    except UnicodeEncodeError:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return value


_CAPITAL_SIGMA: Final = "\u03a3"
_CASED_STARTS: Final = tuple(first for first, _ in CASED)
_IGNORABLE_STARTS: Final = tuple(first for first, _ in CASE_IGNORABLE)


def _in_table(starts: tuple[int, ...], table: tuple[tuple[int, int], ...], char: str) -> bool:
    i = bisect_right(starts, ord(char)) - 1
    return i >= 0 and ord(char) <= table[i][1]


def _is_cased(char: str) -> bool:
    return _in_table(_CASED_STARTS, CASED, char)


def _is_case_ignorable(char: str) -> bool:
    return _in_table(_IGNORABLE_STARTS, CASE_IGNORABLE, char)


def _is_final_sigma(text: str, index: int) -> bool:
    """The Final_Sigma condition for the capital sigma at ``index``, with Unicode 17 properties.

    Python's own ``str.lower()`` applies the same condition with Unicode 14 properties, so
    characters whose Cased or Case_Ignorable property changed since (U+0295 stopped being a
    lower-case letter; U+1C8A and U+A7CD became ones) would get the other sigma. Like ICU, a
    character that is both case-ignorable and cased is skipped as ignorable.
    """
    before = index - 1
    while before >= 0 and _is_case_ignorable(text[before]):
        before -= 1
    if before < 0 or not _is_cased(text[before]):
        return False
    after = index + 1
    while after < len(text) and _is_case_ignorable(text[after]):
        after += 1
    return after == len(text) or not _is_cased(text[after])


def _lower_context_free(value: str) -> str:
    lowered = value.lower()
    if _NEEDS_DELTA.search(lowered) is not None:
        lowered = lowered.translate(_LOWER_TABLE)
    return lowered


def _js_lower(value: str) -> str:
    """``toLocaleLowerCase("en-US")``: the full default lower-case mapping of Unicode 17."""
    if _CAPITAL_SIGMA not in value:
        return _lower_context_free(value)
    # Every mapping but the capital sigma's is context-free, so the text between sigmas is
    # lowered on its own and each sigma is decided from the whole (unlowered) text.
    pieces = value.split(_CAPITAL_SIGMA)
    out = [_lower_context_free(pieces[0])]
    index = len(pieces[0])
    for piece in pieces[1:]:
        out.append("\u03c2" if _is_final_sigma(value, index) else "\u03c3")
        out.append(_lower_context_free(piece))
        index += 1 + len(piece)
    return "".join(out)


def _collapse_spaces(value: str) -> str:
    return " ".join(part for part in value.split(" ") if part).lower()


def normalize_knowledge_key(value: str) -> str:
    """Normalize a question or alias to its exact-match key.

    Applies, in order: Unicode NFKC (Unicode 17 tables), JavaScript trim, collapse of every
    JavaScript-whitespace run to one space, and ``toLocaleLowerCase("en-US")`` (full lower-case
    mapping with Final_Sigma; not case folding, so ``ß`` stays ``ß``).

    >>> normalize_knowledge_key("  ＩＮＳＴＡＬＬ\\n CLI  ")
    'install cli'
    """
    if value.isascii():
        if value.isprintable():
            # Printable ASCII has one whitespace character, the space.
            if "  " in value:
                return _collapse_spaces(value)
            return value.strip(" ").lower()
        return _WS_RUN.sub(" ", value).strip(" ").lower()
    text = unicodedata2.normalize("NFKC", combine_surrogates(value))
    return _js_lower(_WS_RUN.sub(" ", text).strip(" "))
