"""Bounded request bodies (``behaviour-server.md`` §0, "Bounded JSON body").

The body is read only when the pipeline asks for it, chunk by chunk, and reading stops as soon
as the running total passes the limit: a never-ending chunked upload is cut at the limit, and a
declared ``content-length`` above it is refused before a single byte is read.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterable
from typing import Final

from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol._text import JS_WHITESPACE

__all__ = ["BodySource", "body_too_large", "declared_length_exceeds", "read_bounded_body"]

#: A request body: all of it at once, or its chunks as they arrive.
BodySource = bytes | AsyncIterable[bytes]

_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_RADIX: Final = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def body_too_large() -> AskServiceError:
    """The 413 diagnostic: ``Request body is too large.``"""
    return AskServiceError(
        413, "ASK_INVALID_REQUEST", "Request body is too large.", retryable=False
    )


def _js_number(text: str) -> float:
    """``Number(text)`` for a header value: NaN when JavaScript would not read a number."""
    stripped = text.strip(JS_WHITESPACE)
    if not stripped:
        return 0.0
    if _DECIMAL.fullmatch(stripped):
        return float(stripped)
    radix = _RADIX.fullmatch(stripped)
    if radix:
        digits = radix.group(1)
        return float(int(digits[1:], {"x": 16, "o": 8, "b": 2}[digits[0].lower()]))
    if stripped in ("Infinity", "+Infinity", "-Infinity"):
        return math.inf
    return math.nan


def declared_length_exceeds(content_length: str | None, limit: int) -> bool:
    """Whether a ``content-length`` header declares a finite size above ``limit``.

    The header is read as JavaScript's ``Number`` reads it; a value that is not a finite number
    is ignored here (the streaming limit still applies).
    """
    if content_length is None:
        return False
    try:
        declared = _js_number(content_length)
    except (ValueError, OverflowError):
        return False
    return math.isfinite(declared) and declared > limit


async def read_bounded_body(source: BodySource, *, content_length: str | None, limit: int) -> bytes:
    """Read a request body of at most ``limit`` bytes.

    Raises:
        AskServiceError: 413 ``Request body is too large.`` when ``content_length`` declares
            more than ``limit`` (nothing is read) or the body turns out longer than ``limit``
            (reading stops at the chunk that passes it).
    """
    if declared_length_exceeds(content_length, limit):
        raise body_too_large()
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) > limit:
            raise body_too_large()
        return bytes(source)
    chunks: list[bytes] = []
    total = 0
    async for chunk in source:
        total += len(chunk)
        if total > limit:
            raise body_too_large()
        chunks.append(bytes(chunk))
    return b"".join(chunks)
