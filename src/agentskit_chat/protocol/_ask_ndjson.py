"""Bounded NDJSON decoding of Ask service records.

Two tools:

- :func:`decode_ask_events`, the reference's stateless per-buffer function, with its exact
  4096-line budget (lines past the budget in one call are dropped, as the reference does);
- :class:`AskEventDecoder`, a sans-IO decoder fed transport bytes, which carries the UTF-8
  state, the discard-through-newline obligation and the end-of-stream flush, and never drops a
  line (it works through at most 4096 lines per pull and keeps the rest buffered).
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agentskit_chat.errors import AgentsKitChatError

from ._ask import (
    _EVENT,
    ASK_EVENT_MAX_BYTES,
    ASK_EVENT_MAX_RECORDS,
    AskDoneEvent,
    AskEvent,
    AskEventModel,
    AskTextEvent,
)
from ._decode import validate_model
from ._json import parse_json_text, utf8_len
from ._text import JS_WHITESPACE, combine_surrogates

__all__ = ["AskDecodeResult", "AskEventDecoder", "decode_ask_events"]

# A Python character is at most 4 UTF-8 bytes and 2 UTF-16 units, so a string of up to this many
# characters provably fits the byte bound (and twice as many the ``delta`` bound) unmeasured.
_UNMEASURED_CHARS: Final = ASK_EVENT_MAX_BYTES // 4


# --- the stateless decoder -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskDecodeResult:
    """What one :func:`decode_ask_events` call found.

    Attributes:
        events: The valid records of the complete lines, in order.
        rest: The unterminated tail to prepend to the next chunk, or ``""``.
        discarded_partial: Whether the tail exceeded 1048576 bytes and was dropped; the caller
            must then drop incoming text up to and including the next LF.
    """

    events: tuple[AskEvent, ...]
    rest: str
    discarded_partial: bool

    def to_wire(self) -> dict[str, Any]:
        """The reference's result shape ``{events, rest, discardedPartial}`` as plain data."""
        return {
            "events": [event.to_wire() for event in self.events],
            "rest": self.rest,
            "discardedPartial": self.discarded_partial,
        }


_HALF: Final = ASK_EVENT_MAX_BYTES // 2
_NEW: Final = object.__new__
_SET: Final = object.__setattr__
# Events are frozen, and pydantic copies ``model_fields_set`` whenever it derives a new model, so
# every fast-built text event can share one set: one allocation fewer on the hottest path.
_SHARED_TEXT_FIELDS: Final = {"type", "delta"}


def _done_event(values: dict[str, Any], fields_set: set[str]) -> AskDoneEvent:
    # What ``model_validate`` builds, without re-running validators the caller has proven
    # redundant (``model_construct`` is slower than validating, hence the slots set directly).
    event: AskDoneEvent = _NEW(AskDoneEvent)
    _SET(event, "__dict__", values)
    _SET(event, "__pydantic_fields_set__", fields_set)
    _SET(event, "__pydantic_extra__", None)
    _SET(event, "__pydantic_private__", None)
    return event


def _record(value: Any) -> AskEventModel | None:
    """The Ask record a freshly parsed JSON value is, or ``None`` (not for programmatic input).

    A bare ``done`` and a ``done`` with a short model are built directly (the short text record
    is built by the line decoders); everything else goes through full validation.
    """
    if type(value) is dict and value.get("type") == "done":
        size = len(value)
        if size == 1:
            return _done_event({"type": "done", "model": None}, {"type"})
        model = value.get("model")
        if size == 2 and type(model) is str and len(model) <= 128:
            return _done_event({"type": "done", "model": model}, {"type", "model"})
    return validate_model(_EVENT, value)


class _Invalid:
    pass


_INVALID: Final = _Invalid()


def _parse_fallback(line: str) -> Any:
    try:
        return parse_json_text(line)
    except Exception:
        # JsonSyntaxError, and MemoryError on absurd input: the line is silently invalid.
        return _INVALID


def _utf8_bytes(value: str) -> int:
    return utf8_len(combine_surrogates(value))


#: The exact text before the ``delta`` of the hottest line shape, as the reference writes it.
_TEXT_HEAD: Final = '{"type":"text","delta":'
_AFTER_HEAD: Final = len(_TEXT_HEAD)
# Lines of at most this many characters are remembered with their record, per decoder (or per
# call of the stateless function): a model stream repeats its short text records over and
# over, and a repeated line then costs a dictionary lookup instead of a parse and a new event.
# Memory stays bounded: after ``_MEMO_ENTRIES`` such lines the memo starts over.
_MEMO_CHARS: Final = 64
_MEMO_ENTRIES: Final = 1024


