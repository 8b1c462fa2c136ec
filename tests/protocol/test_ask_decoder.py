"""The Ask NDJSON decoders: the stateless reference function and the sans-IO stream decoder."""

from __future__ import annotations

import codecs
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import AgentsKitChatError
from agentskit_chat.protocol import _ask
from agentskit_chat.protocol._ask import ASK_EVENT_MAX_BYTES, ASK_EVENT_MAX_RECORDS
from agentskit_chat.protocol._ask_ndjson import AskEventDecoder, decode_ask_events
from agentskit_chat.protocol._decode import as_text
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.ask import ASK_CASES, build_large_cases
from tests._vectors import as_doubles, cases

MIB = ASK_EVENT_MAX_BYTES
DONE = '{"type":"done"}\n'


def wire(result: Any) -> Any:
    return as_doubles(result.to_wire())


def check_key_order(result: Any, expected_events: list[Any]) -> None:
    # The decoded value follows schema key order: its serialization is byte-exact.
    assert [e.to_json() for e in result.events] == [js_stringify(e) for e in expected_events]


# --- reference vectors ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("ask_ndjson"))
def test_vector(case: dict[str, Any]) -> None:
    given_input, expected = case["input"], case["expected"]
    if given_input["operation"] == "decode":
        result = decode_ask_events(given_input["buffer"])
        assert wire(result) == as_doubles(expected)
        check_key_order(result, expected["events"])
        return
    assert given_input["operation"] == "stream"
    rest, steps, events = "", [], []
    for chunk in given_input["chunks"]:
        result = decode_ask_events(rest + chunk)
        steps.append(result.to_wire())
        events.extend(result.to_wire()["events"])
        rest = result.rest
    if given_input["flush_with_newline"]:
        result = decode_ask_events(rest + "\n")
        steps.append(result.to_wire())
        events.extend(result.to_wire()["events"])
    assert len(steps) == len(expected["steps"])
    assert as_doubles(steps) == as_doubles(expected["steps"])
    assert as_doubles(events) == as_doubles(expected["events"])


def test_every_vector_is_run() -> None:
    assert len(cases("ask_ndjson")) == 19


@pytest.mark.parametrize("case", cases("ask_ndjson"))
def test_vector_through_the_stream_decoder(case: dict[str, Any]) -> None:
    """The sans-IO decoder agrees with every vector, except that it never drops a line."""
    given_input, expected = case["input"], case["expected"]
    decoder = AskEventDecoder()
    if given_input["operation"] == "decode":
        decoder.feed(given_input["buffer"].encode("utf-8", "surrogatepass"))
        got = [e.to_wire() for e in decoder.events()]
        if case["group"] == "record-limit":
            # The reference drops a line past its budget; here every line is decoded.
            dropped = given_input["buffer"].count("\n") - len(expected["events"])
            assert len(got) == len(expected["events"]) + dropped
            got = got[: len(expected["events"])]
        assert as_doubles(got) == as_doubles(expected["events"])
        return
    for chunk in given_input["chunks"]:
        decoder.feed(chunk.encode("utf-8"))
    if given_input["flush_with_newline"]:
        decoder.end_of_stream()
    assert as_doubles([e.to_wire() for e in decoder.events()]) == as_doubles(expected["events"])


# --- the spec's conformance cases (fixtures) ------------------------------------------------------


def run_stream_case(case: ConformanceCase) -> None:
    if case.operation == "constant":
        assert getattr(_ask, case.input) == case.value
        return
    assert case.operation == "decode_ask_events"
    result = decode_ask_events(case.input)
    assert wire(result) == as_doubles(case.value)
    check_key_order(result, case.value["events"])


DECODER_CASES = [c for c in ASK_CASES if c.operation in {"decode_ask_events", "constant"}]


@pytest.mark.parametrize("case", DECODER_CASES, ids=[c.name for c in DECODER_CASES])
def test_fixture_case(case: ConformanceCase) -> None:
    run_stream_case(case)


