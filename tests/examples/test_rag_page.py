"""The cited-answers example in Chromium: a question its docs answer shows the answer and its
source list (titles linking to the published sections, with quotes); one they do not answer
shows the refusal and no sources."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from agentskit_chat.server import create_app
from examples.rag import app as rag
from tests.web._support import chat_page, serving

#: What the example says when its folder has no answer (as its README documents it).
REFUSAL = "No grounded sources were found for this question."


def test_an_answer_with_its_sources_and_a_refusal_on_the_page(browser: Browser) -> None:
    app = create_app(lambda: rag.open_rag_chat(docs_url="https://docs.example.org"))
    with serving(app) as url, chat_page(browser, url, heading="Lumen Notes help") as page:
        page.get_by_role("button", name="How often do devices sync?").click()  # suggestion
        sources = page.locator("[data-component=source-list]")
        expect(sources).to_have_count(1)
        # The answer is prose above its sources, whose list is headed "Sources".
        expect(sources.locator("h3")).to_have_text("Sources")
        answered = page.locator("article.message.assistant.status-complete").first
        expect(answered).to_contain_text("Devices sync every 30 seconds")
        link = sources.get_by_role("link", name="Sync and offline use › How often devices sync")
        expect(link).to_be_visible()
        expect(link).to_have_attribute(
            "href", "https://docs.example.org/sync#how-often-devices-sync"
        )
        expect(sources.locator("li").first.locator("q")).to_contain_text(
            "right away when you press Ctrl+S"
        )

        page.get_by_label("Your message").fill("How do I bake bread?")
        page.locator("#send").click()
        answers = page.locator("article.message.assistant.status-complete")
        expect(answers).to_have_count(2)
        answer = answers.last
        expect(answer.locator(".body")).to_have_text(REFUSAL)
        expect(answer.locator("[data-component=source-list]")).to_have_count(0)
        expect(sources).to_have_count(1)
        expect(page.locator("#notice")).to_be_hidden()