def _text_event(delta: str) -> AskTextEvent:
    # What ``model_validate`` builds for ``{"type": "text", "delta": <short str>}``. (A fresh
    # dict: pydantic serializes in ``__dict__`` order.)
    event: AskTextEvent = _NEW(AskTextEvent)
    _SET(event, "__dict__", {"type": "text", "delta": delta})
    _SET(event, "__pydantic_fields_set__", _SHARED_TEXT_FIELDS)
    _SET(event, "__pydantic_extra__", None)
    _SET(event, "__pydantic_private__", None)
    return event


def _decode_line(line: str) -> Any:
    """The record one LF-free line holds, or ``None``: trimmed, bounded, parsed, validated."""
    line = line.strip(JS_WHITESPACE)
    if not line:
        return None
    if len(line) > _UNMEASURED_CHARS and _utf8_bytes(line) > ASK_EVENT_MAX_BYTES:
        return None
    try:
        # orjson first, exactly as ``parse_json_text`` does; its slow path handles the rest.
        value = orjson.loads(line)
    except Exception:
        # A record is an object, so nothing else needs the (slower) exact parser.
        if line[0] != "{":
            return None
        value = _parse_fallback(line)
        if value is _INVALID:
            return None
    if type(value) is dict and len(value) == 2:
        delta = value.get("delta")
        if type(delta) is str and value.get("type") == "text" and len(delta) <= _HALF:
            # Exactly {type: "text", delta: <short str>} is a valid text event.
            return _text_event(delta)
    return _record(value)


def _decode_new_line(line: str) -> Any:
    """:func:`_decode_line`, reading the hottest shape without parsing an object first."""
    if (
        line.startswith(_TEXT_HEAD)
        and line[-1] == "}"
        and line[_AFTER_HEAD] == '"'
        and len(line) <= _UNMEASURED_CHARS
    ):
        # When what lies between the head and the closing brace is one JSON string, the line
        # is exactly {type: "text", delta: <that string>}, as a full parse would find; nothing
        # surrounds it for the trim to remove. Anything else goes the full way, so every
        # verdict is the full decoder's.
        try:
            delta = orjson.loads(line[_AFTER_HEAD:-1])
        except Exception:
            delta = None
        if type(delta) is str and len(delta) <= _HALF:
            # ``_text_event``, inlined: this runs for every text line not seen before.
            event = _NEW(AskTextEvent)
            _SET(event, "__dict__", {"type": "text", "delta": delta})
            _SET(event, "__pydantic_fields_set__", _SHARED_TEXT_FIELDS)
            _SET(event, "__pydantic_extra__", None)
            _SET(event, "__pydantic_private__", None)
            return event
    return _decode_line(line)


class _Nothing:
    pass


#: What the memo holds for a line without a record (blank, invalid or not an Ask event).
_NOTHING: Final = _Nothing()


def _decode_lines(lines: list[str], out: list[Any], memo: dict[str, Any]) -> None:
    """Append the records of complete LF-free lines to ``out``; ``memo`` is read and filled."""
    remembered = memo.get
    append = out.append
    short = _MEMO_CHARS
    nothing = _NOTHING
    for line in lines:
        record = remembered(line)
        if record is None:
            record = _decode_new_line(line)
            if record is None:
                record = nothing
            if len(line) <= short:
                if len(memo) >= _MEMO_ENTRIES:
                    memo.clear()
                memo[line] = record
        if record is not nothing:
            append(record)


# Up to this many characters, counting the line feeds of a whole run at once is cheap next to
# decoding it; past it, they are found one by one, so no pull rescans what it leaves for later.
_COUNTED_SPAN: Final = 1 << 20


def _scan(
    buffer: str, cursor: int, limit: int, out: list[Any], memo: dict[str, Any]
) -> tuple[int, int]:
    """Decode up to ``limit`` LF-terminated lines from ``cursor``; return (cursor, lines)."""
    last = buffer.rfind("\n", cursor)
    if last < 0:
        return cursor, 0
    lines = limit + 1
    if last - cursor <= _COUNTED_SPAN:
        lines = buffer.count("\n", cursor, last) + 1
    if lines > limit:
        find = buffer.find
        last = cursor - 1
        lines = 0
        while lines < limit:
            end = find("\n", last + 1)
            if end < 0:
                break
            last = end
            lines += 1
    if cursor == 0 and last == len(buffer) - 1:
        parts = buffer.split("\n")  # one call cuts every line (the last piece is empty)
        parts.pop()
    else:
        parts = buffer[cursor:last].split("\n")
    _decode_lines(parts, out, memo)
    return last + 1, lines


