"""Reading an Ask response body, sans-IO: NDJSON events or plain text (§3.4-3.5).

The client feeds transport bytes and takes items out: ``str`` pieces of plain text, or Ask
events. A ``content-type`` containing ``ndjson`` means NDJSON from the first byte; any other
type is sniffed from the body, so valid Ask NDJSON served as ``text/plain`` is still read as
events, and prose that merely looks like JSON is shown as text.
"""

from __future__ import annotations

import codecs
from typing import Final

from agentskit_chat.protocol import (
    ASK_EVENT_MAX_BYTES,
    ASK_EVENT_MAX_RECORDS,
    AskDoneEvent,
    AskErrorEvent,
    AskEventDecoder,
    AskTextEvent,
    AskToolEvent,
    decode_ask_events,
)
from agentskit_chat.protocol._json import utf8_len
from agentskit_chat.protocol._text import JS_WHITESPACE

__all__ = ["AskResponseReader", "ResponseItem"]

#: One thing read from the body: plain text to show, or an Ask event.
ResponseItem = str | AskTextEvent | AskToolEvent | AskDoneEvent | AskErrorEvent

_UNKNOWN: Final = "unknown"
_TEXT: Final = "text"
_NDJSON: Final = "ndjson"


def _utf8_decoder(*, at_start: bool) -> codecs.IncrementalDecoder:
    # Like TextDecoder: invalid sequences become U+FFFD, one leading BOM of the body is dropped.
    return codecs.getincrementaldecoder("utf-8-sig" if at_start else "utf-8")(errors="replace")


class AskResponseReader:
    """Decides how an Ask response body is read, and reads it.

    Sniffing (when the content type does not say ``ndjson``): as soon as the body has a
    non-whitespace character, a first character other than ``{`` means plain text. Otherwise
    the line holding that character is awaited (or the end of the body); if it decodes to at
    least one valid Ask event the body is NDJSON, else plain text. While undecided, more than
    1,048,576 UTF-8 bytes without a line feed are dropped together with the rest of their line,
    and sniffing starts over on the next line. A body that is empty or only whitespace yields
    nothing.

    NDJSON goes through the protocol's :class:`~agentskit_chat.protocol.AskEventDecoder`, which
    never drops a line (DECISIONS 15); :meth:`take` hands out the records of at most 4,096 lines
    at a time, so an async reader can yield to the loop between batches.

    Example:
        >>> reader = AskResponseReader("text/plain")
        >>> reader.feed(b'{"type":"text","delta":"hi"}\\n')
        >>> reader.end()
        >>> [item.type for item in reader.take()]
        ['text']
    """

    __slots__ = ("_bytes", "_decoder", "_discarding", "_mode", "_raw", "_text", "_texts", "_utf8")

    def __init__(self, content_type: str | None) -> None:
        ndjson = content_type is not None and "ndjson" in content_type.lower()
        self._mode = _NDJSON if ndjson else _UNKNOWN
        self._decoder = AskEventDecoder() if ndjson else None
        self._utf8 = _utf8_decoder(at_start=True)
        self._raw = bytearray()  # the undecided bytes, as received
        self._text = ""  # the same bytes, decoded
        self._bytes = 0  # UTF-8 size of ``_text``
        self._discarding = False
        self._texts: list[str] = []

    @property
    def mode(self) -> str:
        """``unknown`` while sniffing, then ``text`` or ``ndjson``."""
        return self._mode

    @property
    def needs_data(self) -> bool:
        """Whether :meth:`take` has nothing until more bytes (or the end) arrive."""
        if self._texts:
            return False
        return self._decoder is None or self._decoder.needs_data

    def feed(self, data: bytes) -> None:
        """Add transport bytes."""
        if self._decoder is not None:
            self._decoder.feed(data)
            return
        if self._mode == _TEXT:
            self._emit(self._utf8.decode(data))
            return
        if self._discarding:
            newline = data.find(b"\n")
            if newline < 0:
                return
            data = data[newline + 1 :]
            self._discarding = False
            self._utf8 = _utf8_decoder(at_start=False)
            if not data:
                return
        self._raw += data
        self._add(self._utf8.decode(data))
        self._sniff(ended=False)

    def end(self) -> None:
        """Mark the end of the body: a final unterminated line or text is read."""
        if self._decoder is not None:
            self._decoder.end_of_stream()
            return
        tail = self._utf8.decode(b"", True)
        if self._mode == _TEXT:
            self._emit(tail)
            return
        if self._discarding:
            return
        self._add(tail)
        self._sniff(ended=True)
        if self._decoder is not None:
            self._decoder.end_of_stream()

    def take(self) -> list[ResponseItem]:
        """Text pieces, or the events of at most 4,096 more lines; empty when none is ready.

        An empty result with :attr:`needs_data` false means those lines held no event: take
        again.
        """
        if self._texts:
            texts: list[ResponseItem] = list(self._texts)
            self._texts.clear()
            return texts
        if self._decoder is None or self._decoder.needs_data:
            return []
        return list(self._decoder.pull(ASK_EVENT_MAX_RECORDS))

    def _add(self, text: str) -> None:
        self._text += text
        self._bytes += utf8_len(text)

    def _emit(self, text: str) -> None:
        if text:
            self._texts.append(text)

    def _decide_text(self) -> None:
        self._mode = _TEXT
        self._emit(self._text)
        self._raw = bytearray()
        self._text = ""

    def _decide_ndjson(self) -> None:
        self._mode = _NDJSON
        self._decoder = AskEventDecoder()
        self._decoder.feed(bytes(self._raw))
        self._raw = bytearray()
        self._text = ""

    def _drop(self, through: int) -> None:
        """Forget the undecided text up to ``through`` (a LF) and the bytes it came from."""
        # Decoding never makes or swallows a LF byte, so the n-th LF of the text is the n-th
        # LF of the raw bytes.
        cut = 0
        for _ in range(self._text.count("\n", 0, through + 1)):
            cut = self._raw.index(b"\n", cut) + 1
        del self._raw[:cut]
        self._text = self._text[through + 1 :]
        self._bytes = utf8_len(self._text)

    def _sniff(self, *, ended: bool) -> None:
        while True:
            content = self._text.lstrip(JS_WHITESPACE)
            if not content:
                if not ended and self._bytes > ASK_EVENT_MAX_BYTES:
                    # Blank lines are nothing in either mode: keep no more than a line's
                    # worth, but keep the bytes of a character the decoder has only begun.
                    self._raw = bytearray(self._utf8.getstate()[0])
                    self._text = ""
                    self._bytes = 0
                if ended:
                    self._mode = _NDJSON
                    self._decoder = AskEventDecoder()
                return
            if content[0] != "{":
                self._decide_text()
                return
            start = len(self._text) - len(content)
            newline = self._text.find("\n", start)
            if newline < 0:
                if ended:
                    break
                if self._bytes > ASK_EVENT_MAX_BYTES:
                    self._raw = bytearray()
                    self._text = ""
                    self._bytes = 0
                    self._discarding = True
                return
            if utf8_len(self._text[:newline]) <= ASK_EVENT_MAX_BYTES:
                break
            # Over the bound before its LF, whatever the chunking: drop it, sniff the next line.
            self._drop(newline)
        line = content if newline < 0 else self._text[start:newline]
        if decode_ask_events(line + "\n").events:
            self._decide_ndjson()
        else:
            self._decide_text()
