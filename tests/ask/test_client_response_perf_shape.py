"""How much work the Ask response reader does, and that its shortcuts change no verdict.

Sniffing waits for the first line of a body that is not declared NDJSON. A reader that looked
at the whole undecided buffer on every read did quadratic work when that line arrived in many
small reads (1 MB in 64-byte reads took most of a second). These tests count the characters
the sniffer examines, never the time it takes, and compare its verdicts with a straightforward
model of the same rules that rescans everything on every read.

Decoding takes shortcuts too: the commonest text line is read without building an object, and
each decoder remembers its recent short lines with their records. They are compared here with
plain full validation of every line, on generated lines and streams.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.ask import _client_response
from agentskit_chat.ask._client_response import AskResponseReader, ResponseItem
from agentskit_chat.protocol import (
    ASK_EVENT_MAX_BYTES,
    AskEventDecoder,
    _ask_ndjson,
    decode_ask_events,
    validate_ask_event,
)
from agentskit_chat.protocol._json import js_stringify, parse_json_text, utf8_len
from agentskit_chat.protocol._text import JS_WHITESPACE, combine_surrogates

# --- the work the sniffer does --------------------------------------------------------------------


@contextmanager
def counted() -> Iterator[list[int]]:
    """Count the characters handed to every helper through which the sniffer reads text."""
    seen = [0]

    def content_at(piece: str) -> int:
        seen[0] += len(piece)
        return real_content_at(piece)

    def line_end(piece: str, start: int) -> int:
        seen[0] += len(piece) - start
        return real_line_end(piece, start)

    def measure(text: str) -> int:
        seen[0] += len(text)
        return utf8_len(text)

    real_content_at = _client_response._content_at
    real_line_end = _client_response._line_end
    with (
        mock.patch.object(_client_response, "_content_at", content_at),
        mock.patch.object(_client_response, "_line_end", line_end),
        mock.patch.object(_client_response, "utf8_len", measure),
    ):
        yield seen


def sniffing_work(first_line: bytes, *, reads: int, prefix: bytes = b"") -> int:
    """Characters examined while ``reads`` 64-byte reads of an unfinished first line arrive."""
    body = prefix + first_line[: reads * 64 - len(prefix)]
    reader = AskResponseReader("text/plain")
    with counted() as seen:
        for start in range(0, len(body), 64):
            reader.feed(body[start : start + 64])
    assert reader.mode == "unknown"  # still waiting for the line feed
    return seen[0]


LINE = b'{"type":"text","delta":"' + b"x" * 2_000_000
WIDE = b'{"type":"text","delta":"' + "é€😀".encode() * 200_000


@pytest.mark.parametrize(
    ("first_line", "prefix"),
    [(LINE, b""), (WIDE, b""), (LINE, b" \r\n\t" * 1000), (LINE, "\u3000\n".encode() * 1000)],
    ids=["ascii", "multibyte", "blank-lines-first", "unicode-blanks-first"],
)
def test_sniffing_work_grows_linearly_with_the_reads(first_line: bytes, prefix: bytes) -> None:
    small = sniffing_work(first_line, reads=2_000, prefix=prefix)
    large = sniffing_work(first_line, reads=8_000, prefix=prefix)
    # Every character is looked at a bounded number of times; rescanning the buffer on each
    # read would make four times the reads cost sixteen times the work.
    assert small <= 3 * 2_000 * 64
    assert large <= 4.2 * small


def test_the_line_is_decided_once_its_line_feed_arrives_in_small_reads() -> None:
    body = b'{"type":"text","delta":"' + b"y" * 500_000 + b'"}\n{"type":"done"}\n'
    reader = AskResponseReader("text/plain")
    with counted() as seen:
        for start in range(0, len(body), 64):
            reader.feed(body[start : start + 64])
    assert reader.mode == "ndjson"
    assert seen[0] <= 3 * len(body)
    reader.end()
    items: list[ResponseItem] = []
    while not reader.needs_data:
        items.extend(reader.take())
    assert [item.to_wire() for item in items if not isinstance(item, str)] == [
        {"type": "text", "delta": "y" * 500_000},
        {"type": "done"},
    ]


# --- the same verdicts as the plain model of the rules --------------------------------------------


class ModelReader:
    """The sniffing rules written plainly: the whole undecided text is rescanned on each read."""

    def __init__(self, content_type: str | None, bound: int) -> None:
        ndjson = content_type is not None and "ndjson" in content_type.lower()
        self.bound = bound
        self.mode = "ndjson" if ndjson else "unknown"
        self.decoder = AskEventDecoder() if ndjson else None
        self.utf8 = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self.raw = bytearray()
        self.text = ""
        self.discarding = False
        self.texts: list[str] = []

    @property
    def needs_data(self) -> bool:
        return not self.texts and (self.decoder is None or self.decoder.needs_data)

    def feed(self, data: bytes) -> None:
        if self.decoder is not None:
            self.decoder.feed(data)
            return
        if self.mode == "text":
            self.emit(self.utf8.decode(data))
            return
        if self.discarding:
            newline = data.find(b"\n")
            if newline < 0:
                return
            data = data[newline + 1 :]
            self.discarding = False
            self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
            if not data:
                return
        self.raw += data
        self.text += self.utf8.decode(data)
        self.sniff(ended=False)

    def end(self) -> None:
        if self.decoder is not None:
            self.decoder.end_of_stream()
            return
        tail = self.utf8.decode(b"", True)
        if self.mode == "text":
            self.emit(tail)
            return
        if self.discarding:
            return
        self.text += tail
        self.sniff(ended=True)
        if self.decoder is not None:
            self.decoder.end_of_stream()

    def take(self) -> list[ResponseItem]:
        if self.texts:
            texts: list[ResponseItem] = list(self.texts)
            self.texts.clear()
            return texts
        if self.decoder is None or self.decoder.needs_data:
            return []
        return list(self.decoder.pull())

    def emit(self, text: str) -> None:
        if text:
            self.texts.append(text)

    def sniff(self, *, ended: bool) -> None:
        while True:
            content = self.text.lstrip(JS_WHITESPACE)
            if not content:
                if not ended and utf8_len(self.text) > self.bound:
                    self.raw = bytearray(self.utf8.getstate()[0])
                    self.text = ""
                if ended:
                    self.mode = "ndjson"
                    self.decoder = AskEventDecoder()
                return
            if content[0] != "{":
                self.decide(ndjson=False)
                return
            start = len(self.text) - len(content)
            newline = self.text.find("\n", start)
            if newline < 0:
                if ended:
                    break
                if utf8_len(self.text) > self.bound:
                    self.raw = bytearray()
                    self.text = ""
                    self.discarding = True
                return
            if utf8_len(self.text[:newline]) <= self.bound:
                break
            cut = 0
            for _ in range(self.text.count("\n", 0, newline + 1)):
                cut = self.raw.index(b"\n", cut) + 1
            del self.raw[:cut]
            self.text = self.text[newline + 1 :]
        line = content if newline < 0 else self.text[start:newline]
        self.decide(ndjson=bool(decode_ask_events(line + "\n").events))

    def decide(self, *, ndjson: bool) -> None:
        if ndjson:
            self.mode = "ndjson"
            self.decoder = AskEventDecoder()
            self.decoder.feed(bytes(self.raw))
        else:
            self.mode = "text"
            self.emit(self.text)
        self.raw = bytearray()
        self.text = ""


def read(reader: Any, pieces: Sequence[bytes]) -> tuple[str, list[Any]]:
    """Feed the pieces, taking items whenever some are ready; the mode and the items joined."""
    out: list[Any] = []
    for piece in [*pieces, None]:
        if piece is None:
            reader.end()
        else:
            reader.feed(piece)
        while not reader.needs_data:
            for item in reader.take():
                if isinstance(item, str) and out and isinstance(out[-1], str):
                    out[-1] += item
                else:
                    out.append(item if isinstance(item, str) else item.to_wire())
    mode: str = reader.mode
    return mode, out


def both(content_type: str | None, pieces: Sequence[bytes], bound: int) -> None:
    with mock.patch.object(_client_response, "ASK_EVENT_MAX_BYTES", bound):
        ours = read(AskResponseReader(content_type), pieces)
    assert ours == read(ModelReader(content_type, bound), pieces)


# With the line bound lowered to a few dozen bytes, short bodies reach every rule: blank text
# past the bound, a first line dropped before or after its line feed, discarding to the next
# line, and characters split across reads.
SMALL_BOUND = 40
FRAGMENTS = st.sampled_from(
    [
        b'{"type":"text","delta":"hi"}\n',
        b'{"type":"done"}\n',
        b'{"type":"text","delta":"' + "é".encode() * 12 + b'"}\n',
        b"{bad}\n",
        b'{"this":"is prose"}\n',
        b"{" + b"x" * 45,
        b"{" + b"x" * 20,
        b"\n",
        b"\r\n",
        b"  \t",
        b" " * 30,
        b" ",
        b"x",
        b"{",
        b"\xef\xbb\xbf",
        "\u2028\u00a0\u3000".encode(),
        b"prose ",
        b"caf\xc3\xa9",
        b"\xf0\x9f\x98",
        b"\x80",
        b"\xff",
    ]
)


@settings(max_examples=500)
@given(
    st.lists(FRAGMENTS, max_size=16),
    st.sampled_from([None, "text/plain", "application/x-ndjson"]),
    st.data(),
)
def test_verdicts_match_the_plain_model_whatever_the_reads(
    parts: list[bytes], content_type: str | None, data: st.DataObject
) -> None:
    body = b"".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(min_value=0, max_value=len(body)), max_size=8)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    both(content_type, pieces, SMALL_BOUND)


# Bodies whose meaning hangs on one byte at the bound, read in every possible two or three
# reads: a read that ends exactly at the bound, or inside a character, takes every branch.
EDGES = [
    b" " * 41 + b"prose",
    b" " * 41 + "\u2028".encode() + b'{"type":"done"}\n',
    b"{" + b"x" * 39 + b'\n{"type":"done"}\n',
    b"{" + b"x" * 40 + b'\n{"type":"done"}\n',
    b"\n" * 4 + b'{"type":"text","delta":"abcdefghijkl"}\n{"type":"done"}\n',
    b"{" + "é".encode() * 20 + b'\n{"type":"done"}\n',
]


@pytest.mark.parametrize("body", EDGES, ids=range(len(EDGES)))
def test_verdicts_match_the_plain_model_for_every_split(body: bytes) -> None:
    for first in range(len(body) + 1):
        for second in range(first, len(body) + 1):
            both("text/plain", [body[:first], body[first:second], body[second:]], SMALL_BOUND)


def _chunked(size: int) -> Callable[[bytes], list[bytes]]:
    return lambda body: [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize(
    "body",
    [
        b"\n" * 1_048_570 + b'{"type":"text","delta":"after blank lines"}\n',
        b" " * 1_048_577 + b'{"type":"text","delta":"after blanks"}\n',
        b"{" + b"x" * 1_048_576 + b'\n{"type":"done"}\n',
        b'{"type":"text","delta":"' + b"x" * 1_048_540 + b'"}\n{"type":"done"}\n',
        b"{" + b"\xe2\x82" * 600_000 + b'\n{"type":"done"}\n',
    ],
    ids=["blank-lines", "blank-overflow", "over-by-one", "at-bound", "invalid-bytes"],
)
@pytest.mark.parametrize("size", [32768, 1048577])
def test_verdicts_match_the_plain_model_at_the_real_bound(body: bytes, size: int) -> None:
    both("text/plain", _chunked(size)(body), ASK_EVENT_MAX_BYTES)


# --- the decoder's shortcuts against full validation ---------------------------------------------


def fully_decoded(text: str) -> list[Any]:
    """Every complete line trimmed, bounded, parsed and validated in full: no shortcut."""
    events = []
    for line in text.split("\n")[:-1]:
        core = line.strip(JS_WHITESPACE)
        if not core or utf8_len(combine_surrogates(core)) > ASK_EVENT_MAX_BYTES:
            continue
        try:
            value = parse_json_text(core)
        except Exception:
            continue
        event = validate_ask_event(value)
        if event is not None:
            events.append(event)
    return events


def shapes(events: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(type(e), e.to_json(), e.to_wire(), e.model_fields_set) for e in events]


HEAD = '{"type":"text","delta":'
CHARS = st.characters(exclude_categories=())
DELTA = st.text(CHARS, max_size=12).map(combine_surrogates)
TOKEN = st.one_of(
    DELTA.map(js_stringify),
    DELTA.map(lambda text: js_stringify(text) + " "),
    DELTA.map(lambda text: "\t" + js_stringify(text)),
    st.text(
        st.sampled_from(['"', "\\", "u", "d", "8", "0", "a", " ", "é", "\x00", ","]), max_size=10
    ),
    st.sampled_from(
        [
            '"a","delta":"b"',
            '"a","type":"done"',
            '"\\ud800"',
            '"\\ud83d\\ude00"',
            '"\\u0000"',
            "1",
            "null",
            '""',
            '"}',
        ]
    ),
)
RECORD = st.one_of(
    st.builds(lambda delta: {"type": "text", "delta": delta}, DELTA),
    st.fixed_dictionaries({"type": st.just("text"), "delta": DELTA}, optional={"x": st.integers()}),
    st.fixed_dictionaries({"type": st.just("done")}, optional={"model": DELTA}),
    st.fixed_dictionaries(
        {"type": st.just("tool"), "id": DELTA, "name": DELTA, "args": st.just({"k": [1]})}
    ),
    st.fixed_dictionaries({"type": st.just("error"), "message": DELTA}),
    st.dictionaries(st.sampled_from(["type", "delta", "model"]), DELTA, max_size=3),
)
PADDING = st.text(st.sampled_from([" ", "\t", "\r", "\u3000", "\ufeff", "\u2028"]), max_size=2)
ASK_LINE = st.one_of(
    RECORD.map(js_stringify),
    TOKEN.map(lambda token: HEAD + token + "}"),
    st.tuples(PADDING, RECORD.map(js_stringify), PADDING).map("".join),
    st.sampled_from(["", "{bad}", "[]", HEAD, HEAD + "}"]),
)


@settings(max_examples=400)
@given(ASK_LINE)
def test_one_line_decodes_as_full_validation_does(line: str) -> None:
    text = line + "\n"
    assert shapes(decode_ask_events(text).events) == shapes(fully_decoded(text))


@settings(max_examples=300)
@given(
    st.lists(ASK_LINE, min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=5), max_size=40),
    st.tuples(
        st.sampled_from([_ask_ndjson._MEMO_ENTRIES, 2]),
        st.sampled_from([_ask_ndjson._COUNTED_SPAN, 8]),
        st.integers(min_value=1, max_value=5),
    ),
    st.data(),
)
def test_streams_with_repeated_lines_decode_as_full_validation_does(
    pool: list[str],
    picks: list[int],
    knobs: tuple[int, int, int],
    data: st.DataObject,
) -> None:
    # Repeats come back from the memo, a tiny memo starts over again and again, and a tiny
    # span and small pulls take the paths of long runs and of the line budget.
    text = "".join(pool[pick % len(pool)] + "\n" for pick in picks)
    body = text.encode("utf-8", "surrogatepass")
    cuts = sorted(data.draw(st.sets(st.integers(min_value=0, max_value=len(body)), max_size=5)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    entries, span, batch = knobs
    expected = shapes(fully_decoded(text))
    with (
        mock.patch.object(_ask_ndjson, "_MEMO_ENTRIES", entries),
        mock.patch.object(_ask_ndjson, "_COUNTED_SPAN", span),
    ):
        assert shapes(decode_ask_events(text).events) == expected
        decoder = AskEventDecoder()
        events: list[Any] = []
        for piece in [*pieces, None]:
            if piece is None:
                decoder.end_of_stream()
            else:
                decoder.feed(piece)
            while not decoder.needs_data:
                pulled = decoder.pull(batch)
                assert len(pulled) <= batch  # a pull works through at most ``batch`` lines
                events.extend(pulled)
    # The decoder reads bytes, so a lone surrogate written raw arrives as replacement marks.
    assert shapes(events) == shapes(fully_decoded(body.decode("utf-8", "replace")))


def test_the_memo_of_a_decoder_stays_bounded() -> None:
    decoder = AskEventDecoder()
    decoder.feed(b"".join(b'{"type":"text","delta":"%d"}\n' % n for n in range(10_000)))
    deltas = [event.delta for event in decoder.events()]  # type: ignore[union-attr]
    assert deltas == [str(n) for n in range(10_000)]
    assert len(decoder._memo) <= _ask_ndjson._MEMO_ENTRIES