_EMPTY: Final = AskDecodeResult((), "", False)


def decode_ask_events(buffer: str) -> AskDecodeResult:
    """Decode the complete NDJSON lines of ``buffer`` (the reference's ``decodeAskEvents``).

    Stateless and total: it never raises. Every LF-terminated line counts toward a budget of
    4096 lines per call (blank, oversized and invalid ones included); each is trimmed with the
    JavaScript whitespace set, skipped when over 1048576 UTF-8 bytes, then parsed and validated,
    and failures are silent. When the budget is spent, every further complete line of this
    buffer is dropped. The unterminated tail is returned as ``rest`` unless it exceeds 1048576
    bytes, in which case it is discarded and ``discarded_partial`` is true.

    Streaming callers must carry ``rest`` into the next call, drop text through the next LF
    after a discarded partial, and decode ``rest + "\\n"`` at the end of the stream;
    :class:`AskEventDecoder` does all of that (and never drops lines).

    >>> decode_ask_events('{"type":"text","delta":"hi"}\\n{"type"').rest
    '{"type"'
    """
    if type(buffer) is not str:
        if not isinstance(buffer, str):
            return _EMPTY
        buffer = str.__str__(buffer)  # a plain copy: a subclass's methods are not trusted
    events: list[Any] = []
    cursor, records = _scan(buffer, 0, ASK_EVENT_MAX_RECORDS, events, {})
    if records == ASK_EVENT_MAX_RECORDS:
        last = buffer.rfind("\n")
        if last >= cursor:
            cursor = last + 1
    partial = buffer[cursor:]
    if len(partial) > _UNMEASURED_CHARS and _utf8_bytes(partial) > ASK_EVENT_MAX_BYTES:
        return AskDecodeResult(tuple(events), "", True)
    return AskDecodeResult(tuple(events), partial, False)


# --- the sans-IO decoder -------------------------------------------------------------------------

_NORMAL: Final = 0
_DISCARD: Final = 1  # dropping text through the next LF: the current line is oversized
_LOCKED: Final = 2  # the current line is only valid if nothing but whitespace precedes its LF


