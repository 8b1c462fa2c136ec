"""The page's own protocol code, run in Chromium against the reference vectors.

The page decodes ordered assistant content and keeps a snapshot cursor in JavaScript; these
tests import its module (``/static/protocol.js``) into a real page and hold it to the same
vectors and tables as the Python decoder, so the browser never reads content differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from agentskit_chat.protocol.fixtures.turn import VALID_TURN_EVENT_FIXTURES
from tests._vectors import as_doubles, family
from tests.web._support import CHROMIUM_ARGS, Lab, chromium_path, lab_app, serving


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    path = chromium_path()
    with sync_playwright() as playwright, serving(lab_app(Lab())) as url:
        browser: Browser = playwright.chromium.launch(
            executable_path=path, args=list(CHROMIUM_ARGS)
        )
        try:
            opened = browser.new_page()
            opened.goto(url)
            opened.wait_for_selector("body[data-ready=true]", state="attached")
            yield opened
        finally:
            browser.close()


def decode_cases() -> list[dict[str, Any]]:
    found = family("assistant_content")["cases"]
    return [case for case in found if case["input"]["operation"] == "decode"]


def test_the_page_decodes_assistant_content_as_the_vectors_say(page: Page) -> None:
    cases = decode_cases()
    assert len(cases) == 34
    got = page.evaluate(
        """async (payloads) => {
          const protocol = await import("/static/protocol.js");
          return payloads.map((payload) => protocol.decodeAssistantContent(payload));
        }""",
        [case["input"]["payload"] for case in cases],
    )
    mismatches = [
        (case["id"], case["note"], result, case["expected"])
        for case, result in zip(cases, got, strict=True)
        if as_doubles(result) != as_doubles(case["expected"])
    ]
    assert mismatches == []


def test_the_page_cursor_ignores_foreign_stale_and_duplicate_snapshots(page: Page) -> None:
    current = VALID_TURN_EVENT_FIXTURES["complete snapshot with tool call"]
    assert current["sequence"] == 3
    steps = [
        ({**current, "eventId": "foreign-first", "sessionId": "other"}, False),
        (current, True),
        (current, False),
        ({**current, "eventId": "stale", "sequence": 2}, False),
        ({**current, "eventId": "foreign", "sessionId": "other", "sequence": 4}, False),
        ({**current, "eventId": "next", "sequence": 4}, True),
    ]
    result = page.evaluate(
        """async ([sessionId, events]) => {
          const { SnapshotCursor } = await import("/static/protocol.js");
          const cursor = new SnapshotCursor(sessionId);
          const applied = events.map((event) => cursor.apply(event));
          return { applied, held: cursor.snapshot.eventId };
        }""",
        [current["sessionId"], [event for event, _ in steps]],
    )
    assert result == {"applied": [ok for _, ok in steps], "held": "next"}
