"""Request bodies: the size bound and the one decoding of an Ask request's bytes.

Reading a body off a connection is the HTTP edge's job (:mod:`agentskit_chat.server`); what the
bytes must satisfy is the service's: at most the configured number of bytes, then the protocol's
decoder, whose diagnostic becomes a 400.
"""

from __future__ import annotations

from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol import AskRequest, decode_ask_request

__all__ = ["body_too_large", "decode_request_body"]


def body_too_large() -> AskServiceError:
    """The 413 diagnostic: ``Request body is too large.``"""
    return AskServiceError(
        413, "ASK_INVALID_REQUEST", "Request body is too large.", retryable=False
    )


def decode_request_body(raw: bytes, *, limit: int) -> AskRequest:
    """Decode a complete Ask request body of at most ``limit`` bytes.

    Raises:
        AskServiceError: 413 when ``raw`` is longer than ``limit``; 400 with the decoder's
            diagnostic when it is not a valid request.
    """
    if len(raw) > limit:
        raise body_too_large()
    decoded = decode_ask_request(raw)
    if not decoded.ok:
        diagnostic = decoded.diagnostic
        raise AskServiceError(400, diagnostic.code, diagnostic.message, retryable=False)
    return decoded.value
