"""What the chat turn handler tells a client when a turn is refused or fails.

A failure is a status, a code, a fixed message and whether a retry can help; it never carries
anything of the request. Before the stream starts it is sent as a JSON error body
(``{"error": {version, code, message, retryable}}``); once the stream started, the same
diagnostic rides in a ``server.turn.diagnostic`` line.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from agentskit_chat.errors import (
    ChatHandlerError,
    ConfigurationError,
    ConfirmationLimitError,
    ConversationTooLargeError,
    SessionConflictError,
    StorageError,
    ToolError,
)
from agentskit_chat.protocol._json import js_stringify

from ._asgi import Scope, Send, send_response
from ._chat_actions import CONFIRMATION_LIMIT_MESSAGE, CONFIRMATION_UNAVAILABLE_MESSAGE

__all__ = [
    "INVALID_EVENT",
    "JSON_HEADERS",
    "Failure",
    "HostRefused",
    "Reason",
    "aborted",
    "action_refusal",
    "classify",
    "diagnostic",
    "no_body",
    "refusal",
    "send_failure",
    "turn_outcome",
    "unavailable",
]

#: Why a request stopped early: its deadline passed, or its client went away.
Reason = Literal["timeout", "cancelled"]

#: The headers of a JSON response of the chat handler (a resumed snapshot, an error body).
JSON_HEADERS: Final = (
    (b"content-type", b"application/json; charset=utf-8"),
    (b"x-content-type-options", b"nosniff"),
)

#: The message of ``REQUEST_INVALID_EVENT``.
INVALID_EVENT: Final = "Request body must be a valid turn submission."
_CONFLICT: Final = "The session changed in another request; submit the turn again."
_TIMEOUT: Final = "The chat request timed out."
_CANCELLED: Final = "The chat request was cancelled."
_INTERNAL: Final = "The chat request failed."
_TOO_LARGE: Final = "This turn is too large to be kept in the conversation."
_ACTION_FORBIDDEN: Final = "This action is not allowed."
_ACTION_INVALID: Final = "This action cannot be proposed."


class Failure(Exception):
    """A refusal before the stream starts, with its status and diagnostic."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


class HostRefused(Exception):
    """Internal: the host refused the request; its response is sent unchanged."""

    def __init__(self, response: Any) -> None:
        super().__init__("refused")
        self.response = response


def refusal(status: int, code: str, message: str, *, retryable: bool = False) -> Failure:
    """A failure the client caused (or may retry, when ``retryable``)."""
    return Failure(status, code, message, retryable=retryable)


def unavailable() -> Failure:
    """409 ``CONFIRMATION_UNAVAILABLE``: the call is not (or no longer) waiting."""
    return refusal(409, "CONFIRMATION_UNAVAILABLE", CONFIRMATION_UNAVAILABLE_MESSAGE)


def action_refusal(error: ToolError) -> Failure:
    """What the client is told when an action could not be proposed (never the reason text,
    which the host's authorizer wrote for its own logs)."""
    if error.code == "AK_TOOL_FORBIDDEN":
        return refusal(403, "ACTION_FORBIDDEN", _ACTION_FORBIDDEN)
    return refusal(400, "ACTION_INVALID", _ACTION_INVALID)


def classify(error: BaseException) -> Failure:
    """What a failure tells the client: its code, its fixed message, and whether to retry."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, ChatHandlerError):
        return Failure(error.status, error.code, error.message, retryable=error.retryable)
    if isinstance(error, SessionConflictError):
        return Failure(409, "SESSION_CONFLICT", _CONFLICT, retryable=True)
    if isinstance(error, ConversationTooLargeError):
        return Failure(409, "CONVERSATION_TOO_LARGE", _TOO_LARGE, retryable=False)
    if isinstance(error, StorageError):
        return Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=error.retryable)
    if isinstance(error, ConfirmationLimitError):
        # The session keeps every undecided call: only deciding some of them makes room.
        return refusal(409, "CONFIRMATION_LIMIT_REACHED", CONFIRMATION_LIMIT_MESSAGE)
    if isinstance(error, ConfigurationError):
        # An incompatible stored session or an invalid definition: retrying cannot help.
        return Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=False)
    return Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=True)


def aborted(reason: Reason) -> Failure:
    """408 ``SERVER_TIMEOUT`` past the deadline, 499 ``REQUEST_CANCELLED`` for a client gone."""
    if reason == "timeout":
        return Failure(408, "SERVER_TIMEOUT", _TIMEOUT, retryable=True)
    return Failure(499, "REQUEST_CANCELLED", _CANCELLED, retryable=True)


def turn_outcome(error: BaseException) -> str:
    """The turn-metrics outcome of a turn that failed with ``error`` after it started."""
    if isinstance(error, SessionConflictError):
        return "conflict"
    if isinstance(error, ConversationTooLargeError):
        return "too_large"
    if isinstance(error, ConfirmationLimitError):
        return "confirmation_limit"  # a full session of undecided calls: the client's to decide
    if isinstance(error, StorageError | TimeoutError):
        return "store_error"  # a store call failed, or its cleanup bound cut it off
    return "failed"


def diagnostic(failure: Failure) -> dict[str, Any]:
    """The wire diagnostic of ``failure``: ``{version, code, message, retryable}``."""
    return {
        "version": 1,
        "code": failure.code,
        "message": failure.message,
        "retryable": failure.retryable,
    }


async def no_body() -> dict[str, Any]:
    """The ``receive`` of a host's refusal response: the body was never read."""
    return {"type": "http.disconnect"}


async def send_failure(scope: Scope, send: Send, failure: Failure) -> None:
    """Send ``failure`` as a complete JSON error response (a client gone is ignored)."""
    body = js_stringify({"error": diagnostic(failure)}).encode()
    headers = list(JSON_HEADERS)
    if failure.status == 405:
        headers.append((b"allow", b"GET, POST"))
    if failure.retry_after is not None:
        headers.append((b"retry-after", str(failure.retry_after).encode("ascii")))
    try:
        await send_response(scope, send, failure.status, headers, body)
    except OSError:
        return
