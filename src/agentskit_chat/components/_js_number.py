"""JavaScript's string-to-number conversion (``Number(text)``), exactly.

Python's ``float`` is the wrong tool for it: it accepts ``1_000``, ``nan``, ``inf`` and
non-ASCII digits, and rejects ``0x10`` and the empty string, all of which JavaScript reads
differently.
"""

from __future__ import annotations

import math
import re
from typing import Final

from agentskit_chat.protocol._text import js_trim

__all__ = ["js_to_number"]

_DECIMAL: Final = re.compile(
    r"[+-]?(?:Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
_NON_DECIMAL: Final = re.compile(r"0(?:[xX]([0-9a-fA-F]+)|[oO]([0-7]+)|[bB]([01]+))")
_BASES: Final = (16, 8, 2)


def js_to_number(value: str) -> float | None:
    """The number JavaScript's ``Number(value)`` gives for a string, or ``None`` for ``NaN``.

    Surrounding JavaScript whitespace is ignored and blank text is 0. Accepted: decimals with
    an optional sign, fraction and exponent (``-1.5e3``, ``.5``, ``5.``), ``Infinity`` with an
    optional sign, and unsigned ``0x``/``0o``/``0b`` integers. Numeric separators (``1_000``),
    other spellings of infinity and non-ASCII digits are ``NaN``. Values beyond the double range
    are infinite, as in JavaScript.

    >>> js_to_number(" 0x10 "), js_to_number("1e3"), js_to_number("1_000")
    (16.0, 1000.0, None)
    """
    text = js_trim(value)
    if not text:
        return 0.0
    match = _NON_DECIMAL.fullmatch(text)
    if match is not None:
        for digits, base in zip(match.groups(), _BASES, strict=True):
            if digits is not None:
                try:
                    return float(int(digits, base))
                except OverflowError:
                    return math.inf
    if _DECIMAL.fullmatch(text) is None:
        return None
    if text.endswith("Infinity"):
        return -math.inf if text.startswith("-") else math.inf
    # The text now fits the JavaScript grammar, which Python's float reads the same way,
    # correctly rounded.
    return float(text)
