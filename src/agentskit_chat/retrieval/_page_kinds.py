"""Guides before change logs: release notes mention every feature, and explain none.

A change log, a release-notes page, a history page or a release announcement names every
feature in a line, so a full-text search ranks it high for almost any question, and an
answer built from it ("Fixed: …") tells the reader nothing about how to do what they asked.
Unless a question is about changes (a version number, "changelog", "released", "deprecated"…),
such pages come after every other hit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final
from urllib.parse import unquote, urlsplit

from ._results import RetrievedChunk

__all__ = ["about_changes", "guides_first", "is_change_log"]

_CHANGE_NAMES: Final = frozenset(
    {"changelog", "changes", "history", "release-notes", "releases", "news", "whats-new", "blog"}
)
_CHANGE_NAME: Final = re.compile(r"^(?:changelog|change-log|release[-_]|releases?[-_]notes)")
_CHANGE_TITLE: Final = re.compile(
    r"^(?:change ?log|changes|release notes|releases|history|what'?s new|news)\b", re.IGNORECASE
)
_ABOUT_CHANGES: Final = re.compile(
    r"\b(?:change ?logs?|release notes?|releases?d?|changed|changes|new in|added in|removed in"
    r"|deprecat\w*|history|upgrad\w*|breaking)\b|\bv?\d+\.\d+",
    re.IGNORECASE,
)


def is_change_log(hit: RetrievedChunk) -> bool:
    """Whether ``hit`` comes from a change log, release notes, history or announcement page:
    by a folder or page name in its link, or by its page title."""
    path = unquote(urlsplit(hit.href).path).lower()
    names = [name for name in path.split("/") if name]
    if any(name in _CHANGE_NAMES or _CHANGE_NAME.match(name) for name in names):
        return True
    return _CHANGE_TITLE.match(hit.title) is not None


def about_changes(question: str) -> bool:
    """Whether ``question`` asks about changes: a version, a release, a deprecation."""
    return _ABOUT_CHANGES.search(question) is not None


def guides_first(question: str, hits: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """``hits`` with change-log sections after all others (each group in its order), unless
    the question is about changes."""
    if about_changes(question):
        return list(hits)
    guides = [hit for hit in hits if not is_change_log(hit)]
    return guides + [hit for hit in hits if is_change_log(hit)]
