"""What the Ask client sends and what it makes of the answer, with no I/O.

``docs/ask-client.md``:

- the conversation is projected to Ask messages (user and assistant only; ordered assistant
  content becomes its text, with ``[<componentKey>]`` for each component) and then trimmed to
  the service's bounds, so a long conversation is trimmed rather than refused;
- each Ask event is projected to text, a component frame, an error or the end of the answer
  (``cite`` becomes a ``source-list`` frame with only safe links);
- :class:`AskContentEncoder` re-encodes text and frames as ordered assistant content that
  never exceeds 262,144 UTF-8 bytes and 512 records.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import ada_url

from agentskit_chat.answers._projection import safe_instance_id
from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import (
    ASK_REQUEST_MAX_MESSAGE_CHARS,
    ASK_REQUEST_MAX_MESSAGES,
    ASSISTANT_CONTENT_MAX_BYTES,
    ASSISTANT_CONTENT_MAX_RECORDS,
    COMPONENT_PROTOCOL,
    AskDoneEvent,
    AskErrorEvent,
    AskMessage,
    AskTextEvent,
    AskToolEvent,
    ComponentFrame,
    ComponentPart,
    TextPart,
    create_assistant_content_encoder,
    decode_assistant_content,
    is_safe_href,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._json import utf8_len
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.protocol._types import WireModel
from agentskit_chat.runtime import ChatMessage

__all__ = [
    "ASK_CONTENT_BYTE_LIMIT_MESSAGE",
    "ASK_CONTENT_RECORD_LIMIT_MESSAGE",
    "ASK_HISTORY_MAX_BYTES",
    "ASK_TEXT_RECORD_UNITS",
    "AskContentEncoder",
    "AskProjection",
    "ProjectTool",
    "ProjectedComponent",
    "ProjectedDone",
    "ProjectedError",
    "ProjectedText",
    "project_ask_event",
    "project_ask_messages",
    "safe_source_href",
    "trim_ask_history",
]

#: How many UTF-16 units one text record holds at most.
ASK_TEXT_RECORD_UNITS: Final = 16384
#: The error texts of the two content limits; they end the stream as an error chunk.
ASK_CONTENT_BYTE_LIMIT_MESSAGE: Final = "Ask response exceeded the assistant content byte limit."
ASK_CONTENT_RECORD_LIMIT_MESSAGE: Final = (
    "Ask response exceeded the assistant content record limit."
)
_LIMIT_CODE: Final = "ASSISTANT_CONTENT_LIMIT_EXCEEDED"

_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_DUMMY_ORIGIN: Final = "https://agentskit.invalid"
_MAX_HREF_UNITS: Final = 2048
_MAX_TITLE_UNITS: Final = 256
_MAX_SUMMARY_UNITS: Final = 4096
_MAX_SOURCES: Final = 50


# --- lengths in UTF-16 units, never splitting a surrogate pair --------------------------------


def _cut(value: str, units: int) -> str:
    """The longest prefix of at most ``units`` UTF-16 units that does not split a pair."""
    if len(value) <= units // 2 or (value.isascii() and len(value) <= units):
        return value
    encoded = value.encode("utf-16-le", "surrogatepass")
    if len(encoded) <= units * 2:
        return value
    cut = units * 2
    # Little-endian: the high byte of unit i is at 2i+1. A high surrogate as the last kept
    # unit followed by a low surrogate is a pair the cut would split: cut one unit earlier.
    if 0xD8 <= encoded[cut - 1] <= 0xDB and 0xDC <= encoded[cut + 1] <= 0xDF:
        cut -= 2
    return encoded[:cut].decode("utf-16-le", "surrogatepass")


def _slices(value: str, units: int) -> Iterator[str]:
    """``value`` in consecutive pieces of at most ``units`` UTF-16 units (pairs kept whole)."""
    while value:
        piece = _cut(value, units)
        yield piece
        value = value[len(piece) :]


# --- history ----------------------------------------------------------------------------------


def _assistant_text(content: str) -> str:
    decoded = decode_assistant_content(content)
    if not decoded.ok:
        return content
    lines = [
        part.text if isinstance(part, TextPart) else f"[{part.frame.component_key}]"
        for part in decoded.parts
    ]
    return js_trim("\n".join(lines))


def project_ask_messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """The conversation as Ask messages ``{"role", "content"}``, with no bounds applied.

    Only ``user`` and ``assistant`` messages are kept, in order. User content is sent as it
    is. Assistant content that is valid ordered assistant content becomes its text records
    and ``[<componentKey>]`` for each component, joined with LF and trimmed; any other
    assistant content is sent as it is. :func:`trim_ask_history` applies the service bounds.

    Example:
        >>> from datetime import UTC, datetime
        >>> at = datetime(2026, 7, 13, tzinfo=UTC)
        >>> project_ask_messages([
        ...     ChatMessage(id="s", role="system", content="Be brief.", created_at=at),
        ...     ChatMessage(id="u", role="user", content="Question", created_at=at),
        ... ])
        [{'role': 'user', 'content': 'Question'}]
    """
    projected: list[dict[str, str]] = []
    for message in messages:
        if message.role == "user":
            projected.append({"role": "user", "content": message.content})
        elif message.role == "assistant":
            projected.append({"role": "assistant", "content": _assistant_text(message.content)})
    return projected


#: The part of the service's default 64 KiB body limit that history may use; the rest is left
#: for the envelope and a deterministic escalation (at most about 16 KiB).
ASK_HISTORY_MAX_BYTES: Final = 49152


def trim_ask_history(
    messages: Sequence[Mapping[str, str]], *, max_bytes: int = ASK_HISTORY_MAX_BYTES
) -> tuple[AskMessage, ...]:
    """Fit projected messages to what an Ask service accepts (count and length bounds), so a
    long conversation is trimmed rather than refused by the service.

    Keeps the newest 64 messages (the oldest are dropped first), cuts each content to its
    first 16,384 UTF-16 units (never splitting a surrogate pair), then drops the oldest
    messages until the history's JSON fits ``max_bytes`` (the newest message is always kept),
    so a long conversation stays under the service's body limit. The reference sends the
    history unbounded, so a long conversation fails with HTTP 400 or 413.

    Raises:
        ProtocolError: ``ASK_INVALID_MESSAGE`` when a message role is not user or assistant.
    """
    kept = list(messages)[-ASK_REQUEST_MAX_MESSAGES:]
    out: list[AskMessage] = []
    for message in kept:
        wire = {
            "role": message["role"],
            "content": _cut(message["content"], ASK_REQUEST_MAX_MESSAGE_CHARS),
        }
        model = validate_model(AskMessage, wire)
        if model is None:
            raise ProtocolError("ASK_INVALID_MESSAGE", "An Ask message must be user or assistant.")
        out.append(model)
    used, start = 0, len(out)
    while start > 0:
        size = utf8_len(out[start - 1].to_json()) + 1  # and its comma
        if used + size > max_bytes and start < len(out):
            break
        used += size
        start -= 1
    return tuple(out[start:])


# --- safe links -------------------------------------------------------------------------------


def _parse(value: str, base: str | None = None) -> ada_url.URL | None:
    # WHATWG USVString conversion: lone surrogates become U+FFFD before parsing.
    if not value.isascii():
        value = _SURROGATE.sub("\ufffd", value)
    try:
        return ada_url.URL(value) if base is None else ada_url.URL(value, base)
    except (ValueError, UnicodeError):
        return None


def _set_fragment(url: ada_url.URL, fragment: str | None) -> bool:
    if fragment is None:
        return True
    if not fragment.isascii():
        fragment = _SURROGATE.sub("\ufffd", fragment)
    try:
        url.hash = fragment
    except (ValueError, UnicodeError):
        return False
    return True


def safe_source_href(path: str, anchor: str | None = None) -> str | None:
    """The link a cited source may carry, or ``None`` when it would not be safe.

    A path without a URI scheme (and not starting with ``//``) is made root-relative,
    resolved against a placeholder origin (a path that escapes it, such as ``/\\evil.example``,
    is unsafe) and returned as path, query and fragment. Anything else must be an absolute
    ``http``/``https`` URL without credentials and is returned normalized. ``anchor`` (one
    leading ``#`` removed) becomes the fragment, percent-encoded. The result is at most 2,048
    UTF-16 units and always passes :func:`~agentskit_chat.protocol.is_safe_href`.

    Example:
        >>> safe_source_href("/docs/guide", "first step"), safe_source_href("//evil.example")
        ('/docs/guide#first%20step', None)
    """
    fragment = None if anchor is None else anchor.removeprefix("#")
    if _SCHEME.match(path) is None and not path.startswith("//"):
        url = _parse(path if path.startswith("/") else "/" + path, _DUMMY_ORIGIN)
        if url is None or url.origin != _DUMMY_ORIGIN or not _set_fragment(url, fragment):
            return None
        href = url.pathname + url.search + url.hash
    else:
        url = _parse(path)
        if url is None or url.protocol not in ("http:", "https:"):
            return None
        if url.username or url.password or not _set_fragment(url, fragment):
            return None
        href = url.href
    if utf16_len(href) > _MAX_HREF_UNITS or not is_safe_href(href):
        return None
    return href


# --- event projection -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectedText:
    """Answer text to append (any length; the encoder slices it into records)."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ProjectedComponent:
    """A component render frame to append as one record."""

    frame: ComponentFrame
    kind: Literal["component"] = "component"


@dataclass(frozen=True, slots=True)
class ProjectedError:
    """The service ended the answer with an error; ``message`` is its text."""

    message: str
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class ProjectedDone:
    """The service ended the answer successfully."""

    kind: Literal["done"] = "done"


#: What one Ask event means for the assistant message (``None``: nothing).
AskProjection = ProjectedText | ProjectedComponent | ProjectedError | ProjectedDone
#: A host hook turning an Ask ``tool`` event it knows into a component render frame.
ProjectTool = Callable[[AskToolEvent], ComponentFrame | Mapping[str, Any] | None]

_DONE: Final = ProjectedDone()


def _frame(candidate: object) -> ComponentFrame | None:
    try:
        wire = candidate.to_wire() if isinstance(candidate, WireModel) else candidate
    except Exception:
        return None
    return validate_model(ComponentFrame, wire)


def _source_list(event: AskToolEvent) -> ComponentFrame | None:
    raw = event.args.get("sources")
    if not isinstance(raw, list | tuple):
        return None
    sources: list[dict[str, str]] = []
    for position, item in enumerate(raw):
        if len(sources) == _MAX_SOURCES:
            break
        if not isinstance(item, Mapping):
            continue
        title, path, anchor = item.get("title"), item.get("path"), item.get("anchor")
        if type(title) is not str or not js_trim(title) or type(path) is not str:
            continue
        url = safe_source_href(path, anchor if type(anchor) is str else None)
        if url is None:
            continue
        sources.append(
            {"id": f"source-{position + 1}", "title": _cut(title, _MAX_TITLE_UNITS), "url": url}
        )
    if not sources:
        return None
    summary = "Sources: " + ", ".join(source["title"] for source in sources) + "."
    return _frame(
        {
            "protocol": COMPONENT_PROTOCOL,
            "version": 1,
            "type": "render",
            "componentKey": "source-list",
            "instanceId": safe_instance_id(event.id, "sources"),
            "props": {"label": "Sources", "sources": sources},
            "fallback": {"kind": "source-list", "summary": _cut(summary, _MAX_SUMMARY_UNITS)},
        }
    )


def _custom(event: AskToolEvent, project_tool: ProjectTool | None) -> AskProjection | None:
    if project_tool is None:
        return None
    try:
        result = project_tool(event)
    except Exception:
        return None
    if inspect.iscoroutine(result):  # a hook is synchronous: never awaited, never left pending
        result.close()
        return None
    frame = None if result is None else _frame(result)
    return None if frame is None else ProjectedComponent(frame)


def project_ask_event(
    event: AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent,
    project_tool: ProjectTool | None = None,
) -> AskProjection | None:
    """What one Ask event adds to the assistant message, or ``None`` for nothing.

    - ``text``: its ``delta`` (nothing when empty);
    - ``error``: :class:`ProjectedError` with the event's message; ``done``: :class:`ProjectedDone`;
    - ``tool`` ``answer`` with a string ``args.markdown``: that text (nothing when empty);
    - ``tool`` ``cite``: a ``source-list`` frame of the sources whose title is not blank and
      whose ``path`` (and optional ``anchor``) make a safe link (:func:`safe_source_href`);
      ids are ``source-<position>``, titles are cut to 256 units, at most 50 sources; nothing
      when none survives;
    - any other ``tool``: ``project_tool(event)`` when it returns a valid component render
      frame; nothing when there is no hook, it raises, or its result is not a valid frame.

    Never raises.
    """
    if isinstance(event, AskTextEvent):
        return ProjectedText(event.delta) if event.delta else None
    if isinstance(event, AskErrorEvent):
        return ProjectedError(event.message)
    if isinstance(event, AskDoneEvent):
        return _DONE
    if event.name == "answer":
        markdown = event.args.get("markdown")
        if type(markdown) is str:
            return ProjectedText(markdown) if markdown else None
    elif event.name == "cite":
        frame = _source_list(event)
        return None if frame is None else ProjectedComponent(frame)
    return _custom(event, project_tool)


# --- bounded encoding -------------------------------------------------------------------------


class AskContentEncoder:
    """Encodes one assistant message as ordered assistant content, within its limits.

    The first record carries the ``agentskit.chat.content/1`` prefix. Before a record is
    encoded the record count is checked, after it the running UTF-8 size (prefix included);
    a record that would break either limit is not returned, so everything returned so far is
    always a valid, complete envelope.

    Raises (from the encode methods):
        ProtocolError: ``ASSISTANT_CONTENT_LIMIT_EXCEEDED`` with
            :data:`ASK_CONTENT_RECORD_LIMIT_MESSAGE` or :data:`ASK_CONTENT_BYTE_LIMIT_MESSAGE`.

    Example:
        >>> encoder = AskContentEncoder()
        >>> list(encoder.encode_text("Hi"))
        ['\\x1eagentskit.chat.content/1\\n{"kind":"text","text":"Hi"}\\n']
    """

    __slots__ = ("_encoder", "_max_bytes", "_max_records", "bytes", "records")

    def __init__(
        self,
        *,
        max_bytes: int = ASSISTANT_CONTENT_MAX_BYTES,
        max_records: int = ASSISTANT_CONTENT_MAX_RECORDS,
    ) -> None:
        self._encoder = create_assistant_content_encoder()
        self._max_bytes = max_bytes
        self._max_records = max_records
        #: UTF-8 bytes and records returned so far.
        self.bytes = 0
        self.records = 0

    def encode_text(self, text: str) -> Iterator[str]:
        """Text records of at most 16,384 units each (none for empty text), one at a time."""
        for piece in _slices(text, ASK_TEXT_RECORD_UNITS):
            yield self._encode(TextPart(kind="text", text=piece))

    def encode_component(self, frame: ComponentFrame) -> str:
        """One component record for ``frame``."""
        return self._encode(ComponentPart(kind="component", frame=frame))

    def _encode(self, part: TextPart | ComponentPart) -> str:
        if self.records >= self._max_records:
            raise ProtocolError(_LIMIT_CODE, ASK_CONTENT_RECORD_LIMIT_MESSAGE)
        if self.bytes >= self._max_bytes:
            raise ProtocolError(_LIMIT_CODE, ASK_CONTENT_BYTE_LIMIT_MESSAGE)
        record = self._encoder.encode(part)
        size = self.bytes + utf8_len(record)
        if size > self._max_bytes:
            if not self.records:
                # The refused record carried the prefix: the next one must carry it again.
                self._encoder = create_assistant_content_encoder()
            raise ProtocolError(_LIMIT_CODE, ASK_CONTENT_BYTE_LIMIT_MESSAGE)
        self.bytes = size
        self.records += 1
        return record
