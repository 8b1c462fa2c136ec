"""A docs page as HTML, with the very anchors its citations link to.

Citations point at ``/docs/<page>#<heading-anchor>``; the anchors come from the same parser,
the same heading text and the same slugger as the corpus's chunks, so a cited section is always
found on its page. Raw HTML in the Markdown is shown as text, never passed through; images
are named, not loaded; links
between pages (``setup.md#install``) become links to the served pages. A link whose address
is not relative or ``http``/``https``/``mailto`` (``data:``, ``javascript:``, a protocol-relative
``//host/...``, anything with a control character or a backslash) keeps its text and loses its
link, by the chat page's own rule.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt

from agentskit_chat._doclinks import HeadingSlugger, page_href
from agentskit_chat.answers import SourceDocument, is_markdown_name

from ._page_sections import inline_text

__all__ = ["render_page_html"]

# The corpus's own parser, with raw HTML turned off: tags are text here.
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("table")
#: The schemes a link may use (the chat page's ``safeHref``); anything else is text.
_SAFE_SCHEMES: Final = frozenset({"http", "https", "mailto"})
_UNSAFE_CHARACTERS: Final = re.compile(r"[\x00-\x1f\x7f\\]")
_MAX_HREF: Final = 2048


def _safe_href(href: str) -> bool:
    """Whether ``href`` is relative or uses http, https or mailto (as the chat page decides)."""
    if not href or len(href) > _MAX_HREF or _UNSAFE_CHARACTERS.search(href):
        return False
    if href.startswith("//"):
        return False  # protocol-relative: another host
    scheme = urlsplit(href).scheme.lower()
    return not scheme or scheme in _SAFE_SCHEMES


def _page_link(href: str, page: str, prefix: str) -> str:
    """A relative link to another Markdown page, as the served page's address."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path or not is_markdown_name(parts.path):
        return href
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page), unquote(parts.path)))
    if target.startswith("../") or target == "..":
        return href
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return page_href(prefix, target) + fragment


def render_page_html(document: SourceDocument, *, href_prefix: str = "/docs") -> str:
    """The HTML of ``document``'s body (no ``<html>`` shell), headings carrying their anchors.

    Example:
        >>> page = SourceDocument.from_text("guide.md", "# Guide\\n\\n## Set up\\n<b>x</b>")
        >>> print(render_page_html(page), end="")
        <h1 id="guide">Guide</h1>
        <h2 id="set-up">Set up</h2>
        <p>&lt;b&gt;x&lt;/b&gt;</p>
    """
    tokens = _PARSER.parse(document.body)
    slugger = HeadingSlugger()
    dropped = False  # links never nest: the next link_close closes a dropped link
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and index + 1 < len(tokens):
            token.attrSet("id", slugger.slug(inline_text(tokens[index + 1])))
        for child in token.children or ():
            if child.type == "image":
                # Nothing loads from elsewhere into the page: an image is named, not shown.
                child.type, child.content, child.children = "text", f"[image: {child.content}]", []
            elif child.type == "link_open":
                href = child.attrGet("href")
                if not isinstance(href, str) or not _safe_href(href):
                    # The text stays; the link goes (its closing tag with it).
                    child.type, child.tag, child.attrs, dropped = "text", "", {}, True
                    continue
                child.attrSet("href", _page_link(href, document.path, href_prefix))
            elif child.type == "link_close" and dropped:
                child.type, child.tag, dropped = "text", "", False
    renderer: Any = _PARSER.renderer
    html: str = renderer.render(tokens, _PARSER.options, {})
    return html
