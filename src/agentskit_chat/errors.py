"""The exception tree of agentskit-chat, in one place.

Decoders at trust boundaries never raise on bad input: they return a result value. Exceptions
are for programmer-facing misuse (encoding an invalid value, constructing with bad arguments).

    AgentsKitChatError
    └── ProtocolError            a value does not satisfy a wire contract
        └── ContentHashError     an artifact cannot be hashed because it is not valid
"""

from __future__ import annotations

__all__ = ["AgentsKitChatError", "ContentHashError", "ProtocolError"]


class AgentsKitChatError(Exception):
    """Base class of every error this package raises on purpose."""


class ProtocolError(AgentsKitChatError, ValueError):
    """A value does not satisfy a wire contract.

    Attributes:
        code: The diagnostic code, such as ``PROTOCOL_INVALID_PAYLOAD``.
        message: The fixed diagnostic message; it never contains input data.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ContentHashError(ProtocolError):
    """An artifact could not be hashed because it does not decode as a valid artifact."""
