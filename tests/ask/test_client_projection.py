"""The Ask client's pure parts: history, event projection, safe links, bounded encoding,
response sniffing, the endpoint URL and the adapter options. No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.ask._client import create_ask_adapter
from agentskit_chat.ask._client_projection import (
    ASK_CONTENT_BYTE_LIMIT_MESSAGE,
    ASK_CONTENT_RECORD_LIMIT_MESSAGE,
    ASK_HISTORY_MAX_BYTES,
    AskContentEncoder,
    ProjectedComponent,
    ProjectedDone,
    ProjectedError,
    ProjectedText,
    project_ask_event,
    project_ask_messages,
    safe_source_href,
    trim_ask_history,
)
from agentskit_chat.ask._client_request import resolve_ask_endpoint
from agentskit_chat.ask._client_response import AskResponseReader, ResponseItem
from agentskit_chat.errors import ConfigurationError, ProtocolError
from agentskit_chat.protocol import (
    ComponentFrame,
    TextPart,
    create_assistant_content_encoder,
    decode_assistant_content,
    is_safe_href,
    validate_ask_event,
)
from agentskit_chat.protocol._json import utf8_len
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.runtime import ChatMessage, MessageRole

AT = datetime(2026, 7, 13, 12, tzinfo=UTC)
FRAME = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "ask-tool",
    "instanceId": "tool-1",
    "props": None,
    "fallback": {"kind": "ask-tool", "summary": "Tool."},
}


def message(role: MessageRole, content: str) -> ChatMessage:
    return ChatMessage(id="m", role=role, content=content, created_at=AT)


def event(wire: dict[str, Any]) -> Any:
    validated = validate_ask_event(wire)
    assert validated is not None, wire
    return validated


def cite(sources: Any, event_id: str = "cite-1") -> Any:
    return event({"type": "tool", "id": event_id, "name": "cite", "args": {"sources": sources}})


def sources_of(projection: Any) -> list[dict[str, Any]]:
    assert isinstance(projection, ProjectedComponent)
    props = projection.frame.to_wire()["props"]
    assert props["label"] == "Sources"
    return list(props["sources"])


# --- history ------------------------------------------------------------------------------------


def test_history_projection_vector() -> None:
    encoder = create_assistant_content_encoder()
    content = encoder.encode({"kind": "text", "text": "answer"}) + encoder.encode(
        {"kind": "component", "frame": FRAME}
    )
    messages = [message("assistant", content), message("system", "Be brief.")]
    assert project_ask_messages(messages) == [
        {"role": "assistant", "content": "answer\n[ask-tool]"}
    ]


@pytest.mark.parametrize(
    ("role", "content", "expected"),
    [
        ("user", "  verbatim \n", "  verbatim \n"),
        ("user", "\x1eagentskit.chat.content/1\n", "\x1eagentskit.chat.content/1\n"),
        ("assistant", "plain answer ", "plain answer "),
        (
            "assistant",
            "\x1eagentskit.chat.content/1\n{bad}\n",
            "\x1eagentskit.chat.content/1\n{bad}\n",
        ),
        ("assistant", "\x1eagentskit.chat.content/1\n", ""),
        ("assistant", '\x1eagentskit.chat.content/1\n{"kind":"text","text":" a "}\n', "a"),
        ("tool", "result", None),
        ("system", "prompt", None),
    ],
    ids=[
        "user-verbatim",
        "user-envelope-verbatim",
        "assistant-plain",
        "assistant-invalid-envelope",
        "assistant-empty-envelope",
        "assistant-trimmed",
        "tool",
        "system",
    ],
)
def test_history_projection_per_message(
    role: MessageRole, content: str, expected: str | None
) -> None:
    projected = project_ask_messages([message(role, content)])
    assert projected == ([] if expected is None else [{"role": role, "content": expected}])


_TEXT = st.text(alphabet=st.sampled_from(["a", "é", "😀", "\n"]), max_size=40)


@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _TEXT), max_size=80),
    st.integers(min_value=0, max_value=16384),
)
def test_trimmed_history_fits_the_server_bounds(
    history: list[tuple[str, str]], padding: int
) -> None:
    wire = [{"role": role, "content": "x" * padding + text} for role, text in history]
    trimmed = trim_ask_history(wire, max_bytes=10**9)  # the count and length bounds alone
    assert len(trimmed) == min(len(wire), 64)
    for original, kept in zip(wire[-64:], trimmed, strict=True):
        assert kept.role == original["role"]
        assert original["content"].startswith(kept.content)
        assert utf16_len(kept.content) <= 16384
        # As long as possible: at most one unit (half an emoji) is given up.
        assert utf16_len(kept.content) >= min(utf16_len(original["content"]), 16383)


def test_trim_rejects_roles_the_service_does_not_accept() -> None:
    with pytest.raises(ProtocolError):
        trim_ask_history([{"role": "system", "content": "x"}])


# --- safe links ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "anchor", "expected"),
    [
        ("/docs/guide", "first step", "/docs/guide#first%20step"),
        ("https://example.com/docs", None, "https://example.com/docs"),
        ("docs/bare", None, "/docs/bare"),
        ("//evil.example", None, None),
        ("javascript:alert(1)", None, None),
        ("/" + "x" * 2048, None, None),
        ("/" + "x" * 2046, None, "/" + "x" * 2046),
        ("/docs", "#intro", "/docs#intro"),
        ("/docs#old", "new", "/docs#new"),
        ("/docs?q=a b", None, "/docs?q=a%20b"),
        ("https://example.com", None, "https://example.com/"),
        ("https://user:pw@example.com/docs", None, None),
        ("ftp://example.com/file", None, None),
        ("/\\evil.example/x", None, None),
        ("/docs/../guide", None, "/guide"),
        ("HTTPS://Example.COM/a", "b", "https://example.com/a#b"),
        ("/caf\u00e9", None, "/caf%C3%A9"),
        ("/docs", "", "/docs"),
    ],
)
def test_safe_source_href(path: str, anchor: str | None, expected: str | None) -> None:
    href = safe_source_href(path, anchor)
    assert href == expected
    if href is not None:
        assert is_safe_href(href)


@given(st.text(max_size=60), st.none() | st.text(max_size=20))
def test_safe_source_href_is_always_safe(path: str, anchor: str | None) -> None:
    href = safe_source_href(path, anchor)
    assert href is None or is_safe_href(href)


# --- event projection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"type": "text", "delta": ""}, None),
        ({"type": "text", "delta": "Hello"}, ProjectedText("Hello")),
        ({"type": "error", "message": "Failed."}, ProjectedError("Failed.")),
        ({"type": "done", "model": "m"}, ProjectedDone()),
        (
            {"type": "tool", "id": "a", "name": "answer", "args": {"markdown": "# Title"}},
            ProjectedText("# Title"),
        ),
        ({"type": "tool", "id": "a", "name": "answer", "args": {"markdown": ""}}, None),
        ({"type": "tool", "id": "a", "name": "answer", "args": {"markdown": 3}}, None),
        ({"type": "tool", "id": "c", "name": "cite", "args": {"sources": "no"}}, None),
        ({"type": "tool", "id": "c", "name": "cite", "args": {"sources": []}}, None),
        ({"type": "tool", "id": "o", "name": "other", "args": {}}, None),
    ],
    ids=[
        "empty-text",
        "text",
        "error",
        "done",
        "answer",
        "empty-answer",
        "answer-not-text",
        "cite-not-a-list",
        "cite-empty",
        "other-without-hook",
    ],
)
def test_event_projection(wire: dict[str, Any], expected: Any) -> None:
    assert project_ask_event(event(wire)) == expected


def test_cite_keeps_only_safe_sources() -> None:
    projection = project_ask_event(
        cite(
            [
                {"id": "a", "title": "Guide", "path": "/docs/guide", "anchor": "first step"},
                {"title": "Evil", "path": "javascript:alert(1)"},
                {"title": "   ", "path": "/docs/blank"},
                "not an object",
                {"title": "No path"},
                {"title": "Relative", "path": "docs/bare", "anchor": 7},
                {"title": "t" * 300, "path": "https://example.com"},
            ]
        )
    )
    assert sources_of(projection) == [
        {"id": "source-1", "title": "Guide", "url": "/docs/guide#first%20step"},
        {"id": "source-6", "title": "Relative", "url": "/docs/bare"},
        {"id": "source-7", "title": "t" * 256, "url": "https://example.com/"},
    ]
    assert isinstance(projection, ProjectedComponent)
    assert projection.frame.fallback.summary == f"Sources: Guide, Relative, {'t' * 256}."


def test_cite_never_splits_a_title_or_the_summary() -> None:
    title = "t" * 255 + "😀"
    projection = project_ask_event(cite([{"title": title, "path": f"/d/{i}"} for i in range(50)]))
    sources = sources_of(projection)
    assert {source["title"] for source in sources} == {"t" * 255}
    assert isinstance(projection, ProjectedComponent)
    summary = projection.frame.fallback.summary
    assert utf16_len(summary) <= 4096
    assert summary.startswith("Sources: " + "t" * 255)


def test_cite_keeps_at_most_50_sources() -> None:
    sources = sources_of(
        project_ask_event(cite([{"title": f"T{i}", "path": f"/d/{i}"} for i in range(60)]))
    )
    assert [source["id"] for source in sources] == [f"source-{i}" for i in range(1, 51)]


@pytest.mark.parametrize(
    ("event_id", "instance_id"),
    [("cite/1", "cite-1"), ("", "sources"), ("-x", "sources"), ("a😀", "a--")],
)
def test_cite_instance_id(event_id: str, instance_id: str) -> None:
    projection = project_ask_event(cite([{"title": "T", "path": "/t"}], event_id))
    assert isinstance(projection, ProjectedComponent)
    assert projection.frame.instance_id == instance_id


def test_cite_without_surviving_sources_is_nothing() -> None:
    assert project_ask_event(cite([{"title": "Evil", "path": "//evil.example"}])) is None


def _raising(event: Any) -> Any:
    raise RuntimeError("hook failed")


async def _coroutine(event: Any) -> Any:
    return FRAME


@pytest.mark.parametrize(
    ("hook", "accepted"),
    [
        (lambda event: FRAME, True),
        (lambda event: ComponentFrame.model_validate(FRAME), True),
        (lambda event: {**FRAME, "type": "select"}, False),
        (lambda event: None, False),
        (_raising, False),
        (_coroutine, False),
    ],
    ids=["mapping", "model", "invalid", "none", "raises", "coroutine"],
)
def test_custom_tool_hook(hook: Any, accepted: bool) -> None:
    projection = project_ask_event(
        event({"type": "tool", "id": "t", "name": "custom", "args": {}}), hook
    )
    if accepted:
        assert isinstance(projection, ProjectedComponent)
        assert projection.frame.to_wire() == FRAME
    else:
        assert projection is None


def test_answer_without_text_markdown_falls_through_to_the_hook() -> None:
    tool = event({"type": "tool", "id": "a", "name": "answer", "args": {"markdown": None}})
    assert isinstance(project_ask_event(tool, lambda event: FRAME), ProjectedComponent)


# --- bounded encoding ---------------------------------------------------------------------------


@given(st.lists(st.text(alphabet=st.sampled_from(["a", "é", "😀", "\n", "\x1e"])), max_size=6))
def test_text_records_round_trip(pieces: list[str]) -> None:
    encoder = AskContentEncoder()
    content = "".join(record for piece in pieces for record in encoder.encode_text(piece))
    if not "".join(pieces):
        assert content == ""
        return
    decoded = decode_assistant_content(content)
    assert decoded.ok
    assert decoded.complete
    assert all(isinstance(part, TextPart) for part in decoded.parts)
    assert "".join(part.text for part in decoded.parts) == "".join(pieces)  # type: ignore[union-attr]
    assert encoder.records == len(decoded.parts)
    assert encoder.bytes == utf8_len(content)


@given(
    st.lists(
        st.text(alphabet=st.sampled_from(["a", "é", "😀"]), min_size=1, max_size=50), max_size=30
    ),
    st.integers(min_value=1, max_value=2000),
    st.integers(min_value=1, max_value=12),
)
def test_encoding_never_exceeds_its_limits(
    pieces: list[str], max_bytes: int, max_records: int
) -> None:
    encoder = AskContentEncoder(max_bytes=max_bytes, max_records=max_records)
    content = ""
    error: str | None = None
    try:
        for piece in pieces:
            for record in encoder.encode_text(piece):
                content += record
    except ProtocolError as exc:
        error = exc.message
    assert utf8_len(content) <= max_bytes
    assert encoder.records <= max_records
    if content:
        decoded = decode_assistant_content(content)
        assert decoded.ok
        assert decoded.complete
    if error is None:
        assert encoder.records == len(pieces)
    else:
        assert error in (ASK_CONTENT_BYTE_LIMIT_MESSAGE, ASK_CONTENT_RECORD_LIMIT_MESSAGE)


def test_a_refused_first_record_leaves_the_prefix_for_the_next() -> None:
    encoder = AskContentEncoder(max_bytes=60)
    with pytest.raises(ProtocolError):
        list(encoder.encode_text("x" * 100))
    record = next(encoder.encode_text("short"))
    assert decode_assistant_content(record).ok


def test_long_text_is_sliced_into_16384_unit_records() -> None:
    records = list(AskContentEncoder().encode_text("😀" * 8200))
    decoded = decode_assistant_content("".join(records))
    assert decoded.ok
    lengths = [utf16_len(part.text) for part in decoded.parts]  # type: ignore[union-attr]
    assert lengths == [16384, 16]


# --- response reading ---------------------------------------------------------------------------


def read(content_type: str | None, pieces: Sequence[bytes]) -> tuple[str, list[ResponseItem]]:
    reader = AskResponseReader(content_type)
    items: list[ResponseItem] = []
    for piece in [*pieces, None]:
        if piece is None:
            reader.end()
        else:
            reader.feed(piece)
        while not reader.needs_data:
            items.extend(reader.take())
    return reader.mode, items


def normalized(items: list[ResponseItem]) -> list[Any]:
    """Adjacent text pieces joined: how text is split into reads does not matter."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        else:
            out.append(item if isinstance(item, str) else item.to_wire())
    return out


