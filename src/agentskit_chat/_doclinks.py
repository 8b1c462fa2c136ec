"""Links into a folder of Markdown, shared by the artifact producer and the retrieval corpus.

Both derive a page's link and its heading anchors from the same rules, so an exact answer and a
retrieved chunk cite a section with the same ``href``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final
from urllib.parse import quote

__all__ = ["INDEX_STEMS", "HeadingSlugger", "github_slug", "page_href"]

#: Pages that stand for their folder: ``guides/index.md`` links to ``/docs/guides``.
INDEX_STEMS: Final = frozenset({"index", "readme"})
#: What a lower-cased ASCII heading loses in its anchor: all but letters, digits, " -_".
_NOT_ASCII_KEPT: Final = re.compile(r"[^a-z0-9 _-]")


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes.

    >>> github_slug("Rate limits: `429` & Retry-After!")
    'rate-limits-429--retry-after'
    """
    if text.isascii():  # most headings: the ASCII letters and digits are its L and N characters
        return _NOT_ASCII_KEPT.sub("", text.lower()).replace(" ", "-")
    return "".join(
        "-" if char == " " else char
        for char in text.lower()
        if char in " -_" or unicodedata.category(char)[0] in "LMN"
    )


class HeadingSlugger:
    """GitHub's duplicate rule within one page: a second ``Setup`` is ``setup-1``, then ``-2``."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def slug(self, text: str) -> str:
        """The anchor of the next heading titled ``text`` on this page."""
        base = github_slug(text)
        result = base
        while result in self._seen:
            self._seen[base] += 1
            result = f"{base}-{self._seen[base]}"
        self._seen[result] = 0
        return result


def page_href(prefix: str, path: str) -> str:
    """``prefix`` + the page's path without its Markdown suffix, percent-encoded.

    An ``index`` or ``README`` page links to its folder.

    >>> page_href("/docs", "guides/setup.md"), page_href("/docs", "guides/README.md")
    ('/docs/guides/setup', '/docs/guides')
    """
    for suffix in (".md", ".markdown"):
        if path.lower().endswith(suffix):
            path = path[: -len(suffix)]
            break
    parts = path.split("/")
    if parts and parts[-1].lower() in INDEX_STEMS:
        parts = parts[:-1]
    tail = "/".join(quote(part, safe="-._~") for part in parts)
    return f"{prefix}/{tail}" if tail else prefix or "/"
