"""Guides before change logs: release notes mention every feature, and explain none.

A change log, a release-notes page, a history page or a release announcement names every
feature in a line, so a full-text search ranks it high for almost any question, and an
answer built from it ("Fixed: …") tells the reader nothing about how to do what they asked.
Unless a question is about changes (a version number, "changelog", "released", "deprecated"…),
such pages come after every other hit.

Lists of third-party packages ("Known third-party", "Third party middleware") are alike: each
line names another project's package in the words of a feature ("compressing responses",
"environments run inside containers") and links away. Unless a question is about third-party
packages, such sections come after the project's own guides (and before change logs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final
from urllib.parse import unquote, urlsplit

from ._results import RetrievedChunk

__all__ = [
    "about_changes",
    "about_third_party",
    "guides_first",
    "is_change_log",
    "is_third_party",
    "set_aside",
]

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
_THIRD_PARTY: Final = re.compile(r"\bthird[-_ ]?part(?:y|ies)\b", re.IGNORECASE)
_ABOUT_THIRD_PARTY: Final = re.compile(
    r"\bthird[-_ ]?part(?:y|ies)\b|\bcommunity\b|\becosystem\b|\bexternal\b", re.IGNORECASE
)


def is_change_log(hit: RetrievedChunk) -> bool:
    """Whether ``hit`` comes from a change log, release notes, history or announcement page:
    by a folder or page name in its link, or by its page title."""
    path = unquote(urlsplit(hit.href).path).lower()
    names = [name for name in path.split("/") if name]
    if any(name in _CHANGE_NAMES or _CHANGE_NAME.match(name) for name in names):
        return True
    return _CHANGE_TITLE.match(hit.title) is not None


def is_third_party(hit: RetrievedChunk) -> bool:
    """Whether ``hit`` is a list of third-party packages: "third party" in its title (a
    heading of its path) or in its link."""
    path = unquote(urlsplit(hit.href).path)
    return _THIRD_PARTY.search(hit.title) is not None or _THIRD_PARTY.search(path) is not None


def about_third_party(question: str) -> bool:
    """Whether ``question`` asks about third-party, community or external packages."""
    return _ABOUT_THIRD_PARTY.search(question) is not None


def _rank(question: str) -> Callable[[RetrievedChunk], int]:
    """0 for a guide, 1 for a list of third-party packages, 2 for a change log (each 0 when
    the question is about such pages)."""
    changes, third_party = about_changes(question), about_third_party(question)

    def rank(hit: RetrievedChunk) -> int:
        if not changes and is_change_log(hit):
            return 2
        if not third_party and is_third_party(hit):
            return 1
        return 0

    return rank


def set_aside(question: str, hits: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """``hits`` without change-log and third-party sections when guides remain (unless the
    question is about such pages): an answer is built from the guides, and cites no release
    note or other project's package beside them."""
    rank = _rank(question)
    guides = [hit for hit in hits if rank(hit) == 0]
    return guides or list(hits)


def about_changes(question: str) -> bool:
    """Whether ``question`` asks about changes: a version, a release, a deprecation."""
    return _ABOUT_CHANGES.search(question) is not None


def guides_first(question: str, hits: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """``hits`` with change-log sections after all others, unless the question is about
    changes, and lists of third-party packages after the guides, unless it is about those
    (each group in its order)."""
    rank = _rank(question)
    return sorted(hits, key=rank)
