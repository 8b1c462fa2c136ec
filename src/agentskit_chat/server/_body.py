"""The one request-body reader of every HTTP route: bounded in size and in time.

A body is pulled from the ASGI ``receive`` channel only when a handler asks for it, chunk by
chunk: a declared ``content-length`` above the limit is refused before a byte is read, reading
stops at the chunk that passes the limit, and the whole body must arrive within a deadline, so a
client that drips one byte a second cannot hold a worker. A client that goes away while its body
is read is reported as such, never as a server error.

After the body is complete, :meth:`RequestBody.wait_disconnect` watches for the client leaving,
so a handler can stop its work when nobody is listening any more.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterable
from typing import Final, Protocol, TypeAlias

import anyio

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._text import JS_WHITESPACE

from ._asgi import Receive

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "BodyError",
    "BodySource",
    "BodyTimedOut",
    "BodyTooLarge",
    "ClientDisconnected",
    "RequestBody",
    "check_body_timeout",
    "declared_length_exceeds",
    "read_body_source",
]

#: How long a client may take to send its whole body, in seconds, unless an app says otherwise.
DEFAULT_BODY_TIMEOUT_S: Final = 10.0

_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_RADIX: Final = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


class BodyError(Exception):
    """The body could not be read in full; the subclass says why."""


class BodyTooLarge(BodyError):
    """The body is (or declares itself) longer than the limit."""


class BodyTimedOut(BodyError):
    """The body did not arrive in full before the deadline."""


class ClientDisconnected(BodyError):
    """The client went away before its body was complete."""


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

    The header is read as JavaScript's ``Number`` reads it, as the reference server does; a
    value that is not a finite number is ignored here (the streaming limit still applies).
    """
    if content_length is None:
        return False
    try:
        declared = _js_number(content_length)
    except (ValueError, OverflowError):
        return False
    return math.isfinite(declared) and declared > limit


class RequestBody:
    """The body of one ASGI HTTP request, read at most once.

    Args:
        receive: The request's ASGI ``receive`` channel.
        content_length: The ``content-length`` header, if any.
        limit: The largest body accepted, in bytes.
        timeout: How long the whole body may take to arrive, in seconds.
    """

    def __init__(
        self,
        receive: Receive,
        *,
        content_length: str | None,
        limit: int,
        timeout: float = DEFAULT_BODY_TIMEOUT_S,
    ) -> None:
        self._receive = receive
        self._content_length = content_length
        self._limit = limit
        self._timeout = timeout
        self.complete = anyio.Event()

    async def read(self) -> bytes:
        """The whole body.

        Raises:
            BodyTooLarge: the declared or the actual size is above the limit.
            BodyTimedOut: the body did not arrive in time.
            ClientDisconnected: the client went away first.
        """
        if declared_length_exceeds(self._content_length, self._limit):
            raise BodyTooLarge
        chunks: list[bytes] = []
        total = 0
        with anyio.move_on_after(self._timeout) as scope:
            while True:
                message = await self._receive()
                kind = message.get("type")
                if kind == "http.disconnect":
                    raise ClientDisconnected
                if kind != "http.request":
                    continue
                chunk = message.get("body", b"")
                total += len(chunk)
                if total > self._limit:
                    raise BodyTooLarge
                if chunk:
                    chunks.append(bytes(chunk))
                if not message.get("more_body", False):
                    self.complete.set()
                    return b"".join(chunks)
        assert scope.cancelled_caught
        raise BodyTimedOut

    async def wait_disconnect(self) -> None:
        """Return when the client disconnects, once the body was read in full."""
        await self.complete.wait()
        while True:
            message = await self._receive()
            if message.get("type") == "http.disconnect":
                return


class _Readable(Protocol):
    async def read(self) -> bytes: ...


#: A body as a handler may get it: all of it at once, a reader (such as :class:`RequestBody`),
#: or its chunks as they arrive.
BodySource: TypeAlias = bytes | bytearray | memoryview | _Readable | AsyncIterable[bytes]


async def read_body_source(source: BodySource, *, content_length: str | None, limit: int) -> bytes:
    """Read ``source`` in full, holding it to ``limit`` bytes.

    Raises:
        BodyTooLarge: ``content_length`` declares more than ``limit`` (nothing is read), or the
            body turns out longer (reading stops at the chunk that passes it).
        BodyTimedOut, ClientDisconnected: from a :class:`RequestBody`.
    """
    if declared_length_exceeds(content_length, limit):
        raise BodyTooLarge
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) > limit:
            raise BodyTooLarge
        return bytes(source)
    if not isinstance(source, AsyncIterable):
        return await source.read()
    chunks: list[bytes] = []
    total = 0
    async for chunk in source:
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge
        chunks.append(bytes(chunk))
    return b"".join(chunks)


def check_body_timeout(timeout: object) -> float:
    """``timeout`` as seconds, when it is a positive finite number.

    Raises:
        ConfigurationError: otherwise.
    """
    if not isinstance(timeout, int | float) or isinstance(timeout, bool):
        raise ConfigurationError("The body timeout must be a positive number of seconds.")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigurationError("The body timeout must be a positive number of seconds.")
    return float(timeout)
