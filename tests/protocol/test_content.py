"""Ordered assistant content ``agentskit.chat.content/1`` (fixtures, extra cases, vectors)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol._component import decode_component_frame
from agentskit_chat.protocol._content import (
    ASSISTANT_CONTENT_PREFIX,
    ASSISTANT_CONTENT_PREFIX_ROOT,
    ComponentPart,
    ContentDecoded,
    TextPart,
    create_assistant_content_encoder,
    decode_assistant_content,
    is_assistant_content_candidate,
)
from agentskit_chat.protocol._json import parse_json_text
from agentskit_chat.protocol._result import Rejected
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.component import VALID_CHOICE_LIST_FRAME
from agentskit_chat.protocol.fixtures.content import CONTENT_CASES, GOLDEN_ASSISTANT_CONTENT
from tests._vectors import as_doubles, cases, family


def outcome(result: Any) -> dict[str, Any]:
    """A decode result in the vectors' shape."""
    if isinstance(result, ContentDecoded):
        return {
            "ok": True,
            "parts": [part.to_wire() for part in result.parts],
            "complete": result.complete,
        }
    assert isinstance(result, Rejected)
    assert result.diagnostic.retryable is False
    return {"ok": False, "code": result.diagnostic.code, "message": result.diagnostic.message}


def test_vector_count() -> None:
    doc = family("assistant_content")
    assert len(doc["cases"]) == doc["case_count"] == 40
    assert doc["prefix"] == ASSISTANT_CONTENT_PREFIX


@pytest.mark.parametrize("case", cases("assistant_content"))
def test_vector(case: dict[str, Any]) -> None:
    spec, expected = case["input"], case["expected"]
    if spec["operation"] == "decode":
        got = outcome(decode_assistant_content(spec["payload"]))
        assert as_doubles(got) == as_doubles(expected)
        return
    encoder = create_assistant_content_encoder()
    outputs: list[dict[str, Any]] = []
    emitted = ""
    for part_json in spec["parts_json"]:
        try:
            output = encoder.encode(parse_json_text(part_json))
        except ProtocolError:
            outputs.append({"ok": False, "throws": True})
        else:
            outputs.append({"ok": True, "output": output})
            emitted += output
    assert outputs == expected["outputs"]
    if "roundtrip" in expected:
        roundtrip = outcome(decode_assistant_content(emitted))
        assert as_doubles(roundtrip) == as_doubles(expected["roundtrip"])


@pytest.mark.parametrize("case", CONTENT_CASES, ids=lambda c: c.name)
def test_conformance_case(case: ConformanceCase) -> None:
    if case.operation == "decode_assistant_content":
        got = outcome(decode_assistant_content(case.input))
        if case.expect == "ok":
            assert got == {"ok": True, **case.value}
        else:
            assert got == {"ok": False, "code": case.code, "message": case.message}
    elif case.operation == "encode_assistant_content":
        encoder = create_assistant_content_encoder()
        assert "".join(encoder.encode(part) for part in case.input) == case.value
    else:
        assert case.operation == "encode_assistant_content_part"
        with pytest.raises(ProtocolError) as info:
            create_assistant_content_encoder().encode(case.input)
        assert info.value.code == case.code


def test_golden_round_trip() -> None:
    result = decode_assistant_content(GOLDEN_ASSISTANT_CONTENT)
    assert isinstance(result, ContentDecoded)
    assert result.complete
    encoder = create_assistant_content_encoder()
    assert "".join(encoder.encode(part) for part in result.parts) == GOLDEN_ASSISTANT_CONTENT
    assert GOLDEN_ASSISTANT_CONTENT.count("\n") == 3  # the newline inside the text is escaped


def test_encoder_accepts_models_and_emits_the_prefix_once() -> None:
    frame = decode_component_frame(VALID_CHOICE_LIST_FRAME).unwrap()
    encoder = create_assistant_content_encoder()
    with pytest.raises(ProtocolError):
        encoder.encode({"kind": "text", "text": ""})
    first = encoder.encode(ComponentPart(kind="component", frame=frame))
    second = encoder.encode(TextPart(kind="text", text="after"))
    assert first.startswith(ASSISTANT_CONTENT_PREFIX)
    assert not second.startswith("\x1e")
    assert second == '{"kind":"text","text":"after"}\n'
    bad: Any
    for bad in (None, [], "text", {"kind": "text"}, {"kind": "component", "frame": None}):
        with pytest.raises(ProtocolError):
            encoder.encode(bad)


def test_decoded_parts_revalidate() -> None:
    payload = (
        ASSISTANT_CONTENT_PREFIX
        + '{"kind":"text","text":"' + "a" * 16384 + '"}\n'
        + '{"kind":"text","text":"' + "b" * 16384 + '"}\n'
    )  # fmt: skip
    result = decode_assistant_content(payload)
    assert isinstance(result, ContentDecoded)
    assert [len(p.text) for p in result.parts if isinstance(p, TextPart)] == [16384, 16384]
    for part in result.parts:
        assert TextPart.model_validate(part.to_wire(), by_alias=True) == part


def test_text_bound_in_utf16_units() -> None:
    encoder = create_assistant_content_encoder()
    assert encoder.encode({"kind": "text", "text": "😀" * 8192})
    with pytest.raises(ProtocolError):
        encoder.encode({"kind": "text", "text": "😀" * 8192 + "a"})


