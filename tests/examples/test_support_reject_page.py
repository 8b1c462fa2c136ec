"""The support example in Chromium, rejected: the proposed ticket is refused on the page, no
ticket is created, and the model's answer to the rejection shows."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from agentskit_chat.server import create_app
from examples.support import app as support
from tests.web._support import chat_page, serving


def test_a_ticket_rejected_on_the_page_is_never_created(browser: Browser) -> None:
    service = support.InMemoryTicketService()
    with (
        serving(create_app(support.build_support_chat(tickets=service))) as url,
        chat_page(browser, url, heading="Support desk") as page,
    ):
        # The page's suggestion asks for a human.
        page.get_by_role("button", name="I need to talk to a person about my invoice").click()
        confirm = page.locator("fieldset.confirm")
        expect(confirm).to_contain_text(support.TICKET_TOOL)
        expect(page.locator("article.message.assistant .body").last).to_contain_text(
            "Please approve the ticket first."
        )
        assert service.tickets == []  # the model only proposed it
        confirm.get_by_role("button", name="Reject").click()
        expect(confirm).to_have_count(0)
        expect(page.locator("article.message.assistant .body").last).to_contain_text(
            "No ticket was created. Ask again whenever you want a human to follow up."
        )
        expect(page.locator(".tool-status")).to_have_count(1)
        expect(page.locator(".tool-status")).to_contain_text("not run (rejected)")
        expect(page.locator("#send")).to_be_visible()
        expect(page.locator("#notice")).to_be_hidden()
        expect(page.get_by_text("SUP-1")).to_have_count(0)
    assert service.tickets == []
