"""Forms and rows of buttons as the terminal reads them: which one owns the keyboard, what an
answered one shows, and the interaction each widget sends."""

from __future__ import annotations

from typing import Any

from agentskit_chat.tui._prompts import ButtonOption, ButtonPrompt, FormPrompt
from agentskit_chat.tui._render import INTERACTION_METADATA_KEY, ChoicePrompt, plain_text
from agentskit_chat.tui._transcript import build_transcript
from tests.server._interaction_support import (
    DELETE_CONFIRM,
    NEXT_STEP,
    PUBLISH_APPROVAL,
    SIGNUP_FORM,
)
from tests.tui._support import flat
from tests.tui.test_render import frame, message, ordered, snapshot_of

CHOICES: dict[str, Any] = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "choice-list",
    "instanceId": "pick",
    "props": {"prompt": "Which?", "choices": [{"id": "a", "label": "A"}]},
    "fallback": {"kind": "choice-list", "summary": "A."},
}


def shown_with(*frames: dict[str, Any]) -> dict[str, Any]:
    return message("assistant", ordered(*(frame(f) for f in frames)), "a1")


def test_the_latest_unanswered_choice_list_form_or_row_of_buttons_owns_the_keyboard() -> None:
    both = build_transcript(snapshot_of(message("user", "q", "u1"), shown_with(CHOICES, NEXT_STEP)))
    assert isinstance(both.active, ButtonPrompt)
    assert both.active.instance_id == "next-step"
    later = build_transcript(
        snapshot_of(message("user", "q", "u1"), shown_with(NEXT_STEP, CHOICES))
    )
    assert isinstance(later.active, ChoicePrompt)
    form = build_transcript(snapshot_of(message("user", "q", "u1"), shown_with(SIGNUP_FORM)))
    assert isinstance(form.active, FormPrompt)
    assert [f.id for f in form.active.props.fields] == ["name", "role", "age", "news"]
    # Picked by this client: inert.
    picked = build_transcript(
        snapshot_of(message("user", "q", "u1"), shown_with(SIGNUP_FORM)), picked={"signup-form": ""}
    )
    assert picked.active is None


def test_a_stored_interaction_marks_its_component_answered_with_the_server_text() -> None:
    marker = {"event": {"instanceId": "next-step"}, "text": "Send now"}
    answered = build_transcript(
        snapshot_of(
            shown_with(NEXT_STEP),
            message("user", "Send now", "u2", metadata={INTERACTION_METADATA_KEY: marker}),
        )
    )
    assert answered.active is None
    assert "✓ Send now" in flat(plain_text(answered.messages[0].renderable, 200))


def test_each_widget_sends_its_components_own_event() -> None:
    transcript = build_transcript(
        snapshot_of(
            message("user", "q", "u1"),
            shown_with(SIGNUP_FORM, NEXT_STEP, DELETE_CONFIRM, PUBLISH_APPROVAL),
        )
    )
    prompts = transcript.messages[1].prompts
    assert [type(p).__name__ for p in prompts] == [
        "FormPrompt",
        "ButtonPrompt",
        "ButtonPrompt",
        "ButtonPrompt",
    ]
    form, group, confirm, approval = prompts
    assert isinstance(form, FormPrompt)
    assert form.interaction({"name": "Ada"}) == {
        "instanceId": "signup-form",
        "componentKey": "form",
        "event": "submit",
        "value": {"name": "Ada"},
    }
    assert form.text({"name": "Ada", "news": True}) == "Name: Ada\nRole: \nAge: \nNewsletter: yes"
    assert isinstance(group, ButtonPrompt)
    assert group.options[2] == ButtonOption("Later", "select", "later", disabled=True)
    assert group.interaction(group.options[1])["value"] == "send"
    assert isinstance(confirm, ButtonPrompt) and isinstance(approval, ButtonPrompt)
    assert [(o.label, o.event) for o in confirm.options] == [
        ("Delete it", "confirm"),
        ("Keep it", "cancel"),
    ]
    assert [(o.label, o.event) for o in approval.options] == [
        ("Publish", "approve"),
        ("Not yet", "deny"),
    ]
    assert "value" not in approval.interaction(approval.options[1])
