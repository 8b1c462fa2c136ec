"""Sources that join the relevant ones: a long section's command, an option's table row.

Search ranks chunks, and a chunk is a section or, for a long section, one of its parts. What
answers a question is sometimes in a chunk that search did not rank:

- a "How do I …?" question about a long section may find only the part that tells what a
  command prints, not the part holding the command (``make soak``): the section's first part
  with code joins the parts found, in the page's order;
- a section may name an option (``url_timeout``) whose default is in the option table of the
  same page, under another heading: when that row holds a term of the question beyond the
  option's own name, the table's section comes right after the section naming it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

from agentskit_chat._terms import asks_how_to, content_terms, term_set

from ._corpus import MarkdownChunk
from ._results import RetrievedChunk

__all__ = ["SectionParts"]

#: What starts a code block in a chunk's text.
_FENCE: Final = "```"
#: A table row naming an option in its first cell: ``| `url_timeout` | float | ...``.
_ROW_NAME: Final = re.compile(r"^\|\s*`([^`\n]+)`\s*\|", re.MULTILINE)
#: A code span in prose.
_CODE_SPAN: Final = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def _hit(chunk: MarkdownChunk, score: float) -> RetrievedChunk:
    return RetrievedChunk(chunk.id, chunk.title, chunk.href, chunk.text, score)


class SectionParts:
    """The corpus's chunks, looked up by section and by option name.

    Args:
        chunks: Every chunk of the corpus, in document order.
    """

    def __init__(self, chunks: Iterable[MarkdownChunk]) -> None:
        by_href: dict[str, list[MarkdownChunk]] = {}
        for chunk in chunks:
            by_href.setdefault(chunk.href, []).append(chunk)
        # Only long sections, cut into parts, are looked up by section.
        self._parts = {href: tuple(found) for href, found in by_href.items() if len(found) > 1}
        # Each page's chunks, section by section: its option rows are found when a question
        # first needs them (looking through every chunk here was a fifth of a warm start).
        self._pages: dict[str, list[MarkdownChunk]] = {}
        for href, found in by_href.items():
            self._pages.setdefault(href.partition("#")[0], []).extend(found)
        self._rows: dict[str, dict[str, MarkdownChunk]] = {}

    def _rows_of(self, page: str) -> dict[str, MarkdownChunk]:
        """The chunk holding each option's table row on ``page``, by option name (the first
        one, in the page's section order)."""
        rows = self._rows.get(page)
        if rows is None:
            rows = {}
            for chunk in self._pages.get(page, ()):
                for name in _ROW_NAME.findall(chunk.text):
                    rows.setdefault(name, chunk)
            self._rows[page] = rows  # the same for every thread that computes it
        return rows

    def joined(
        self, question: str, hits: list[RetrievedChunk], site_terms: Collection[str] = ()
    ) -> list[RetrievedChunk]:
        """``hits`` with the command parts and the option rows that join them (see the
        module documentation)."""
        return self._with_rows(question, self._with_code(question, hits), site_terms)

    def _with_code(self, question: str, hits: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """``hits``, and when ``question`` asks how to do something, for each section found
        only by parts without code, its first part with code, beside them in the page's order
        (with the score of the part found)."""
        if not self._parts or not asks_how_to(question):
            return hits
        held = {hit.id for hit in hits}
        with_code = {hit.href for hit in hits if _FENCE in hit.text}
        kept: list[RetrievedChunk] = []
        for hit in hits:
            parts = self._parts.get(hit.href, ())
            order = [part.id for part in parts]
            code = next((p for p in parts if _FENCE in p.text and p.id not in held), None)
            if code is None or hit.href in with_code or hit.id not in order:
                kept.append(hit)
                continue
            with_code.add(hit.href)
            held.add(code.id)
            before = order.index(code.id) < order.index(hit.id)
            kept += [_hit(code, hit.score), hit] if before else [hit, _hit(code, hit.score)]
        return kept

    def _with_rows(
        self, question: str, hits: list[RetrievedChunk], site_terms: Collection[str]
    ) -> list[RetrievedChunk]:
        """``hits``, and when the first one names an option (``url_timeout`` written as code)
        whose row in a table of its page is in another section, and that row holds a question
        term beyond the option's own name, that section right after it."""
        if not hits:
            return hits
        first = hits[0]
        page = first.href.partition("#")[0]
        options = self._rows_of(page)
        if not options:
            return hits
        terms = set(content_terms(question)) - set(site_terms)
        held = {hit.id for hit in hits}
        for name in dict.fromkeys(_CODE_SPAN.findall(first.text)):
            chunk = options.get(name)
            if chunk is None or chunk.id in held or chunk.href == first.href:
                continue
            rows = chunk.text.split("\n")
            row = next((r for r in rows if _ROW_NAME.match(r) and f"`{name}`" in r), "")
            if (term_set(row) - term_set(name)) & terms:
                return [first, _hit(chunk, first.score), *hits[1:]]
        return hits
