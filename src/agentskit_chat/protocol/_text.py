"""String rules of every envelope: JavaScript whitespace, UTF-16 lengths, key normalization."""

from __future__ import annotations

import re
from typing import Final

import unicodedata2

from ._unicode_case import LOWER_DELTA

__all__ = [
    "JS_WHITESPACE",
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


def js_trim(value: str) -> str:
    """``String.prototype.trim``: strip the JavaScript whitespace set from both ends."""
    return value.strip(JS_WHITESPACE)


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


def _js_lower(value: str) -> str:
    lowered = value.lower()
    if _NEEDS_DELTA.search(lowered) is not None:
        lowered = lowered.translate(_LOWER_TABLE)
    return lowered


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
