"""What the terminal draws for a message, and which component owns the keyboard."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.protocol import (
    MessageRecord,
    SnapshotEvent,
    create_assistant_content_encoder,
    create_snapshot_event,
)
from agentskit_chat.protocol.fixtures.component import (
    INVALID_CHOICE_LIST_PROPS_FRAME,
    STANDARD_COMPONENT_FRAME_FIXTURES,
    UNKNOWN_COMPONENT_FRAME,
    VALID_CHOICE_LIST_FRAME,
)
from agentskit_chat.tui._render import (
    CHOICE_METADATA_KEY,
    ChoicePrompt,
    PendingConfirmation,
    plain_text,
    render_message,
)
from agentskit_chat.tui._transcript import build_transcript
from tests.tui._support import flat

AT = "2026-07-11T00:00:00.000Z"


def ordered(*parts: dict[str, Any]) -> str:
    encoder = create_assistant_content_encoder()
    return "".join(encoder.encode(part) for part in parts)


def frame(value: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "component", "frame": value}


def message(role: str, content: str, ident: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "role": role,
        "content": content,
        "status": "complete",
        "createdAt": AT,
        **extra,
    }


def record(role: str, content: str, ident: str = "m1", **extra: Any) -> MessageRecord:
    return MessageRecord.model_validate(message(role, content, ident, **extra))


def shown(value: MessageRecord, **options: Any) -> str:
    return flat(plain_text(render_message(value, **options).renderable, 200))


def snapshot_of(*messages: dict[str, Any], status: str = "complete") -> SnapshotEvent:
    return create_snapshot_event(
        event_id="e1",
        session_id="s1",
        turn_id="t1",
        sequence=1,
        emitted_at=AT,
        messages=list(messages),
        status=status,
        usage={"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
    )


def test_each_standard_fixture_draws_its_semantic_content() -> None:
    frames = list(STANDARD_COMPONENT_FRAME_FIXTURES)
    assert len(frames) == 12
    for value in frames:
        rendered = render_message(record("assistant", ordered(frame(value))))
        text = flat(plain_text(rendered.renderable, 200))
        assert "[unsupported visual" not in text, value["componentKey"]
        assert value["componentKey"] in text or value["componentKey"] in (
            "choice-list",
            "source-list",
        )
        assert text, value["componentKey"]


def test_a_frame_that_does_not_resolve_shows_its_fallback_and_bad_content_an_alert() -> None:
    unknown = shown(record("assistant", ordered(frame(UNKNOWN_COMPONENT_FRAME))))
    assert unknown == "[unsupported visual: choice-list] Choose Documentation or Demo."
    invalid = shown(record("assistant", ordered(frame(INVALID_CHOICE_LIST_PROPS_FRAME))))
    assert invalid.startswith("[unsupported visual: choice-list]")
    broken = shown(record("assistant", "\x1eagentskit.chat.content/1\n{not json}\n"))
    assert broken.startswith("⚠ ")
    assert "not json" not in broken


def test_links_become_absolute_and_are_listed() -> None:
    content = ordered(
        {"kind": "text", "text": "Read [the guide](/docs/guide) or [x](https://x.test/a)."},
        frame(
            {
                **VALID_CHOICE_LIST_FRAME,
                "componentKey": "source-list",
                "instanceId": "sources-1",
                "props": {
                    "label": "Sources",
                    "sources": [{"id": "s1", "title": "Guide", "url": "/docs/guide#install"}],
                },
                "fallback": {"kind": "source-list", "summary": "Sources: Guide."},
            }
        ),
    )
    rendered = render_message(
        record("assistant", content), resolve_href=lambda href: "http://h.test" + href
    )
    assert rendered.links == (("Guide", "http://h.test/docs/guide#install"),)
    text = flat(plain_text(rendered.renderable, 200))
    assert "Sources [1] Guide http://h.test/docs/guide#install" in text
    markdown = rendered.renderable.renderables[0]  # type: ignore[union-attr]
    assert "](http://h.test/docs/guide)" in markdown.markup
    assert "](https://x.test/a)" in markdown.markup


def test_user_and_tool_messages_are_plain_text() -> None:
    assert shown(record("user", "**not markdown**")) == "**not markdown**"
    assert shown(record("tool", "SUP-1")) == "tool result: SUP-1"
    # A user message that looks like a frame is still only text.
    looks_like = json.dumps(VALID_CHOICE_LIST_FRAME)
    assert render_message(record("user", looks_like)).choices == ()


def choices_message(ident: str, instance: str) -> dict[str, Any]:
    value = {**VALID_CHOICE_LIST_FRAME, "instanceId": instance}
    return message("assistant", ordered(frame(value)), ident)


def pending_message(ident: str) -> dict[str, Any]:
    call = {"id": "call-1", "name": "ticket", "args": {"topic": "x"}}
    calls = [{**call, "status": "requires_confirmation"}]
    return message("assistant", "I can open a ticket.", ident, toolCalls=calls)


def test_only_the_latest_unresolved_component_owns_the_keyboard() -> None:
    older = choices_message("a1", "old-list")
    newer = choices_message("a2", "new-list")
    transcript = build_transcript(
        snapshot_of(message("user", "q1", "u1"), older, message("user", "q2", "u2"), newer)
    )
    assert isinstance(transcript.active, ChoicePrompt)
    assert transcript.active.instance_id == "new-list"
    assert transcript.last_user_message_id == "u2"
    assert [c.label for c in transcript.active.choices] == ["Documentation", "Demo"]

    # Answered here or marked by the store: inert.
    answered = snapshot_of(message("user", "q", "u1"), newer)
    picked = build_transcript(answered, picked={"new-list": "Demo"})
    assert picked.active is None
    assert "✓2. Demo" in flat(plain_text(picked.messages[1].renderable, 200))
    marked = build_transcript(
        snapshot_of(
            newer,
            message("user", "Demo", "u3", metadata={CHOICE_METADATA_KEY: "new-list"}),
        )
    )
    assert marked.active is None

    # A list older than the user's last message was superseded.
    superseded = build_transcript(snapshot_of(older, message("user", "other", "u4")))
    assert superseded.active is None

    # A confirmation wins over a list; nothing owns the keyboard while an answer streams.
    both = snapshot_of(message("user", "q", "u1"), newer, pending_message("a3"))
    assert isinstance(build_transcript(both).active, PendingConfirmation)
    streaming = snapshot_of(message("user", "q", "u1"), newer, status="streaming")
    assert build_transcript(streaming).active is None
    assert build_transcript(streaming).streaming


def test_a_confirmation_takes_its_labels_from_a_confirmation_component() -> None:
    confirm = next(
        f for f in STANDARD_COMPONENT_FRAME_FIXTURES if f["componentKey"] == "confirmation"
    )
    calls = [{"id": "c9", "name": "delete", "args": {}, "status": "requires_confirmation"}]
    value = record("assistant", ordered(frame(confirm)), toolCalls=calls)
    (pending,) = render_message(value).confirmations
    assert (pending.approve_label, pending.reject_label) == ("Delete", "Cancel")
    assert "Waiting for you: a to delete, r to cancel." in shown(value)


@given(st.text(max_size=200))
def test_any_assistant_content_is_drawn_without_raising(content: str) -> None:
    for text in (content, "\x1eagentskit.chat.content/1\n" + content):
        rendered = render_message(record("assistant", text))
        assert isinstance(plain_text(rendered.renderable), str)


def test_raw_html_in_an_answer_is_shown_as_the_text_it_is() -> None:
    text = "Write it as <alias> (<page title>); <script>alert(1)</script> stays **text**."
    drawn = shown(record("assistant", text))
    assert "<alias> (<page title>)" in drawn
    assert "<script>alert(1)</script>" in drawn
    assert "**" not in drawn  # Markdown still renders
