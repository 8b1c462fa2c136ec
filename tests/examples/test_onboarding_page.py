"""The onboarding example in Chromium: the form refuses a missing field with the server's
typed message and runs nothing; filled in, it saves the answers and the walkthrough goes on."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from agentskit_chat.server import create_app
from examples.onboarding import app as onboarding
from tests.web._support import chat_page, serving


def _ask(page: Page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.locator("#send").click()
    expect(page.locator("#send")).to_be_visible()


def test_the_onboarding_form_in_the_page(browser: Browser) -> None:
    recommended: list[onboarding.Profile] = []

    def recommender(profile: onboarding.Profile) -> onboarding.Recommendation:
        recommended.append(profile)
        return onboarding.default_recommender(profile)

    app = create_app(onboarding.build_onboarding_chat(recommender=recommender))
    with serving(app) as url, chat_page(browser, url) as page:
        _ask(page, "onboarding")
        form = page.get_by_role("form", name="Tell us how you work")
        form.get_by_label("First goal").fill("Automate handoffs")
        form.get_by_role("button", name="Save answers").click()  # no role chosen
        notice = page.locator("#notice")
        expect(notice).to_have_text('The field "Primary role" is required.')
        expect(page.locator("article.message.user")).to_have_count(1)  # nothing ran
        expect(form.get_by_label("First goal")).to_have_value("Automate handoffs")

        form.get_by_label("Primary role").select_option(label="Engineering")
        form.get_by_role("button", name="Save answers").click()
        expect(page.locator("#send")).to_be_visible()
        expect(page.locator("article.message.assistant .body").last).to_contain_text(
            "Saved: Engineering, “Automate handoffs”."
        )
        assert recommended == []
        _ask(page, "recommend")
        expect(page.get_by_role("button", name="Use this setup")).to_be_visible()
    assert recommended == [onboarding.Profile("engineering", "Automate handoffs")]
