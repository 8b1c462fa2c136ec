"""One Chromium for the page tests of a module (Debian's, driven by Playwright)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.web._support import CHROMIUM_ARGS, chromium_path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS))
        try:
            yield launched
        finally:
            launched.close()
