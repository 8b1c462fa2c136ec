"""Link context: how other pages describe a section where they link to it.

A page that links to another page's section often names it in its own words ("you can define
a test environment with named [scripts](environment.md#scripts)"), words the section itself may
never write. Each relative link to a heading of another page of the corpus
(``guide.md#setup``, ``../guide.md#setup``) gives that section (every part of a long one) the
text around the link: the paragraph, list item or table row that holds it, or, when that says
little more than the link itself (a card ending in a "Learn more" link), the whole list item.

The search index keeps a section's link context in a field of its own, searched beside its
text (:mod:`._sqlite_fts`); it is never part of the section's text, so it is never shown.
Links to a whole page are left out: measured on the development questions of
``bench/ask_quality.py``, giving their words to the page's opening found no more answers and
moved other pages' sections down; so are links to pages outside the corpus, to the same page,
to an anchor that names no heading, or to anything but Markdown.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from agentskit_chat.answers import MARKDOWN_SUFFIXES, is_markdown_name

if TYPE_CHECKING:
    from ._chunker import MarkdownDocument

__all__ = ["PageLink", "link_context", "page_links", "says_little"]

#: A link's own block is its context unless it has fewer words besides the link text.
_MIN_WORDS = 3
_WORD = re.compile(r"[^\W\d_]{3,}")
#: Icon short codes (``:octicons-arrow-right-24:``) say nothing about a section.
_SHORT_CODE = re.compile(r":[a-z0-9_+-]+:")
#: What tells two spellings of one anchor apart only by punctuation (``a_b`` and ``a-b``).
_LOOSE = re.compile(r"[^0-9a-z]+")


class PageLink(NamedTuple):
    """One link from a page to a page of the corpus.

    Attributes:
        path: The target page's path inside the corpus folder.
        anchor: The heading anchor linked to.
        context: The text around the link.
    """

    path: str
    anchor: str
    context: str


def says_little(text: str, anchor: str) -> bool:
    """Whether ``text`` has fewer than three words (of three letters or more) besides the
    link's own words ``anchor``: the link's block does not describe its target."""
    rest = text.replace(anchor, " ") if anchor else text
    return len(_WORD.findall(rest)) < _MIN_WORDS


def _target(path: str, folder: str, href: str) -> tuple[str, str] | None:
    """The page path and anchor that ``href``, written on the page at ``path`` in ``folder``,
    links to; ``None`` unless it is a relative link to a heading of another Markdown page
    inside the folder (most links are not: they are told apart with string tests only)."""
    head, _, fragment = href.partition("#")
    head = head.rstrip("/")  # ``page.md/#anchor`` is the page's heading too
    if (
        not fragment  # a whole page: see the module docs
        or not head  # a heading of the page itself
        or ":" in head  # another site
        or head.startswith("/")
        or not head.lower().endswith(MARKDOWN_SUFFIXES)  # not a page, or a query after it
    ):
        return None
    target = posixpath.normpath(posixpath.join(folder, unquote(head)))
    if target == path or target.split("/", 1)[0] == ".." or not is_markdown_name(target):
        return None
    return target, unquote(fragment)


def page_links(path: str, links: Iterable[tuple[str, str]]) -> tuple[PageLink, ...]:
    """The links ``(href, context)`` written on the page at ``path`` that point at a heading of
    another Markdown page inside the folder, resolved against the page's folder."""
    folder = posixpath.dirname(path)
    kept: list[PageLink] = []
    for href, context in links:
        target = _target(path, folder, href)
        if target is not None:
            kept.append(PageLink(target[0], target[1], context))
    return tuple(kept)


def link_context(documents: Iterable[MarkdownDocument]) -> dict[str, str]:
    """``chunk id → link context`` of every chunk some page links to (see the module docs);
    links to pages that are not among ``documents``, or to anchors that name none of their
    headings, are ignored."""
    pages = tuple(documents)
    linked = {link.path for document in pages for link in document.links}
    anchors: dict[tuple[str, str], list[str]] = {}
    loosely: dict[tuple[str, str], list[str]] = {}
    for document in pages:
        if document.path not in linked:
            continue
        for chunk in document.chunks:
            fragment = chunk.href.partition("#")[2]
            if fragment:
                anchors.setdefault((document.path, fragment), []).append(chunk.id)
                loose = (document.path, _LOOSE.sub("", fragment.lower()))
                loosely.setdefault(loose, []).append(chunk.id)
    found: dict[str, list[str]] = {}
    for document in pages:
        for link in document.links:
            # The anchor as written, else as MkDocs may spell it (``a_b`` for ``a-b``).
            ids = anchors.get((link.path, link.anchor)) or loosely.get(
                (link.path, _LOOSE.sub("", link.anchor.lower())), []
            )
            for chunk_id in ids:
                found.setdefault(chunk_id, []).append(link.context)
    return {
        chunk_id: _SHORT_CODE.sub(" ", "\n".join(dict.fromkeys(contexts)))
        for chunk_id, contexts in found.items()
    }
