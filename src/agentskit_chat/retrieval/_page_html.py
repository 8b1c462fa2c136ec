"""A docs page as HTML, with the very anchors its citations link to.

Citations point at ``/docs/<page>#<heading-anchor>``; the anchors come from the same parser,
the same heading text and the same slugger as the corpus's chunks, so a cited section is always
found on its page. Raw HTML in the Markdown is shown as text, never passed through; images
are named, not loaded; links
between pages (``setup.md#install``) become links to the served pages.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt

from agentskit_chat._doclinks import HeadingSlugger, page_href
from agentskit_chat.answers import SourceDocument, is_markdown_name

from ._corpus import _inline_text

__all__ = ["render_page_html"]

# The corpus's own parser, with raw HTML turned off: tags are text here.
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("table")


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
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and index + 1 < len(tokens):
            token.attrSet("id", slugger.slug(_inline_text(tokens[index + 1])))
        for child in token.children or ():
            if child.type == "image":
                # Nothing loads from elsewhere into the page: an image is named, not shown.
                child.type, child.content, child.children = "text", f"[image: {child.content}]", []
            elif child.type == "link_open":
                href = child.attrGet("href")
                if isinstance(href, str):
                    child.attrSet("href", _page_link(href, document.path, href_prefix))
    renderer: Any = _PARSER.renderer
    html: str = renderer.render(tokens, _PARSER.options, {})
    return html