class AskEventDecoder:
    """A sans-IO Ask NDJSON decoder: feed transport bytes, take records out.

    It keeps the streaming UTF-8 state (a multi-byte character may straddle chunks; one
    leading byte-order mark is removed, as ``TextDecoder`` does), the partial last line, the
    discard-through-newline obligation, and the end-of-stream flush. Chunk boundaries never
    change the result: the records equal those of :func:`decode_ask_events` applied once to
    the whole decoded stream plus the end-of-stream flush, except that no line is ever dropped.
    Work happens when records are pulled, at most ``max_records`` lines per :meth:`pull`.

    A line whose trimmed text fits the 1048576-byte bound is decoded even when surrounding
    whitespace makes it longer; the pending partial line is held in at most about 1 MiB.

    >>> decoder = AskEventDecoder()
    >>> decoder.feed(b'{"type":"text","delta":"hi"}\\n{"type":"do')
    >>> decoder.feed(b'ne"}')
    >>> decoder.end_of_stream()
    >>> [event.type for event in decoder.events()]
    ['text', 'done']
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._blocks: deque[str] = deque()  # runs of complete lines, each ending with LF
        self._cursor = 0  # how far the first block has been decoded
        self._pieces: list[str] = []  # the unterminated current line
        self._bytes = 0  # UTF-8 bytes of the pieces
        self._lead = 0  # UTF-8 bytes of leading whitespace already dropped from the pieces
        self._mode = _NORMAL
        self._ready: deque[Any] = deque()
        self._ended = False
        self._memo: dict[str, Any] = {}  # short lines already decoded, and their records

    @property
    def needs_data(self) -> bool:
        """Whether no record can come out until more bytes (or the end of stream) arrive."""
        return not self._ready and not self._blocks

    @property
    def ended(self) -> bool:
        """Whether :meth:`end_of_stream` has been called."""
        return self._ended

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add transport bytes. Cheap: lines are decoded when records are pulled.

        Raises:
            AgentsKitChatError: when called after :meth:`end_of_stream`.
        """
        if self._ended:
            raise AgentsKitChatError("AskEventDecoder.feed() called after end_of_stream().")
        self._push(self._utf8.decode(data, False))

    def end_of_stream(self) -> None:
        """Mark the end of the transport: the final unterminated line is decoded once.

        A final line longer than 1048576 bytes (untrimmed) yields nothing, as does a stream
        that ends while an oversized line is being discarded. Calling it twice is harmless.
        """
        if self._ended:
            return
        self._push(self._utf8.decode(b"", True))
        if self._mode == _NORMAL and self._lead == 0 and self._pieces:
            self._blocks.append("".join(self._pieces) + "\n")
        self._pieces = []
        self._bytes = self._lead = 0
        self._mode = _NORMAL
        self._ended = True

    def next_event(self) -> AskEvent | None:
        """The next record, or ``None`` when none is available until more data arrives."""
        while not self._ready:
            if not self._blocks:
                return None
            self._ready.extend(self._batch(ASK_EVENT_MAX_RECORDS))
        return self._ready.popleft()  # type: ignore[no-any-return]

    def events(self) -> Iterator[AskEvent]:
        """Iterate over every record available now."""
        while (event := self.next_event()) is not None:
            yield event

    def pull(self, max_records: int = ASK_EVENT_MAX_RECORDS) -> tuple[AskEvent, ...]:
        """Decode at most ``max_records`` more lines and return their records.

        An empty result with :attr:`needs_data` false means those lines held no record: pull
        again. This bounds the work per call, so an async reader can yield between pulls.

        Raises:
            AgentsKitChatError: when ``max_records`` is not a positive integer.
        """
        if type(max_records) is not int or max_records < 1:
            raise AgentsKitChatError("max_records must be a positive integer.")
        if self._ready:
            ready = tuple(self._ready)
            self._ready.clear()
            return ready
        return tuple(self._batch(max_records))

    def _batch(self, limit: int) -> list[Any]:
        events: list[Any] = []
        blocks = self._blocks
        while limit and blocks:
            block = blocks[0]
            cursor, records = _scan(block, self._cursor, limit, events, self._memo)
            limit -= records
            if cursor >= len(block):
                blocks.popleft()
                self._cursor = 0
            else:
                self._cursor = cursor
        return events

    def _push(self, text: str) -> None:
        if not text:
            return
        if self._mode != _NORMAL:
            lf = text.find("\n")
            if self._mode == _LOCKED and not text[: lf if lf >= 0 else len(text)].strip(
                JS_WHITESPACE
            ):
                if lf < 0:
                    return  # still only whitespace after the line's content
                self._blocks.append(self._pieces[0] + "\n")
            elif lf < 0:
                # Discarding, or text after a locked line's padding: the line is oversized.
                self._pieces = []
                self._bytes = self._lead = 0
                self._mode = _DISCARD
                return
            self._pieces = []
            self._bytes = self._lead = 0
            self._mode = _NORMAL
            text = text[lf + 1 :]
            if not text:
                return
        lf = text.rfind("\n")
        if lf >= 0:
            self._blocks.append("".join(self._pieces) + text[: lf + 1])
            text = text[lf + 1 :]
            self._pieces = []
            self._bytes = self._lead = 0
            if not text:
                return
        self._extend(text)

    def _extend(self, text: str) -> None:
        """Add text to the unterminated line, keeping it within about 1 MiB."""
        if self._lead and not self._pieces:
            # Padding before the line's content is trimmed anyway: count it, do not keep it.
            stripped = text.lstrip(JS_WHITESPACE)
            self._lead += utf8_len(text) - utf8_len(stripped)
            text = stripped
            if not text:
                return
        self._pieces.append(text)
        self._bytes += utf8_len(text)
        if self._lead + self._bytes <= ASK_EVENT_MAX_BYTES:
            return
        if self._lead and self._bytes <= ASK_EVENT_MAX_BYTES:
            return
        line = "".join(self._pieces)
        core = line.strip(JS_WHITESPACE)
        if utf8_len(core) > ASK_EVENT_MAX_BYTES:
            # Whatever follows, the trimmed line is too long: drop it through its LF.
            self._pieces = []
            self._bytes = self._lead = 0
            self._mode = _DISCARD
            return
        stripped = line.lstrip(JS_WHITESPACE)
        self._lead += self._bytes - utf8_len(stripped)
        self._bytes = utf8_len(stripped)
        self._pieces = [stripped] if stripped else []
        if self._bytes > ASK_EVENT_MAX_BYTES:
            # Content plus trailing padding is over the bound: only whitespace may still
            # follow before the LF, or the line becomes oversized.
            self._pieces = [core]
            self._bytes = utf8_len(core)
            self._mode = _LOCKED
