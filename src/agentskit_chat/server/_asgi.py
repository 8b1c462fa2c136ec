"""The little ASGI every app of this package shares: types, headers, lifespan, one response.

The apps are plain ASGI callables, so they mount anywhere (a Starlette ``Route``, a FastAPI
app, a bare uvicorn) and need no web framework of their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, TypeAlias
from urllib.parse import parse_qsl

__all__ = [
    "ASGIApp",
    "Receive",
    "Scope",
    "Send",
    "handle_non_http",
    "header",
    "query_params",
    "route_path",
    "send_response",
]

Scope: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send: TypeAlias = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


async def handle_non_http(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answer a scope that is not an HTTP request; ``True`` when it was one of those.

    Lifespan events are acknowledged (the endpoints hold no resources), so an endpoint can be
    served on its own by uvicorn. A websocket is closed.
    """
    kind = scope.get("type")
    if kind == "http":
        return False
    if kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return True
    if kind == "websocket":
        await send({"type": "websocket.close", "code": 1000})
    return True


async def send_response(
    scope: Scope,
    send: Send,
    status: int,
    headers: Sequence[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    """Send one complete response; a HEAD request gets the headers without the body."""
    head = scope.get("method") == "HEAD"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-length", str(len(body)).encode("ascii")),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


def header(scope: Scope, name: bytes) -> str | None:
    """The request header ``name`` (lower case), repeated values joined with ``", "``.

    That is how Fetch's ``headers.get`` reads a repeated header, so every app sees the same
    value the reference would.
    """
    values = [value for key, value in scope.get("headers", ()) if key.lower() == name]
    if not values:
        return None
    return ", ".join(value.decode("latin-1") for value in values)


def route_path(scope: Scope) -> str:
    """The request's path within this app: ``path`` without the ``root_path`` it is mounted at.

    An app mounted at ``/support`` (a Starlette ``Mount``, uvicorn's ``--root-path``) sees
    ``path`` ``/support/api/chat`` and ``root_path`` ``/support``; its routes are ``/api/chat``.
    """
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and path.startswith(root):
        rest = path[len(root) :]
        if not rest:
            return "/"
        if rest.startswith("/"):
            return rest
    return path


def query_params(scope: Scope) -> dict[str, str]:
    """The query string's parameters, the first value of each (as ``URLSearchParams.get``)."""
    raw = scope.get("query_string", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
    first: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        first.setdefault(key, value)
    return first
