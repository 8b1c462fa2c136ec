"""Forms and buttons of the chat page travel as ``payload.interaction``, in a real Chromium.

The chat behind the page shows a sign-up form and a button group when asked; its
``on_interaction`` hook answers what the server accepted. A refused submission shows the
server's typed message and keeps what was typed; nothing reaches the hook or the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agentskit_chat.conversation import InMemorySessionStorage, define_chat
from agentskit_chat.protocol import ToolCall, create_assistant_content_encoder
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatSource,
    ChatTool,
    InMemoryChatMemory,
    StreamChunk,
    ToolAuthorization,
)
from agentskit_chat.server import create_chat_app, create_chat_page_app
from tests.server._interaction_support import (
    NEXT_STEP,
    PUBLISH_APPROVAL,
    SIGNUP_FORM,
    FrameModel,
    RecordingHook,
)
from tests.web._support import serving

#: The approval request of the model's ``publish_post`` call (same id as the call).
GATED_APPROVAL: dict[str, Any] = {**PUBLISH_APPROVAL, "instanceId": "call-publish"}


class _Gated:
    """The model's turn: the approval request, then the call it stands for."""

    def abort(self) -> None:
        return None

    async def stream(self) -> AsyncIterator[StreamChunk]:
        encoder = create_assistant_content_encoder()
        yield StreamChunk(
            "text", content=encoder.encode({"kind": "component", "frame": GATED_APPROVAL})
        )
        call = ToolCall(
            id="call-publish", name="publish_post", args={}, status="requires_confirmation"
        )
        yield StreamChunk("tool_call", tool_call=call)
        yield StreamChunk("done")


class Model(FrameModel):
    """Shows the form and the buttons; asked to "publish", proposes a gated call once."""

    capabilities: AdapterCapabilities | None = None

    def create_source(self, request: AdapterRequest) -> ChatSource:
        last = next(m.content for m in reversed(request.messages) if m.role == "user")
        if last == "publish" and "publish" not in self.inputs:
            self.inputs.append(last)
            return _Gated()
        return super().create_source(request)


class Chat:
    """The scripted model, the recording hook and the gated tool behind the page."""

    def __init__(self) -> None:
        self.model = Model({"sign up": SIGNUP_FORM, "next": NEXT_STEP})
        self.hook = RecordingHook()
        self.published: list[Mapping[str, Any]] = []

    async def publish(self, args: Mapping[str, Any]) -> str:
        self.published.append(dict(args))
        return "published"

    def app(self) -> Any:
        tool = ChatTool(
            name="publish_post",
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            execute=self.publish,
            requires_confirmation=True,
        )
        config = ChatConfig(
            adapter=self.model,
            tools=(tool,),
            authorize_tool_call=lambda call, context: ToolAuthorization(True),
        )
        definition = define_chat(id="signup", chat=config, on_interaction=self.hook)
        storage = InMemorySessionStorage()
        memories: dict[str, InMemoryChatMemory] = {}
        chat = create_chat_app(
            resolve_definition=lambda context, session_id: definition,
            session_storage=lambda context: storage,
            chat_memory=lambda context, session_id: memories.setdefault(
                session_id, InMemoryChatMemory()
            ),
        )
        return create_chat_page_app(chat)


@pytest.fixture
def chat() -> Chat:
    return Chat()


@pytest.fixture
def page(browser: Browser, chat: Chat) -> Iterator[Page]:
    errors: list[str] = []
    with serving(chat.app()) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        # A refused submission is a 400 the browser logs as a failed resource: expected.
        page.on(
            "console",
            lambda message: (
                errors.append(message.text)
                if message.type == "error" and "status of 400" not in message.text
                else None
            ),
        )
        try:
            page.goto(url)
            expect(page.locator("body[data-ready=true]")).to_be_attached()
            yield page
        finally:
            context.close()
    assert errors == []


def ask(page: Page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.locator("#send").click()
    expect(page.locator("#send")).to_be_visible()


def test_a_refused_form_says_why_and_keeps_its_values_then_the_hook_answers(
    page: Page, chat: Chat
) -> None:
    ask(page, "sign up")
    form = page.get_by_role("form", name="Sign up")
    form.get_by_label("Name").fill("Ada")
    form.get_by_label("Age").fill("36")
    form.get_by_role("button", name="Join").click()  # no role chosen
    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_have_text('The field "Role" is required.')
    expect(page.locator("article.message.user")).to_have_count(1)  # nothing ran
    assert chat.hook.seen == []
    assert chat.model.inputs == ["sign up"]
    # What was typed is still there, and the form still answers.
    expect(form.get_by_label("Name")).to_have_value("Ada")
    expect(form.get_by_label("Age")).to_have_value("36")

    form.get_by_label("Role").select_option(label="Engineering")
    form.get_by_label("Newsletter").check()
    form.get_by_role("button", name="Join").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("article.message.user .body").last).to_have_text(
        "Submitted: Name = Ada, Role = Engineering, Age = 36, Newsletter = yes"
    )
    expect(page.locator("article.message.assistant .body").last).to_have_text("Welcome, Ada (eng)!")
    expect(notice).to_be_hidden()
    expect(form.get_by_role("button", name="Join")).to_be_disabled()  # answered once
    ((key, instance, event, value, _message_id),) = chat.hook.seen
    assert (key, instance, event) == ("form", "signup-form", "submit")
    assert value == {"name": "Ada", "role": "eng", "age": 36, "news": True}
    assert chat.model.inputs == ["sign up"]  # the hook answered, not the model


def test_a_button_of_a_group_is_its_select_interaction(page: Page, chat: Chat) -> None:
    ask(page, "next")
    page.get_by_role("group", name="What next?").get_by_role("button", name="Send now").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("article.message.user .body").last).to_have_text("Send now")
    expect(page.locator("article.message.assistant .body").last).to_have_text(
        re.compile(r"^Hook: next-step select$")
    )
    assert [seen[:4] for seen in chat.hook.seen] == [
        ("button-group", "next-step", "select", "send")
    ]


def test_an_approval_request_of_a_waiting_call_decides_that_call(page: Page, chat: Chat) -> None:
    bodies: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda request: (
            bodies.append(json.loads(request.post_data or "{}"))
            if request.method == "POST"
            else None
        ),
    )
    ask(page, "publish")
    group = page.get_by_role("group", name="Publish the post?")
    group.get_by_role("button", name="Publish").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator(".tool-status.tool-complete")).to_contain_text("publish_post")
    assert chat.published == [{}]  # the call ran, once
    assert chat.hook.seen == []  # not an interaction: the call's own decision
    payload = bodies[-1]["payload"]
    assert payload["confirmation"] == {"toolCallId": "call-publish", "decision": "approve"}
    assert "interaction" not in payload
