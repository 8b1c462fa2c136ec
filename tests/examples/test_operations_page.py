"""The operations example in Chromium: the operator restarts checkout-api from the page, once,
after approving it; the viewer's click on restart is refused with ACTION_FORBIDDEN and nothing
restarts."""

from __future__ import annotations

import json

from playwright.sync_api import Browser, Page, Route, expect

from agentskit_chat.server import create_app
from examples.operations import app as operations
from tests.web._support import chat_page, serving

RESTARTED = "checkout-api restarted at revision 2."


def _offer(page: Page) -> None:
    """Type /operations and wait for its choice list."""
    page.get_by_label("Your message").fill("/operations")
    page.locator("#send").click()
    expect(page.locator("[data-component=choice-list]")).to_contain_text("Restart operation")
    expect(page.locator("#send")).to_be_visible()


def test_the_operator_restarts_once_after_approving_on_the_page(browser: Browser) -> None:
    service = operations.InMemoryOperationsService()
    app = create_app(operations.build_operations_chat(service=service))
    with serving(app) as url, chat_page(browser, url, heading="Operations desk") as page:
        _offer(page)
        page.get_by_role("button", name="Restart operation").click()
        confirm = page.locator("fieldset.confirm")
        expect(confirm).to_contain_text(operations.RESTART_TOOL)
        assert service.restarts == []  # the click only proposed it
        confirm.get_by_role("button", name="Approve").click()
        expect(confirm).to_have_count(0)
        expect(page.locator(".tool-status").last).to_contain_text(RESTARTED)
        expect(page.locator("article.message.assistant .body").last).to_contain_text(RESTARTED)
        expect(page.locator("#notice")).to_be_hidden()
    assert service.restarts == ["checkout-api"]
    assert len(service.keys) == 1


def test_the_viewers_restart_is_refused_on_the_page_and_nothing_restarts(
    browser: Browser,
) -> None:
    service = operations.InMemoryOperationsService()
    viewer = operations.IDENTITIES["viewer"]
    app = create_app(operations.build_operations_chat(context=viewer, service=service))
    with serving(app) as url, chat_page(browser, url, heading="Operations desk") as page:
        answers: list[str] = []

        def record(route: Route) -> None:
            """Pass the server's answer to the page unchanged, keeping a copy of it."""
            response = route.fetch()
            answers.append(response.text())
            route.fulfill(response=response)

        _offer(page)
        page.route("**/api/chat", record)
        page.get_by_role("button", name="Restart operation").click()
        expect(page.locator("#notice")).to_be_visible()
        (answer,) = answers
        lines = [json.loads(line) for line in answer.splitlines() if line]
        assert [line["event"] for line in lines] == ["server.turn.diagnostic"]
        assert lines[0]["payload"]["code"] == "ACTION_FORBIDDEN"
        expect(page.locator("#notice")).to_have_text("This action is not allowed.")
        expect(page.locator("#send")).to_be_visible()
        expect(page.locator("fieldset.confirm")).to_have_count(0)
        expect(page.locator("article.message")).to_have_count(2)  # /operations and its offer
    assert service.restarts == []
    assert service.keys == []
