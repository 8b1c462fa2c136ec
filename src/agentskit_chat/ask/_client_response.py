"""Reading an Ask response body, sans-IO: NDJSON events or plain text.

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
    never drops a line; :meth:`take` hands out the records of at most 4,096 lines at a time,
    so an async reader can yield to the loop between batches.

    Example:
        >>> reader = AskResponseReader("text/plain")
        >>> reader.feed(b'{"type":"text","delta":"hi"}\\n')
        >>> reader.end()
        >>> [item.type for item in reader.take()]
        ['text']
    """

    __slots__ = (
        "_bytes",
        "_decoder",
        "_discarding",
        "_mode",
        "_pieces",
        "_raw",
        "_start",
        "_texts",
        "_utf8",
    )

    def __init__(self, content_type: str | None) -> None:
        ndjson = content_type is not None and "ndjson" in content_type.lower()
        self._mode = _NDJSON if ndjson else _UNKNOWN
        self._decoder = AskEventDecoder() if ndjson else None
        self._utf8 = _utf8_decoder(at_start=True)
        # The undecided part of the body: its bytes as received, and the same bytes decoded,
        # kept as the pieces they arrived in so that each read only looks at its own text.
        self._raw = bytearray()
        self._pieces: list[str] = []
        self._bytes = 0  # UTF-8 size of the pieces
        # Where the first non-whitespace character (always ``{``) is, as (piece, offset);
        # ``None`` while the undecided text is only whitespace.
        self._start: tuple[int, int] | None = None
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
        self._sniff(self._utf8.decode(data), ended=False)

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
        self._sniff(tail, ended=True)
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

    def _emit(self, text: str) -> None:
        if text:
            self._texts.append(text)

    def _forget(self, keep: int = 0) -> None:
        """Forget the undecided text, and all but the last ``keep`` bytes it came from."""
        del self._raw[: len(self._raw) - keep]
        self._pieces = []
        self._bytes = 0
        self._start = None

    def _decide_text(self) -> None:
        self._mode = _TEXT
        self._emit("".join(self._pieces))
        self._forget()

    def _decide(self, line: str) -> None:
        """Decide by the first line: NDJSON when it holds an Ask event, else plain text."""
        if not decode_ask_events(line + "\n").events:
            self._decide_text()
            return
        self._mode = _NDJSON
        self._decoder = AskEventDecoder()
        self._decoder.feed(bytes(self._raw))
        self._forget()

    def _line(self, end: int | None) -> str:
        """The undecided text from its first non-whitespace character to ``end`` of the last
        piece (its whole end when ``None``)."""
        assert self._start is not None
        first, offset = self._start
        pieces = self._pieces
        if first == len(pieces) - 1:
            return pieces[first][offset:end]
        return "".join([pieces[first][offset:], *pieces[first + 1 : -1], pieces[-1][:end]])

    def _drop(self, newline: int) -> str:
        """Forget the undecided text through the LF at ``newline`` of the last piece (and the
        bytes it came from); return the rest of that piece."""
        rest = self._pieces[-1][newline + 1 :]
        # Decoding never makes or swallows a LF byte, and the bytes after the last decoded
        # character only begin a character: the k-th LF from the end of the text is the k-th
        # from the end of the raw bytes. Counting from the end costs only the current read.
        cut = len(self._raw)
        for _ in range(rest.count("\n") + 1):
            cut = self._raw.rfind(b"\n", 0, cut)
        self._forget(len(self._raw) - cut - 1)
        return rest

    def _sniff(self, piece: str, *, ended: bool) -> None:
        """Take in newly decoded text and decide the mode as soon as it can be decided.

        Only the new piece is examined (and the pieces joined once, when deciding), so a
        first line fed in many small reads costs time in proportion to its length.
        """
        while True:
            before = self._bytes
            if piece:
                self._pieces.append(piece)
                self._bytes += utf8_len(piece)
            if self._start is None:
                offset = _content_at(piece)
                if offset == len(piece):
                    # Only whitespace so far: blank lines are nothing in either mode.
                    if ended:
                        self._mode = _NDJSON
                        self._decoder = AskEventDecoder()
                    elif self._bytes > ASK_EVENT_MAX_BYTES:
                        # Keep no more than a line's worth, but keep the bytes of a character
                        # the decoder has only begun (always the last bytes received).
                        self._forget(len(self._utf8.getstate()[0]))
                    return
                if piece[offset] != "{":
                    self._decide_text()
                    return
                self._start = (len(self._pieces) - 1, offset)
                newline = _line_end(piece, offset)
            else:
                newline = _line_end(piece, 0)
            if newline < 0:
                if ended:
                    self._decide(self._line(None))
                elif self._bytes > ASK_EVENT_MAX_BYTES:
                    self._forget()
                    self._discarding = True
                return
            if before + utf8_len(piece[:newline]) <= ASK_EVENT_MAX_BYTES:
                self._decide(self._line(newline))
                return
            # Over the bound before its LF, whatever the chunking: drop it, sniff the next line.
            piece = self._drop(newline)


# Every look the sniffer takes at undecided text goes through these two helpers (and
# ``utf8_len``), always on text it has not examined before.


def _content_at(piece: str) -> int:
    """The index of the first non-whitespace character of ``piece``, or its length."""
    return len(piece) - len(piece.lstrip(JS_WHITESPACE))


def _line_end(piece: str, start: int) -> int:
    """The index of the first LF of ``piece`` from ``start``, or -1."""
    return piece.find("\n", start)
