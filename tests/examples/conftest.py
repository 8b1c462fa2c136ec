"""One Chromium for the page tests of a module: the web tests' fixture."""

from __future__ import annotations

from tests.web.conftest import browser

__all__ = ["browser"]