def test_large_fixture_cases() -> None:
    large = build_large_cases()
    assert len(large) == 8
    for case in large:
        run_stream_case(case)


# --- bounds of the stateless function -------------------------------------------------------------


def text_line(total_bytes: int, fill: str = "x") -> str:
    """A valid text record whose serialized line is exactly ``total_bytes`` UTF-8 bytes."""
    frame = '{"type":"text","delta":"' + '"}'
    return '{"type":"text","delta":"' + fill * (total_bytes - len(frame)) + '"}'


def test_line_of_exactly_the_limit_is_decoded_and_one_byte_more_is_skipped() -> None:
    assert len(decode_ask_events(text_line(MIB) + "\n").events) == 1
    assert decode_ask_events(text_line(MIB + 1) + "\n" + DONE).to_wire()["events"] == [
        {"type": "done"}
    ]


def test_line_limit_counts_utf8_bytes_of_astral_and_lone_surrogates() -> None:
    base = '{"type":"text","delta":"' + '"}'
    emoji_line = base[:-2] + "\U0001f600" * ((MIB - len(base)) // 4) + '"}'
    assert len(emoji_line.encode()) <= MIB
    assert len(decode_ask_events(emoji_line + "\n").events) == 1
    over = base[:-2] + "\U0001f600" * ((MIB - len(base)) // 4 + 1) + '"}'
    assert decode_ask_events(over + "\n").events == ()


@pytest.mark.parametrize(
    ("partial", "kept"),
    [
        ("x" * MIB, True),
        ("x" * (MIB + 1), False),
        ("\U0001f600" * (MIB // 4), True),
        ("\U0001f600" * (MIB // 4) + "x", False),
        ("\ud800" * (MIB // 3) + "x", True),  # a lone surrogate is 3 bytes (U+FFFD)
        ("\ud800" * (MIB // 3) + "xx", False),
        (" " * (MIB + 1), False),  # the partial is measured untrimmed
    ],
)
def test_partial_bound(partial: str, kept: bool) -> None:
    result = decode_ask_events(DONE + partial)
    assert result.to_wire()["events"] == [{"type": "done"}]
    assert result.rest == (partial if kept else "")
    assert result.discarded_partial is not kept


@pytest.mark.parametrize(("lines", "decoded"), [(4095, 4095), (4096, 4096), (4097, 4096)])
def test_record_budget(lines: int, decoded: int) -> None:
    result = decode_ask_events(DONE * lines + "tail")
    assert len(result.events) == decoded
    assert result.rest == "tail"


def test_budget_counts_blank_invalid_and_oversized_lines() -> None:
    buffer = "\n" * 1000 + "{bad}\n" * 1000 + (text_line(MIB + 1) + "\n") * 2 + DONE * 3000
    result = decode_ask_events(buffer)
    assert len(result.events) == ASK_EVENT_MAX_RECORDS - 2002


def test_budget_exhausted_exactly_at_the_last_line_keeps_the_partial() -> None:
    result = decode_ask_events(DONE * 4096 + '{"type":"do')
    assert (len(result.events), result.rest) == (4096, '{"type":"do')


def test_non_string_buffer_decodes_nothing() -> None:
    assert decode_ask_events(b'{"type":"done"}\n').to_wire() == {  # type: ignore[arg-type]
        "events": [],
        "rest": "",
        "discardedPartial": False,
    }


def test_split_on_lf_only_and_trim_with_the_javascript_set() -> None:
    buffer = (
        '{"type":"text","delta":"a"}\r\n'  # CR is trimmed
        '\u2028{"type":"text","delta":"b"}\u3000\n'  # JS whitespace trimmed
        '{"type":"text","delta":"c"}\x85\n'  # U+0085 is not JS whitespace
        '{"type":"text","delta":"d"}\u2029{"type":"done"}\n'  # not a line separator
    )
    assert [e.to_wire() for e in decode_ask_events(buffer).events] == [
        {"type": "text", "delta": "a"},
        {"type": "text", "delta": "b"},
    ]


# --- the sans-IO decoder --------------------------------------------------------------------------


def whole_buffer_reference(data: bytes) -> list[Any]:
    """The stateless function applied once to the whole stream, then the end-of-stream flush."""
    result = decode_ask_events(as_text(data))
    events = list(result.events)
    if not result.discarded_partial:
        events.extend(decode_ask_events(result.rest + "\n").events)
    return [e.to_wire() for e in events]


def reference_client_loop(chunks: list[bytes]) -> list[Any]:
    """The reference client's read loop: carry ``rest``, discard through LF, flush at the end."""
    utf8 = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    buffer, discarding, events = "", False, list[Any]()
    for chunk in [*chunks, None]:
        text = utf8.decode(b"", True) if chunk is None else utf8.decode(chunk)
        if discarding:
            lf = text.find("\n")
            if lf < 0:
                continue
            text, discarding = text[lf + 1 :], False
        result = decode_ask_events(buffer + text)
        events.extend(result.events)
        buffer, discarding = result.rest, result.discarded_partial
    if not discarding:
        events.extend(decode_ask_events(buffer + "\n").events)
    return [e.to_wire() for e in events]


def stream_decoder(chunks: list[bytes], *, pull: int | None = None) -> list[Any]:
    decoder = AskEventDecoder()
    events: list[Any] = []
    for chunk in chunks:
        decoder.feed(chunk)
        if pull is None:
            events.extend(decoder.events())
        else:
            while not decoder.needs_data:
                events.extend(decoder.pull(pull))
    decoder.end_of_stream()
    events.extend(decoder.events())
    return [e.to_wire() for e in events]


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


OVERSIZED = text_line(MIB + 1)
LINES = st.sampled_from(
    [
        '{"type":"text","delta":"h\u00e9llo \U0001f600"}',
        '{"type":"text","delta":""}',
        '{"type":"tool","id":"c1","name":"cite","args":{"sources":[{"title":"\u2713"}]}}',
        '{"type":"done","model":"m"}',
        '{"type":"error","message":"Boom","code":"E_FAIL","retryable":true}',
        '{"type":"done"}',
        "{bad}",
        '{"type":"text","delta":"ok","extra":1}',
        "",
        "  \u00a0",
        '\ufeff{"type":"text","delta":"bom"}\r',
        "\ud800",
        "\x85{}",
        OVERSIZED,
        "x" * (2 * MIB) + '{"type":"text","delta":"injected"}',
    ]
)


def stream_bytes(lines: list[str], final_newline: bool) -> bytes:
    text = "\n".join(lines) + ("\n" if final_newline else "")
    return text.encode("utf-8", "surrogatepass").replace(b"\xed\xa0\x80", b"\xed\xa0")


# Where to cut inside a line: a fraction of its bytes, or (-1) just before a record embedded
# after a prefix, the chunking that would inject it if discard-through-newline were missed.
FRACTIONS = st.lists(st.sampled_from([0.0, 0.3, 0.5, 0.87, 0.9, 0.99, 1.0, -1.0]), max_size=2)


def cuts_within(lines: list[tuple[str, list[float]]]) -> list[int]:
    """Cut positions inside each line, so long lines are split too."""
    cuts, start = [], 0
    for line, fractions in lines:
        size = len(line.encode("utf-8", "surrogatepass"))
        for fraction in fractions:
            embedded = line.find("{", 1)
            if fraction >= 0:
                cuts.append(start + int(size * fraction))
            elif embedded > 0 and line[:embedded].isascii():
                cuts.append(start + embedded)
        start += size + 1
    return cuts


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.tuples(LINES, FRACTIONS), max_size=12),
    final_newline=st.booleans(),
    small_cuts=st.lists(st.integers(0, 400), max_size=8),
    pull=st.sampled_from([None, 1, 3]),
)
def test_stream_decoder_is_chunking_invariant(
    lines: list[tuple[str, list[float]]],
    final_newline: bool,
    small_cuts: list[int],
    pull: int | None,
) -> None:
    data = stream_bytes([line for line, _ in lines], final_newline)
    expected = whole_buffer_reference(data)
    chunks = split(data, cuts_within(lines) + small_cuts)
    assert stream_decoder(chunks, pull=pull) == expected
    # Without padded lines, it also agrees with the reference client loop chunk for chunk.
    assert reference_client_loop(chunks) == expected


RECORD = '{"type":"text","delta":"r\u00e9"}'
PADDED_LINES = st.sampled_from(
    [
        RECORD,
        " " * 600000 + RECORD + "\u3000" * 200000,
        "\u00a0" * (MIB // 2 + 1) + RECORD,
        RECORD + " " * (MIB + 10),
        " " * (MIB - 40) + RECORD + " " * 40,
        " " * 600000 + RECORD + " " * 600000 + "x",
        "\t" * (MIB + 1),
        OVERSIZED,
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.tuples(PADDED_LINES, FRACTIONS), min_size=1, max_size=4),
    final_newline=st.booleans(),
)
def test_padded_lines_follow_the_whole_buffer_rule_for_any_chunking(
    lines: list[tuple[str, list[float]]], final_newline: bool
) -> None:
    stream = stream_bytes([line for line, _ in lines], final_newline)
    assert stream_decoder(split(stream, cuts_within(lines))) == whole_buffer_reference(stream)


def test_every_split_point_including_inside_multibyte_characters() -> None:
    data = (
        '\ufeff{"type":"text","delta":"\u00e9\u4e2d\U0001f600"}\n'.encode()
        + b"\xff\xc3"  # invalid bytes: U+FFFD, then the line is not JSON
        + '{"type":"tool","id":"\u00e9","name":"n","args":{"\U0001f600":"\u2713"}}\n'.encode()
        + '{"type":"done","model":"\u00e9"}'.encode()
    )
    expected = whole_buffer_reference(data)
    assert len(expected) == 2
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1, 7):
            assert stream_decoder([data[:i], data[i:j], data[j:]]) == expected
    assert stream_decoder([bytes([b]) for b in data]) == expected


def test_no_line_is_dropped_when_one_feed_holds_more_than_the_budget() -> None:
    decoder = AskEventDecoder()
    decoder.feed((DONE * 10000).encode())
    first = decoder.pull()
    assert len(first) == ASK_EVENT_MAX_RECORDS
    assert not decoder.needs_data
    rest = list(decoder.events())
    assert len(first) + len(rest) == 10000
    assert decoder.needs_data


def test_pull_bounds_the_work_per_call() -> None:
    decoder = AskEventDecoder()
    decoder.feed((("\n" * 5 + DONE) * 3).encode())
    assert [len(decoder.pull(4)) for _ in range(5)] == [0, 1, 1, 0, 1]
    assert decoder.needs_data
    with pytest.raises(AgentsKitChatError):
        decoder.pull(0)


def test_discard_through_next_newline_after_an_oversized_partial() -> None:
    decoder = AskEventDecoder()
    decoder.feed(b"x" * (MIB + 1))
    decoder.feed(b'{"type":"text","delta":"injected"}\n{"type":"text","delta":"safe"}\n')
    decoder.feed(DONE.encode())
    assert [e.to_wire() for e in decoder.events()] == [
        {"type": "text", "delta": "safe"},
        {"type": "done"},
    ]


def test_stream_ending_while_discarding_decodes_nothing_more() -> None:
    decoder = AskEventDecoder()
    decoder.feed(DONE.encode() + b"x" * (MIB + 1))
    decoder.feed(b'{"type":"done"}')
    decoder.end_of_stream()
    assert len(list(decoder.events())) == 1


def test_final_unterminated_record_is_flushed_once() -> None:
    decoder = AskEventDecoder()
    decoder.feed(b'{"type":"done","model":"m"}')
    assert decoder.next_event() is None
    decoder.end_of_stream()
    decoder.end_of_stream()
    assert [e.to_wire() for e in decoder.events()] == [{"type": "done", "model": "m"}]
    assert decoder.ended
    with pytest.raises(AgentsKitChatError):
        decoder.feed(b"\n")


def test_final_partial_of_exactly_the_limit_is_flushed_and_one_byte_more_is_not() -> None:
    for size, count in ((MIB, 1), (MIB + 1, 0)):
        decoder = AskEventDecoder()
        decoder.feed(text_line(size).encode())
        decoder.end_of_stream()
        assert len(list(decoder.events())) == count


def test_truncated_utf8_at_the_end_becomes_a_replacement_character() -> None:
    decoder = AskEventDecoder()
    decoder.feed(b'{"type":"text","delta":"a"}\n\xc3')
    decoder.end_of_stream()
    assert [e.to_wire() for e in decoder.events()] == [{"type": "text", "delta": "a"}]


PADDED = (" " * 600000 + '{"type":"text","delta":"padded"}' + "\u3000" * 200000).encode()


def test_padded_line_is_decoded_whatever_the_chunking() -> None:
    """A line whose trimmed text fits is decoded even when its padding exceeds 1 MiB.

    The reference client loop would discard it when a chunk boundary falls after 1 MiB of it;
    the whole-buffer rule keeps it, and the sans-IO decoder follows the whole-buffer rule so
    that chunk boundaries never matter.
    """
    data = PADDED + b"\n" + DONE.encode()
    expected = [{"type": "text", "delta": "padded"}, {"type": "done"}]
    assert whole_buffer_reference(data) == expected
    for cut in (1, 599999, 600010, MIB + 3, len(PADDED) - 2, len(PADDED)):
        chunks = [data[:cut], data[cut:]]
        assert stream_decoder(chunks) == expected
        assert stream_decoder(split(data, [cut, cut + 70000, cut + 400000])) == expected
    assert reference_client_loop([data[: MIB + 3], data[MIB + 3 :]]) == [{"type": "done"}]


def test_padded_line_followed_by_more_content_is_oversized() -> None:
    data = PADDED + b"x\n" + DONE.encode()
    assert whole_buffer_reference(data) == [{"type": "done"}]
    for cut in (MIB + 3, len(PADDED), len(PADDED) + 1):
        assert stream_decoder([data[:cut], data[cut:]]) == [{"type": "done"}]


def test_padded_final_line_longer_than_the_limit_is_not_flushed() -> None:
    for data in (PADDED, b" " * (MIB + 1) + b'{"type":"done"}'):
        assert whole_buffer_reference(data) == []
        assert stream_decoder([data[: MIB + 2], data[MIB + 2 :]]) == []
        assert stream_decoder([data]) == []


def test_leading_padding_alone_over_the_limit_then_content() -> None:
    data = b" " * (MIB + 10) + b'{"type":"done","model":"late"}\n'
    expected = [{"type": "done", "model": "late"}]
    assert whole_buffer_reference(data) == expected
    assert stream_decoder(split(data, [MIB + 1, MIB + 5, MIB + 12])) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_stream_decoder_never_raises_on_arbitrary_bytes(chunks: list[bytes]) -> None:
    decoder = AskEventDecoder()
    for chunk in chunks:
        decoder.feed(chunk)
        decoder.pull()
    decoder.end_of_stream()
    list(decoder.events())


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=200))
def test_stateless_decoder_never_raises_on_arbitrary_text(buffer: str) -> None:
    result = decode_ask_events(buffer + "\n" + buffer)
    assert isinstance(result.rest, str)


@pytest.mark.parametrize(
    "line",
    [
        "[" * 200000 + "]" * 200000,
        '{"type":"tool","id":"i","name":"n","args":{"a":' + "[" * 50000 + "]" * 50000 + "}}",
        '{"type":"text","delta":1e400}',
        '{"type":"text","delta":' + "9" * 400 + "}",
        '{"type":"tool","id":"i","name":"n","args":{"big":1e400,"huge":' + "9" * 400 + "}}",
    ],
)
def test_hostile_lines_never_raise(line: str) -> None:
    decode_ask_events(line + "\n")
    decoder = AskEventDecoder()
    decoder.feed(line.encode() + b"\n")
    list(decoder.events())
