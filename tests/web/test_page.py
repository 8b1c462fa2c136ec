"""The chat page in a real Chromium: every flow a user has, by mouse and by keyboard.

Debian's Chromium is driven by Playwright (never a downloaded browser). Each test opens a fresh
browser context (empty storage) and fails on any console error or uncaught exception.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES
from agentskit_chat.server import create_docs_assistant_app
from tests.assistant._support import clock, write_docs
from tests.web._support import (
    ARTIFACTS,
    AXE,
    INJECTION,
    Lab,
    lab_app,
    serving,
)

README_SHOT = Path(__file__).parents[2] / "docs" / "images" / "chat-page.png"
EXACT = "Setup guide"
AMBIGUOUS = "Configuring the cache"
BACKEND = "How do I see every render in the log?"


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    docs = write_docs(tmp_path_factory.mktemp("docs"))
    assistant = create_docs_assistant(docs, now=clock)
    with serving(create_docs_assistant_app(assistant)) as url:
        yield url


@pytest.fixture(scope="module")
def lab() -> Lab:
    return Lab()


@pytest.fixture(scope="module")
def lab_url(lab: Lab) -> Iterator[str]:
    with serving(lab_app(lab)) as url:
        yield url


class Watched:
    """A page and everything it complained about."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("dialog", lambda dialog: self.errors.append(f"dialog: {dialog.message}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    watched = Watched(page)
    try:
        yield watched
    finally:
        context.close()
    assert watched.errors == []


def open_page(watched: Watched, url: str) -> Page:
    page = watched.page
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    return page