def test_bytes_and_str_agree() -> None:
    payload = ASSISTANT_CONTENT_PREFIX + '{"kind":"text","text":"é😀"}\n{"kind"'
    assert outcome(decode_assistant_content(payload.encode())) == outcome(
        decode_assistant_content(payload)
    )
    # A surrogate pair held as two code points is one astral character, as in JavaScript.
    split_pair = payload.replace("😀", "\ud83d\ude00")
    assert outcome(decode_assistant_content(split_pair)) == outcome(
        decode_assistant_content(payload)
    )


def test_prefix_never_stripped_or_split_as_python_would() -> None:
    # U+2028, U+001E and U+0085 are line breaks for str.splitlines but not record separators.
    text = "a\u2028b\x1ec\x85d"
    encoded = create_assistant_content_encoder().encode({"kind": "text", "text": text})
    result = decode_assistant_content(encoded)
    assert isinstance(result, ContentDecoded)
    assert [p.to_wire() for p in result.parts] == [{"kind": "text", "text": text}]


def test_candidate_check() -> None:
    assert is_assistant_content_candidate("\x1e")
    assert is_assistant_content_candidate(ASSISTANT_CONTENT_PREFIX_ROOT + "9\n")
    assert is_assistant_content_candidate(b"\x1eanything")
    assert not is_assistant_content_candidate("")
    assert not is_assistant_content_candidate(" \x1e")
    assert not is_assistant_content_candidate(None)
    assert not is_assistant_content_candidate(42)


# --- properties ----------------------------------------------------------------------------------

MARKER = "Qx4MARKERv8z"
texts = st.text(min_size=1, max_size=60)
frame_parts = st.builds(
    lambda key, props, summary: {
        "kind": "component",
        "frame": {**VALID_CHOICE_LIST_FRAME, "componentKey": key, "props": props}
        | {"fallback": {"kind": key, "summary": summary}},
    },
    st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=20,
    ),
    texts,
)
parts = st.lists(st.builds(lambda t: {"kind": "text", "text": t}, texts) | frame_parts, max_size=8)


def encode_all(items: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """The stream for ``items`` and the offset just after each record."""
    encoder = create_assistant_content_encoder()
    stream = ""
    ends: list[int] = []
    for item in items:
        stream += encoder.encode(item)
        ends.append(len(stream))
    return stream, ends


@settings(max_examples=150)
@given(parts)
def test_encode_decode_round_trip(items: list[dict[str, Any]]) -> None:
    stream, _ = encode_all(items)
    result = decode_assistant_content(stream)
    if not items:
        assert stream == ""
        assert isinstance(result, Rejected)
        return
    assert isinstance(result, ContentDecoded)
    assert result.complete
    assert as_doubles([p.to_wire() for p in result.parts]) == as_doubles(items)


@settings(max_examples=100)
@given(parts.filter(bool), st.lists(st.integers(min_value=0), max_size=10))
def test_every_prefix_decodes_to_a_prefix(items: list[dict[str, Any]], cuts: list[int]) -> None:
    stream, ends = encode_all(items)
    full = decode_assistant_content(stream)
    assert isinstance(full, ContentDecoded)
    points = set(ends) | {c % (len(stream) + 1) for c in cuts} | set(range(27))
    for point in sorted(points):
        result = decode_assistant_content(stream[:point])
        if point == 0:
            assert isinstance(result, Rejected)
            continue
        assert isinstance(result, ContentDecoded), point
        assert result.parts == full.parts[: len(result.parts)]
        assert result.complete is (point in ends)
        if point in ends:
            assert len(result.parts) == ends.index(point) + 1
    # Cutting the UTF-8 bytes anywhere, even inside a character, behaves the same way.
    raw = stream.encode()
    for cut in {c % (len(raw) + 1) for c in cuts}:
        result = decode_assistant_content(raw[:cut])
        if cut:
            assert isinstance(result, ContentDecoded)
            assert result.parts == full.parts[: len(result.parts)]


@settings(max_examples=200)
@given(
    st.binary(max_size=200)
    | st.text(max_size=200)
    | st.text(max_size=200).map(lambda t: ASSISTANT_CONTENT_PREFIX + t)
    | st.lists(st.text(max_size=30), max_size=5).map(
        lambda rs: ASSISTANT_CONTENT_PREFIX + "\n".join(rs) + "\n"
    )
    | st.none()
    | st.integers()
    | st.lists(st.none())
)
def test_decoder_never_raises(payload: Any) -> None:
    result = decode_assistant_content(payload)
    assert result.ok in (True, False)
    assert is_assistant_content_candidate(payload) in (True, False)


def test_decoder_never_raises_on_deep_or_huge_records() -> None:
    for record in ("[" * 100_000 + "]" * 100_000, '{"kind":' * 10_000, "1e400", str(10**400)):
        result = decode_assistant_content(ASSISTANT_CONTENT_PREFIX + record + "\n")
        assert isinstance(result, Rejected)
        assert result.diagnostic.message == "Assistant content record is invalid."


@settings(max_examples=200)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=4), st.sampled_from(["/1\n", "/2\n"]))
def test_diagnostics_never_echo_input(records: list[str], version: str) -> None:
    payload = (
        ASSISTANT_CONTENT_PREFIX_ROOT
        + version
        + "".join('{"kind":"' + MARKER + r + '","text":"' + MARKER + '"}\n' for r in records)
    )
    result = decode_assistant_content(payload)
    assert isinstance(result, Rejected)
    assert MARKER not in str(result.diagnostic.to_wire())