_LINES = st.sampled_from(
    [
        b'{"type":"text","delta":"hi"}\n',
        b'{"type":"done"}\n',
        b"{bad}\n",
        b"\n",
        b"  \t",
        b"\xef\xbb\xbf",
        b"prose ",
        b"caf\xc3\xa9",
        b"\xff",
        b'{"this":"is prose"}\n',
    ]
)


@given(
    st.lists(_LINES, max_size=8),
    st.sampled_from([None, "text/plain", "application/x-ndjson"]),
    st.data(),
)
def test_chunking_never_changes_what_a_body_means(
    parts: list[bytes], content_type: str | None, data: st.DataObject
) -> None:
    body = b"".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(min_value=0, max_value=len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole = read(content_type, [body])
    split = read(content_type, pieces)
    assert split[0] == whole[0]
    assert normalized(split[1]) == normalized(whole[1])


@pytest.mark.parametrize(
    "chunk_size", [1 << 20, 65536, 1048577, 1 << 22], ids=["1MiB", "64KiB", "boundary", "whole"]
)
def test_an_oversized_first_line_is_dropped_whatever_the_chunking(chunk_size: int) -> None:
    body = (
        b"{"
        + b"x" * 1048577
        + b'{"type":"text","delta":"injected"}\n{"type":"text","delta":"safe"}\n'
    )
    pieces = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
    mode, items = read("text/plain", pieces)
    assert mode == "ndjson"
    assert normalized(items) == [{"type": "text", "delta": "safe"}]


def test_reader_never_drops_lines() -> None:
    """DECISIONS 15 at the reader: 10,000 records in one read come out in batches, all of them."""
    reader = AskResponseReader("application/x-ndjson")
    reader.feed(b'{"type":"text","delta":"x"}\n' * 10000)
    batches = []
    while not reader.needs_data:
        batches.append(len(reader.take()))
    assert sum(batches) == 10000
    assert max(batches) <= 4096


# --- endpoint and options -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "corpus", "persona", "expected"),
    [
        ("/api/ask", "registry", "guide", "/api/ask?corpus=registry&persona=guide"),
        ("/api/ask", None, None, "/api/ask"),
        ("/api/ask", "  ", "guide", "/api/ask?persona=guide"),
        ("/api/ask", " two words ", None, "/api/ask?corpus=+two+words+"),
        ("/api/ask?corpus=old&x=a%20b#frag", "new", None, "/api/ask?corpus=new&x=a+b#frag"),
        ("/api/ask?x=~", None, None, "/api/ask?x=~"),
        ("https://ask.example/v1/ask", "docs", None, "https://ask.example/v1/ask?corpus=docs"),
        ("https://ASK.example", None, None, "https://ask.example/"),
        (
            "http://127.0.0.1:8000/api/ask",
            "é~*",
            None,
            "http://127.0.0.1:8000/api/ask?corpus=%C3%A9%7E*",
        ),
    ],
)
def test_endpoint_url(
    endpoint: str, corpus: str | None, persona: str | None, expected: str
) -> None:
    assert resolve_ask_endpoint(endpoint, corpus=corpus, persona=persona) == expected


