"""The one JSON error body of every route: ``{"error": {"code", "message", "retryable"}}``.

Codes and messages come from the Ask error catalogue, so a client reads every refusal of every
route the same way; the body never carries anything of the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol import ASK_ERROR_CASES, AskDiagnostic
from agentskit_chat.protocol._json import js_stringify

from ._asgi import Scope, Send, send_response

__all__ = [
    "UNAUTHORIZED",
    "error_body",
    "error_headers",
    "method_allowed",
    "send_case",
    "send_error",
    "send_service_error",
]

#: The refusal of a caller without valid credentials.
UNAUTHORIZED: Final = AskDiagnostic.model_validate(
    {"code": "ASK_UNAUTHORIZED", "message": "A valid API key is required.", "retryable": False}
)

_JSON_HEADERS: Final = (
    (b"content-type", b"application/json; charset=utf-8"),
    (b"x-content-type-options", b"nosniff"),
)


def error_body(diagnostic: AskDiagnostic) -> bytes:
    """The JSON error document of ``diagnostic``."""
    return js_stringify({"error": diagnostic.to_wire()}).encode("utf-8", "surrogatepass")


def error_headers(
    *, retry_after: int | None = None, extra: Sequence[tuple[bytes, bytes]] = ()
) -> list[tuple[bytes, bytes]]:
    """The headers of an error response (``send_response`` adds length and ``no-store``)."""
    headers = [*_JSON_HEADERS, *extra]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode("ascii")))
    return headers


async def send_error(
    scope: Scope,
    send: Send,
    status: int,
    diagnostic: AskDiagnostic,
    *,
    retry_after: int | None = None,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send ``diagnostic`` as a complete JSON error response with ``status``."""
    headers = error_headers(retry_after=retry_after, extra=extra)
    await send_response(scope, send, status, headers, error_body(diagnostic))


async def send_case(scope: Scope, send: Send, name: str) -> None:
    """Send the Ask error catalogue's case ``name`` (``"invalid_json"``, ``"internal"``, ...)."""
    case = ASK_ERROR_CASES[name]
    extra = [(b"allow", b"POST")] if case.status == 405 else []
    await send_error(scope, send, case.status, case.to_diagnostic(), extra=extra)


async def send_service_error(scope: Scope, send: Send, error: AskServiceError) -> None:
    """Send what the Ask service raised as its JSON error response."""
    diagnostic = AskDiagnostic.model_validate(
        {"code": error.code, "message": error.message, "retryable": error.retryable}
    )
    await send_error(scope, send, error.status, diagnostic, retry_after=error.retry_after)


_READ_METHODS: Final = ("GET", "HEAD")
_READ_ONLY: Final = AskDiagnostic.model_validate(
    {
        "code": "ASK_INVALID_REQUEST",
        "message": "Only GET and HEAD are supported.",
        "retryable": False,
    }
)


async def method_allowed(scope: Scope, send: Send) -> bool:
    """Whether the request is a GET or a HEAD; else send the JSON 405 and return ``False``."""
    if scope.get("method") in _READ_METHODS:
        return True
    await send_error(scope, send, 405, _READ_ONLY, extra=[(b"allow", b"GET, HEAD")])
    return False