def ask(page: Page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.locator("#send").click()
    expect(page.locator("#send")).to_be_visible()  # the turn finished


def wait_for(condition: Callable[[], bool], page: Page, seconds: float = 10) -> None:
    """Until ``condition()`` holds (the server sees a closed stream on its next write)."""
    for _ in range(int(seconds * 10)):
        if condition():
            return
        page.wait_for_timeout(100)
    assert condition()


def assistant_messages(page: Page) -> Any:
    return page.locator("article.message.assistant")


def serious_violations(page: Page) -> list[tuple[str, list[Any]]]:
    """axe-core's serious and critical violations on the page (axe is injected, not served)."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    assert isinstance(result["violations"], list)
    return [
        (violation["id"], [node["target"] for node in violation["nodes"]])
        for violation in result["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


# --- the docs assistant -------------------------------------------------------------------------


def test_an_exact_question_is_answered_and_its_source_link_opens_the_cited_section(
    watched: Watched, docs_url: str
) -> None:
    page = open_page(watched, docs_url)
    ask(page, EXACT)
    answer = assistant_messages(page).last
    expect(answer).to_contain_text("Install the widget")
    sources = answer.get_by_role("navigation", name="Sources")
    links = sources.get_by_role("link")
    assert links.count() >= 1
    href = links.first.get_attribute("href")
    assert href is not None and href.startswith("/docs/")
    links.first.click()
    expect(page).to_have_url(re.compile(re.escape(href.split("#")[0])))
    expect(page.locator("main.doc h1")).to_contain_text("Setup guide")
    if "#" in href:
        assert page.locator(f"[id='{href.split('#')[1]}']").count() == 1


def test_an_ambiguous_question_offers_choices_and_a_choice_is_used_once(
    watched: Watched, docs_url: str
) -> None:
    page = open_page(watched, docs_url)
    ask(page, AMBIGUOUS)
    choices = page.locator("fieldset.component-choice-list button.choice")
    assert choices.count() == 2
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.method))
    choices.first.click()
    expect(page.locator("#send")).to_be_visible()
    expect(assistant_messages(page)).to_have_count(2)
    expect(assistant_messages(page).last).to_contain_text("cache")
    # The answered list is inert: its buttons are disabled, and a click sends nothing.
    used = page.locator("fieldset.component-choice-list button.choice").first
    expect(used).to_be_disabled()
    posts = requests.count("POST")
    used.click(force=True)
    page.wait_for_timeout(300)
    assert requests.count("POST") == posts
    expect(assistant_messages(page)).to_have_count(2)


def test_a_backend_question_streams_and_cites(watched: Watched, docs_url: str) -> None:
    page = open_page(watched, docs_url)
    # Count the renders of each assistant message: more than one is a streamed answer.
    page.evaluate(
        """() => {
        window.__renders = {};
        new MutationObserver((records) => {
          for (const record of records) for (const node of record.addedNodes) {
            if (node.matches && node.matches("article.assistant")) {
              const id = node.dataset.messageId;
              window.__renders[id] = (window.__renders[id] || 0) + 1;
            }
          }
        }).observe(document.getElementById("log"), {childList: true});
      }"""
    )
    ask(page, BACKEND)
    renders = page.evaluate("window.__renders")
    assert len(renders) == 1
    assert max(renders.values()) >= 2
    answer = assistant_messages(page).last
    expect(answer).to_contain_text("log_level")
    sources = answer.get_by_role("navigation", name="Sources").get_by_role("link")
    expect(sources).not_to_have_count(0)
    # "[1]" in the text is a link to the first source.
    citation = answer.locator("a.citation").first
    expect(citation).to_have_text("[1]")
    assert citation.get_attribute("href") == sources.first.get_attribute("href")
    expect(citation).to_have_accessible_name(re.compile("^Source 1: "))
    # Regenerate without a model: the same words (a new source list id aside) say so.
    answer.get_by_role("button", name="Regenerate").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#notice")).to_have_text(
        re.compile("^Regenerated: the answer is the same as before")
    )


def test_a_reload_resumes_the_conversation(watched: Watched, docs_url: str) -> None:
    page = open_page(watched, docs_url)
    ask(page, EXACT)
    expect(assistant_messages(page)).to_have_count(1)
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    expect(page.locator("article.message.user .body")).to_have_text([EXACT])
    expect(assistant_messages(page)).to_have_count(1)
    ask(page, "Licensing")
    expect(page.locator("article.message.user")).to_have_count(2)


def test_the_docs_page_has_no_serious_accessibility_violations_and_looks_right_at_three_widths(
    browser: Browser, docs_url: str
) -> None:
    # Only this context may run injected script (axe); the page's own policy stays as served.
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    try:
        page.goto(docs_url)
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        ask(page, AMBIGUOUS)
        page.locator("button.choice").first.click()
        expect(page.locator("#send")).to_be_visible()
        ask(page, BACKEND)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shots = []
        for width in (375, 768, 1280):
            page.set_viewport_size({"width": width, "height": 820})
            page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
            shot = ARTIFACTS / f"chat-page-{width}.png"
            page.screenshot(path=str(shot))
            if width == 1280 and os.environ.get("AGENTSKIT_WRITE_SCREENSHOTS"):
                # The README's picture: regenerate with AGENTSKIT_WRITE_SCREENSHOTS=1.
                page.screenshot(path=str(README_SHOT))
            assert shot.stat().st_size > 10_000
            shots.append(shot)
            # Nothing is wider than the screen.
            scroll = page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width
        assert serious_violations(page) == []
    finally:
        context.close()


# --- the lab chat -----------------------------------------------------------------------------


def test_every_standard_component_renders_with_its_role_and_name(
    watched: Watched, lab_url: str
) -> None:
    page = open_page(watched, lab_url)
    ask(page, "components")
    answer = assistant_messages(page).last
    keys = [frame["componentKey"] for frame in STANDARD_COMPONENT_FRAME_FIXTURES]
    assert len(keys) == 12
    for key in keys:
        rendered = answer.locator(f"[data-component='{key}']:not([data-fallback])")
        expect(rendered).to_have_count(1)
    fixtures = {
        frame["componentKey"]: frame["props"] for frame in STANDARD_COMPONENT_FRAME_FIXTURES
    }
    expect(answer.get_by_role("group", name=fixtures["button-group"]["label"])).to_be_visible()
    expect(answer.get_by_role("group", name=fixtures["choice-list"]["prompt"])).to_be_visible()
    expect(answer.get_by_role("form")).to_have_count(1)
    expect(answer.get_by_role("group", name=fixtures["confirmation"]["title"])).to_be_visible()
    expect(answer.get_by_role("progressbar", name=fixtures["progress"]["label"])).to_be_visible()
    expect(answer.get_by_role("navigation", name=fixtures["source-list"]["label"])).to_be_visible()
    expect(answer.get_by_role("list", name=fixtures["source-list"]["label"])).to_be_visible()
    expect(
        answer.get_by_role("link", name=re.compile(re.escape(fixtures["link-card"]["title"])))
    ).to_be_visible()
    expect(answer.get_by_role("alert")).to_contain_text(fixtures["error-notice"]["message"])
    expect(
        answer.get_by_role("status", name=re.compile(fixtures["tool-call"]["name"]))
    ).to_be_attached()
    expect(answer.get_by_role("group", name=fixtures["approval-request"]["title"])).to_be_visible()
    expect(answer.get_by_role("table", name=fixtures["table"]["caption"])).to_be_visible()
    expect(answer.get_by_text(fixtures["file-attachment"]["name"])).to_be_visible()
    # An unregistered component is shown as its semantic fallback, never drawn.
    expect(answer.locator("[data-fallback]")).to_have_text(
        ["[unsupported visual: chart] Revenue rose 12%."]
    )


def test_html_and_script_in_questions_and_answers_stay_inert(
    watched: Watched, lab_url: str
) -> None:
    page = open_page(watched, lab_url)
    ask(page, INJECTION)
    ask(page, "markdown please")
    log = page.locator("#log")
    expect(log.locator("article.message.user .body").first).to_have_text(INJECTION)
    expect(assistant_messages(page).last).to_contain_text("<script>")
    assert log.locator("img, script, iframe").count() == 0
    assert log.locator("a[href^='javascript']").count() == 0
    assert page.evaluate("window.__pwned") is None
    expect(assistant_messages(page).last.locator("strong")).to_have_text("bold")


def test_stop_ends_a_streaming_answer_and_the_next_question_works(
    watched: Watched, lab_url: str, lab: Lab
) -> None:
    page = open_page(watched, lab_url)
    page.get_by_label("Your message").fill("slow")
    page.locator("#send").click()
    answer = assistant_messages(page).last
    expect(answer).to_contain_text("part 1")
    aborts = lab.aborts
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.get_by_role("status")).to_have_text("Stopped.")
    stopped = answer.inner_text()
    assert "part 1" in stopped
    wait_for(lambda: lab.aborts == aborts + 1, page)
    # Nothing more arrives after the stop.
    page.wait_for_timeout(600)
    assert "part 39" not in assistant_messages(page).last.inner_text()
    ask(page, "after the stop")
    expect(assistant_messages(page).last.locator(".body")).to_have_text(
        re.compile("Echo: after the stop")
    )
    # Esc stops too, from anywhere on the page.
    page.get_by_label("Your message").fill("slow")
    page.locator("#send").click()
    expect(assistant_messages(page).last).to_contain_text("part 1")
    page.keyboard.press("Escape")
    expect(page.locator("#send")).to_be_visible()
    wait_for(lambda: lab.aborts == aborts + 2, page)


def test_regenerate_edit_and_retry(watched: Watched, lab_url: str, lab: Lab) -> None:
    page = open_page(watched, lab_url)
    ask(page, "first question")
    calls = lab.calls
    assistant_messages(page).last.get_by_role("button", name="Regenerate").click()
    expect(page.locator("#send")).to_be_visible()
    expect(assistant_messages(page)).to_have_count(1)
    assert lab.calls == calls + 1
    # The echo answers the same words again: the page says so, as information, not an error.
    notice = page.locator("#notice")
    expect(notice).to_have_text(re.compile("^Regenerated: the answer is the same as before"))
    expect(notice).to_have_class(re.compile("notice-info"))
    page.locator("article.message.user").last.get_by_role("button", name="Edit").click()
    editor = page.get_by_label("Edit your message")
    editor.fill("edited question")
    page.get_by_role("button", name="Save and ask").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("article.message.user .body")).to_have_text(["edited question"])
    expect(assistant_messages(page).last.locator(".body")).to_have_text(
        re.compile("Echo: edited question")
    )
    expect(notice).to_be_hidden()
    lab.fail_next = True
    ask(page, "this one fails")
    expect(page.get_by_role("alert").filter(has_text="failed")).to_be_visible()
    page.get_by_role("button", name="Retry").click()
    expect(page.locator("#send")).to_be_visible()
    expect(assistant_messages(page).last.locator(".body")).to_have_text(
        re.compile("Echo: this one fails")
    )
    expect(page.locator("article.message.user")).to_have_count(2)


def test_a_gated_action_waits_for_approval_and_runs_once(
    watched: Watched, lab_url: str, lab: Lab
) -> None:
    page = open_page(watched, lab_url)
    ask(page, "support")
    page.get_by_role("button", name=re.compile("Open support ticket")).click()
    expect(page.locator("#send")).to_be_visible()
    confirm = page.locator("fieldset.confirm")
    expect(confirm).to_contain_text("create-support-ticket")
    before = len(lab.tickets)
    confirm.get_by_role("button", name="Approve").click()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("fieldset.confirm")).to_have_count(0)
    expect(page.locator(".tool-status").last).to_contain_text("SUP-")
    assert len(lab.tickets) == before + 1


def test_a_keyboard_only_conversation(watched: Watched, lab_url: str, docs_url: str) -> None:
    page = open_page(watched, docs_url)
    page.keyboard.press("Tab")  # the skip link
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    box = page.get_by_label("Your message")
    box.focus()
    expect(box).to_be_focused()
    page.keyboard.type(AMBIGUOUS)
    page.keyboard.press("Enter")
    expect(page.locator("#send")).to_be_visible()
    choice = page.locator("button.choice").first
    choice.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#send")).to_be_visible()
    expect(assistant_messages(page)).to_have_count(2)
    # Shift+Enter is a new line, not a submission.
    box.focus()
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    assert box.input_value() == "line one\nline two"
    expect(page.locator("article.message.user")).to_have_count(2)


def test_the_page_is_served_with_a_strict_policy(watched: Watched, docs_url: str) -> None:
    page = watched.page
    response = page.goto(docs_url)
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert page.locator("script:not([src])").count() == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_component_passes_the_accessibility_check_in_light_and_dark(
    browser: Browser, lab_url: str, scheme: str
) -> None:
    context = browser.new_context(bypass_csp=True, color_scheme=scheme)  # type: ignore[arg-type]
    page = context.new_page()
    try:
        page.goto(lab_url)
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        ask(page, "components")
        expect(page.locator("[data-component]")).to_have_count(13)
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(255, 255, 255)") == (scheme == "light")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"components-{scheme}.png"), full_page=True)
        assert serious_violations(page) == []
    finally:
        context.close()