@pytest.mark.parametrize(
    "options",
    [
        {"endpoint": "ftp://ask.example"},
        {"endpoint": "api/ask"},
        {"endpoint": "//ask.example/api"},
        {"endpoint": "/api/ask"},
        {"endpoint": "https://a.example", "connect_timeout_s": 0},
        {"endpoint": "https://a.example", "connect_timeout_s": float("nan")},
        {"endpoint": "https://a.example", "max_content_bytes": 262145},
        {"endpoint": "https://a.example", "max_records": 0},
        {"endpoint": "https://a.example", "max_records": 1.5},
        {"endpoint": "https://a.example", "max_records": True},
        {"endpoint": "https://a.example", "headers": {"x": 1}},
        {"endpoint": "https://a.example", "project_tool": "not callable"},
        {"endpoint": "https://a.example", "http_client": object()},
        {"endpoint": "https://a.example", "corpus": 3},
    ],
    ids=[
        "scheme",
        "path-relative",
        "protocol-relative",
        "relative-without-client",
        "zero-timeout",
        "nan-timeout",
        "too-many-bytes",
        "zero-records",
        "float-records",
        "bool-records",
        "header-value",
        "hook",
        "client",
        "corpus",
    ],
)
def test_invalid_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_ask_adapter(**options)


def test_client_trims_history_to_the_body_limit() -> None:
    # DECISIONS 14: the bounds include the body size; the oldest messages go first, the newest
    # message always stays, and the encoded history fits the budget.
    wire = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "é" * 8000} for i in range(20)
    ]
    trimmed = trim_ask_history(wire)
    size = sum(len(m.to_json().encode()) + 1 for m in trimmed)
    assert size <= ASK_HISTORY_MAX_BYTES
    assert 0 < len(trimmed) < 20
    assert [m.content for m in trimmed] == [w["content"] for w in wire[-len(trimmed) :]]
    huge = [{"role": "user", "content": "é" * 16384}]
    assert len(trim_ask_history(huge, max_bytes=10)) == 1


def test_the_turns_own_empty_placeholder_is_not_sent_as_history() -> None:
    # What a chat controller hands its adapter: the history, the new user message, and the
    # empty streaming assistant message the answer will fill. Only real messages are sent.
    import json  # noqa: PLC0415

    from agentskit_chat.ask import encode_ask_request_body  # noqa: PLC0415
    from agentskit_chat.runtime import AdapterRequest  # noqa: PLC0415

    at = datetime(2026, 7, 13, tzinfo=UTC)
    messages = (
        ChatMessage(id="u1", role="user", content="First?", created_at=at),
        ChatMessage(id="a1", role="assistant", content="Answer.", created_at=at),
        ChatMessage(id="u2", role="user", content="Second?", created_at=at),
        ChatMessage(id="a2", role="assistant", content="", created_at=at, status="streaming"),
    )
    body = json.loads(encode_ask_request_body(AdapterRequest(messages=messages), "s-1"))
    assert body["messages"] == [
        {"role": "user", "content": "First?"},
        {"role": "assistant", "content": "Answer."},
        {"role": "user", "content": "Second?"},
    ]
