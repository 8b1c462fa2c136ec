"""Two chats mounted in one site (``/support/`` and ``/sales/``) in Chromium: each page loads its
own files and talks to its own chat, and each keeps its own session in the browser's storage."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect
from starlette.applications import Starlette
from starlette.routing import Mount

from agentskit_chat.conversation import ChatDefinition, ChatPage, define_chat
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.server import create_app
from tests.web._support import chat_page, serving


def _chat(name: str) -> ChatDefinition:
    def answer(text: str, request: AdapterRequest) -> str:
        return f"{name} heard: {text}"

    return define_chat(
        id=name.lower(),
        chat=ChatConfig(adapter=reply_adapter(answer)),
        page=ChatPage(title=f"{name} desk"),
    )


def _ask(page: Page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.locator("#send").click()
    expect(page.locator("#send")).to_be_visible()


def _stored_session(page: Page) -> dict[str, str]:
    stored: dict[str, str] = page.evaluate(
        "() => Object.fromEntries(Object.entries(window.localStorage)"
        ".filter(([key]) => key.startsWith('agentskit.chat.session')))"
    )
    return stored


def test_two_mounted_chats_each_answer_in_their_own_page(browser: Browser) -> None:
    site = Starlette(
        routes=[
            Mount("/support", app=create_app(_chat("Support"), rate_limits=None)),
            Mount("/sales", app=create_app(_chat("Sales"), rate_limits=None)),
        ]
    )
    with serving(site) as url, chat_page(browser, f"{url}/support", heading="Support desk") as page:
        assert page.url == f"{url}/support/"  # the bare prefix is redirected to the page
        _ask(page, "where is my order?")
        expect(page.locator("article.message.assistant .body").last).to_have_text(
            "Support heard: where is my order?"
        )
        support = _stored_session(page)
        # The same browser's storage, the other chat: its session is apart.
        page.goto(f"{url}/sales/")
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        expect(page.get_by_role("heading", name="Sales desk")).to_be_visible()
        expect(page.locator("article.message")).to_have_count(0)
        _ask(page, "a quote, please")
        expect(page.locator("article.message.assistant .body").last).to_have_text(
            "Sales heard: a quote, please"
        )
        both = _stored_session(page)
        page.goto(f"{url}/support/")
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        expect(page.locator("article.message.assistant .body").last).to_have_text(
            "Support heard: where is my order?"
        )
    assert list(support) == ["agentskit.chat.session:/support/"]
    assert sorted(both) == ["agentskit.chat.session:/sales/", "agentskit.chat.session:/support/"]
    assert both["agentskit.chat.session:/support/"] == support["agentskit.chat.session:/support/"]
    assert both["agentskit.chat.session:/sales/"] != both["agentskit.chat.session:/support/"]
