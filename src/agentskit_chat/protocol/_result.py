"""Result values returned at trust boundaries: a decoded value or a typed diagnostic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from agentskit_chat.errors import ProtocolError

__all__ = ["DecodeResult", "Decoded", "Diagnostic", "Rejected"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Why a payload was rejected: a fixed ``code`` and ``message`` that never echo input.

    Attributes:
        code: A stable machine-readable code such as ``DETERMINISTIC_INVALID_PAYLOAD``.
        message: A fixed human-readable sentence from the spec's diagnostic table.
        retryable: Whether retrying the same operation can succeed (always false for decoders).
        event_id: The rejected turn event's own id, only when it is a safe identifier.
    """

    code: str
    message: str
    retryable: bool = False
    event_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The wire form ``{code, message, retryable[, eventId]}``."""
        wire: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.event_id is not None:
            wire["eventId"] = self.event_id
        return wire


@dataclass(frozen=True, slots=True)
class Decoded(Generic[T]):
    """A successful decode: ``ok`` is true and ``value`` holds the decoded model."""

    value: T
    ok: Literal[True] = True
    diagnostic: None = None

    def unwrap(self) -> T:
        """Return the value."""
        return self.value


@dataclass(frozen=True, slots=True)
class Rejected:
    """A failed decode: ``ok`` is false and ``diagnostic`` says why."""

    diagnostic: Diagnostic
    ok: Literal[False] = False
    value: None = None

    def unwrap(self) -> Any:
        """Raise :class:`~agentskit_chat.errors.ProtocolError` carrying the diagnostic."""
        raise ProtocolError(self.diagnostic.code, self.diagnostic.message)


#: What every decoder returns. Narrow with ``if result.ok:`` or ``isinstance``.
DecodeResult = Decoded[T] | Rejected
