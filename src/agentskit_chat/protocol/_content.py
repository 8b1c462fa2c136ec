"""Ordered assistant content ``agentskit.chat.content/1``: prose and components in one string.

One assistant message string holds a prefix line, then one JSON record per line (a text part or
a component part), then possibly an incomplete trailing record that is still streaming. See
``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import PlainValidator

from agentskit_chat.errors import ProtocolError

from ._component import ComponentFrame
from ._decode import NOT_JSON, as_text, is_object, parse_candidate, validate_model
from ._json import utf8_len
from ._result import Diagnostic, Rejected
from ._types import WireModel, one_of, text

__all__ = [
    "ASSISTANT_CONTENT_MAX_BYTES",
    "ASSISTANT_CONTENT_MAX_RECORDS",
    "ASSISTANT_CONTENT_PREFIX",
    "ASSISTANT_CONTENT_PREFIX_ROOT",
    "AssistantContentDecodeResult",
    "AssistantContentEncoder",
    "AssistantContentPart",
    "ComponentPart",
    "ContentDecoded",
    "TextPart",
    "create_assistant_content_encoder",
    "decode_assistant_content",
    "is_assistant_content_candidate",
]

#: U+001E, the protocol id and version, LF: the first 26 code units of every content string.
ASSISTANT_CONTENT_PREFIX: Final = "\x1eagentskit.chat.content/1\n"
#: The prefix up to the version: what any version of the envelope starts with.
ASSISTANT_CONTENT_PREFIX_ROOT: Final = "\x1eagentskit.chat.content/"
#: Decoder limits: whole-input UTF-8 bytes and complete records.
ASSISTANT_CONTENT_MAX_BYTES: Final = 262144
ASSISTANT_CONTENT_MAX_RECORDS: Final = 512
_MARK: Final = "\x1e"

_INVALID_CODE: Final = "ASSISTANT_CONTENT_INVALID_RECORD"
_LIMIT_CODE: Final = "ASSISTANT_CONTENT_LIMIT_EXCEEDED"
_INVALID_ENVELOPE = Diagnostic(_INVALID_CODE, "Assistant content envelope is invalid.")
_UNSUPPORTED = Diagnostic(
    "ASSISTANT_CONTENT_UNSUPPORTED_VERSION",
    "Assistant content envelope uses an unsupported version.",
)
_TOO_LARGE = Diagnostic(_LIMIT_CODE, "Assistant content envelope exceeds its safety limit.")
_TOO_MANY = Diagnostic(_LIMIT_CODE, "Assistant content envelope exceeds its record limit.")
_INVALID_RECORD = Diagnostic(_INVALID_CODE, "Assistant content record is invalid.")


class TextPart(WireModel):
    """Streamed prose: ``text`` is 1..16384 UTF-16 units, not trimmed."""

    kind: Annotated[Literal["text"], PlainValidator(one_of("text"))]
    text: Annotated[str, PlainValidator(text(1, 16384))]


class ComponentPart(WireModel):
    """A portable component: ``frame`` is a render frame (component envelope v1)."""

    kind: Annotated[Literal["component"], PlainValidator(one_of("component"))]
    frame: ComponentFrame


#: One record of ordered assistant content, told apart by ``kind``.
AssistantContentPart = TextPart | ComponentPart


@dataclass(frozen=True, slots=True)
class ContentDecoded:
    """A successful content decode.

    Attributes:
        parts: The complete records, in order.
        complete: True iff no partial record trails (the payload after the prefix ends with LF).
    """

    parts: tuple[AssistantContentPart, ...]
    complete: bool
    ok: Literal[True] = True
    diagnostic: None = None


#: What :func:`decode_assistant_content` returns. Narrow with ``if result.ok:``.
AssistantContentDecodeResult = ContentDecoded | Rejected


def _validate_part(candidate: Any) -> AssistantContentPart | None:
    if not is_object(candidate):
        return None
    kind = candidate.get("kind")
    if type(kind) is not str:
        return None
    if kind == "text":
        return validate_model(TextPart, candidate)
    if kind == "component":
        return validate_model(ComponentPart, candidate)
    return None


class AssistantContentEncoder:
    """Encodes the parts of one assistant message, writing the prefix before the first record.

    Not thread-safe: use one encoder per message. Total size and record count are not enforced
    here; producers that must stay within them count for themselves.
    """

    __slots__ = ("_started",)

    def __init__(self) -> None:
        self._started = False

    def encode(self, part: AssistantContentPart | Mapping[str, Any]) -> str:
        """The record line for ``part``, preceded by the prefix on the first successful call.

        Raises:
            ProtocolError: ``ASSISTANT_CONTENT_INVALID_RECORD`` when ``part`` is not a valid text
                or component part; the prefix is then still pending.
        """
        try:
            wire = part.to_wire() if isinstance(part, WireModel) else part
            validated = _validate_part(wire)
            record = None if validated is None else validated.to_json()
        except Exception:
            record = None
        if record is None:
            raise ProtocolError(_INVALID_RECORD.code, _INVALID_RECORD.message)
        if self._started:
            return record + "\n"
        self._started = True
        return ASSISTANT_CONTENT_PREFIX + record + "\n"


def create_assistant_content_encoder() -> AssistantContentEncoder:
    """A fresh encoder for one assistant message.

    >>> encoder = create_assistant_content_encoder()
    >>> encoder.encode({"kind": "text", "text": "Hi"}) == ASSISTANT_CONTENT_PREFIX + (
    ...     '{"kind":"text","text":"Hi"}\\n'
    ... )
    True
    """
    return AssistantContentEncoder()


def _plain_text(payload: object) -> str | None:
    if isinstance(payload, bytes | bytearray | memoryview):
        return as_text(payload)
    if isinstance(payload, str):
        # A str subclass could override methods; work on an exact copy.
        return as_text(str.__str__(payload))
    return None


def _decode(payload: object) -> AssistantContentDecodeResult:
    content = _plain_text(payload)
    if content is None or not content.startswith(_MARK):
        return Rejected(_INVALID_ENVELOPE)
    if not content.startswith(ASSISTANT_CONTENT_PREFIX_ROOT):
        if ASSISTANT_CONTENT_PREFIX_ROOT.startswith(content):
            return ContentDecoded((), False)
        return Rejected(_INVALID_ENVELOPE)
    if ASSISTANT_CONTENT_PREFIX.startswith(content):
        return ContentDecoded((), False)
    if not content.startswith(ASSISTANT_CONTENT_PREFIX):
        return Rejected(_UNSUPPORTED)
    if utf8_len(content) > ASSISTANT_CONTENT_MAX_BYTES:
        return Rejected(_TOO_LARGE)
    body = content[len(ASSISTANT_CONTENT_PREFIX) :]
    # LF only: str.splitlines would also split on U+001E, U+2028 and other Unicode breaks.
    records = body.split("\n")[:-1]
    if len(records) > ASSISTANT_CONTENT_MAX_RECORDS:
        return Rejected(_TOO_MANY)
    parts: list[AssistantContentPart] = []
    for record in records:
        candidate = parse_candidate(record) if record else NOT_JSON
        part = None if candidate is NOT_JSON else _validate_part(candidate)
        if part is None:
            return Rejected(_INVALID_RECORD)
        parts.append(part)
    return ContentDecoded(tuple(parts), body.endswith("\n"))


def decode_assistant_content(payload: object) -> AssistantContentDecodeResult:
    """Decode ordered assistant content from a string (or UTF-8 bytes).

    A payload that is still arriving decodes to the records complete so far: a partial prefix
    or a partial trailing record is not an error, and ``complete`` tells whether one trails.
    Any invalid complete record fails the whole decode.

    Returns:
        ``ContentDecoded(parts, complete)``, or ``Rejected`` with
        ``ASSISTANT_CONTENT_INVALID_RECORD``, ``ASSISTANT_CONTENT_UNSUPPORTED_VERSION`` or
        ``ASSISTANT_CONTENT_LIMIT_EXCEEDED``. Never raises.
    """
    try:
        return _decode(payload)
    except Exception:
        return Rejected(_INVALID_ENVELOPE)


def is_assistant_content_candidate(payload: object) -> bool:
    """Whether ``payload`` is a string (or UTF-8 bytes) starting with U+001E. Never raises."""
    try:
        content = _plain_text(payload)
    except Exception:
        return False
    return content is not None and content.startswith(_MARK)
