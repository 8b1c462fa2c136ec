"""Sections as citable chunks: packed texts, titles, links and stable ids.

Each section under a heading becomes one chunk (long sections are split at paragraph
boundaries). A chunk knows its document title and heading path, a safe root-relative link with a
GitHub-style anchor, and a stable safe identifier, so any retriever can return it as a grounded
source as is.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from markdown_it.token import Token

from agentskit_chat._doclinks import page_href
from agentskit_chat.answers import SourceDocument
from agentskit_chat.errors import BuildError
from agentskit_chat.protocol import is_safe_href
from agentskit_chat.protocol._text import js_trim, utf16_len

from ._page_sections import page_sections

__all__ = [
    "CHUNKER_VERSION",
    "MAX_CHUNK_CHARS",
    "TITLE_SEPARATOR",
    "MarkdownChunk",
    "MarkdownDocument",
    "chunk_page",
]

#: Upper bound on a chunk's text, in characters (well inside an excerpt's 4,096 units).
MAX_CHUNK_CHARS = 2000
_FENCE: Final = "```"

#: Between the document title and each heading of a chunk title: ``Setup › Install``.
TITLE_SEPARATOR = " › "

#: Changes whenever chunking changes, so that persistent indexes know to rebuild.
CHUNKER_VERSION = "7"

_MAX_TITLE_UNITS = 256
_MAX_READABLE_ID = 100
_NOT_ID = re.compile(r"[^A-Za-z0-9.-]+")
_NAME_PARTS = re.compile(r"[-_\s]+")
#: Page names that stand for their folder.
_INDEX_NAMES = frozenset({"index", "readme"})


@dataclass(frozen=True, slots=True)
class MarkdownChunk:
    """One citable piece of a document: a section, or part of a long one.

    Attributes:
        id: Stable safe identifier, derived from the path and the heading's anchor.
        title: ``Document title › Heading › Subheading`` (1..256 UTF-16 units).
        href: Safe root-relative link to the page and, below the title, the heading's anchor.
        text: The section as plain Markdown blocks separated by blank lines: paragraphs, list
            items (``- x``, ``1. x``), tables (``| a | b |`` rows under a header and its rule)
            and code between triple-backtick fences (at most ``MAX_CHUNK_CHARS``).
        path: The document's path inside the corpus folder, with ``/`` separators.
        heading_path: The headings above and including this section, the page title excluded.
        document_title: The title of the whole document.
    """

    id: str
    title: str
    href: str
    text: str
    path: str
    heading_path: tuple[str, ...]
    document_title: str

    @property
    def heading(self) -> str:
        """The section's own heading (the document title for the introduction)."""
        return self.heading_path[-1] if self.heading_path else self.document_title

    @property
    def context(self) -> str:
        """What the section sits under: the document title and the parent headings."""
        if not self.heading_path:
            return ""
        return TITLE_SEPARATOR.join((self.document_title, *self.heading_path[:-1]))


@dataclass(frozen=True, slots=True)
class MarkdownDocument:
    """One Markdown file: its title, the SHA-256 of its content, and its chunks in order."""

    path: str
    title: str
    sha256: str
    chunks: tuple[MarkdownChunk, ...]


def _base(kind: str) -> str:
    return kind.split(":", 1)[0]


def _fenced(kind: str, text: str) -> str:
    # Code keeps its fences and its language, so readers of the text (the extractive
    # generator) can tell code from prose; each piece of a long block is fenced on its own.
    if _base(kind) != "code":
        return text
    language = kind.partition(":")[2]
    fence = _FENCE
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def _pieces(kind: str, text: str) -> Iterator[tuple[str, str]]:
    """A block cut to fit a chunk: at line ends first, then at spaces, then anywhere."""
    limit = MAX_CHUNK_CHARS - (2 * len(_FENCE) + 24 if _base(kind) == "code" else 0)
    if len(text) <= limit:
        yield kind, _fenced(kind, text)
        return
    for whole_line in text.split("\n"):
        line = whole_line
        while len(line) > limit:
            cut = line.rfind(" ", limit // 2, limit)
            cut = cut if cut > 0 else limit
            yield kind, _fenced(kind, line[:cut])
            line = line[cut:].lstrip(" ")
        if line.strip():
            yield kind, _fenced(kind, line)


def _introduces(kind: str, piece: str) -> bool:
    """Whether a piece introduces the next one: a paragraph ending in ``:``, a table header."""
    if kind == "para":
        return piece.rstrip().endswith(":")
    return kind == "row" and "\n| --- |" in piece


def _pack(blocks: Sequence[tuple[str, str]]) -> list[str]:
    """Consecutive blocks joined into texts of at most ``MAX_CHUNK_CHARS`` characters.

    What introduces a block stays with it: when the block starts a new text, the paragraph
    ending in ``:`` or the table header just before it moves there too, and a table cut in two
    repeats its header at the top of the second part.
    """
    texts: list[str] = []
    current = ""
    previous = ""
    last = ""  # the previous piece
    header = ""  # the header of the table being packed
    for kind, piece in (p for block in blocks for p in _pieces(*block)):
        tight = kind == previous and _base(kind) in ("item", "row", "code")
        joiner = "\n" if tight else "\n\n"
        joined = f"{current}{joiner}{piece}" if current else piece
        if len(joined) > MAX_CHUNK_CHARS:
            moved = f"{last}{joiner}{piece}"
            repeated = f"{header}\n{piece}"
            if _introduces(previous, last) and current != last and len(moved) <= MAX_CHUNK_CHARS:
                texts.append(current[: -len(last)].rstrip("\n"))
                joined = moved
            elif tight and kind == "row" and header and len(repeated) <= MAX_CHUNK_CHARS:
                texts.append(current)
                joined = repeated
            else:
                texts.append(current)
                joined = piece
        if kind == "row" and _introduces(kind, piece):
            header = piece
        elif kind != "row":
            header = ""
        current, previous, last = joined, kind, piece
    if current.strip():
        texts.append(current)
    return texts


def _clip_title(title: str) -> str:
    title = js_trim(title)
    if utf16_len(title) <= _MAX_TITLE_UNITS:
        return title
    used = 0
    for index, char in enumerate(title):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > _MAX_TITLE_UNITS - 1:
            return js_trim(title[:index]) + "…"
    return title  # pragma: no cover - the loop always returns for an over-long title


def _named(path: str) -> str:
    """A title for a page with neither a front matter title nor a level-1 heading: its name
    (its folder's, for an index page) written as words, never the file name itself:
    ``release-notes.md`` → ``Release notes``."""
    pure = PurePosixPath(path)
    name = pure.stem
    if name.lower() in _INDEX_NAMES:
        name = pure.parent.name or "Overview"
    words = _NAME_PARTS.sub(" ", name).strip()
    return words[:1].upper() + words[1:]


def _chunk_id(path: str, slug: str | None, part: int) -> str:
    """Readable and stable: the path and anchor folded to safe characters, plus a digest.

    The digest is of the exact path, anchor and part, so ids stay unique even when folding
    merges two names (``a/b.md`` and ``a-b.md``), and they change only when those change.
    """
    key = f"{path}#{slug}" if slug is not None else path
    if part > 1:
        key = f"{key}@{part}"
    stem = path[: -len(".md")] if path.endswith(".md") else path
    readable = f"{stem}-{slug}" if slug else stem
    folded = unicodedata.normalize("NFKD", readable).encode("ascii", "ignore").decode("ascii")
    folded = _NOT_ID.sub("-", folded).strip("-.")[:_MAX_READABLE_ID].rstrip("-.") or "doc"
    suffix = f"-{part}" if part > 1 else ""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{folded}{suffix}-{digest}"


def chunk_page(source: SourceDocument, tokens: Sequence[Token], *, prefix: str) -> MarkdownDocument:
    """The page's chunks, from its CommonMark ``tokens``, with links under ``prefix``.

    Raises:
        BuildError: the page yields a link that is not safe.
    """
    path, digest, front_title = source.path, source.sha256, source.front_matter.title
    sections = page_sections(tokens)
    # The page title is the first heading when it is an H1 before any other heading; its
    # section is the page's introduction and the title is left out of every heading path.
    first = sections[1] if len(sections) > 1 else None
    title_heading = first if first is not None and first.level == 1 else None
    if title_heading is not None:
        sections[0].blocks.extend(title_heading.blocks)
        del sections[1]
    doc_title = (
        _clip_title(front_title or (title_heading.heading if title_heading else ""))
        or _clip_title(_named(path))
        or "Document"
    )
    page = page_href(prefix, path)
    chunks: list[MarkdownChunk] = []
    stack: list[tuple[int, str]] = []
    for section in sections:
        if section.level:
            while stack and stack[-1][0] >= section.level:
                stack.pop()
            stack.append((section.level, section.heading))
        heading_path = tuple(heading for _, heading in stack)
        title = _clip_title(TITLE_SEPARATOR.join((doc_title, *heading_path))) or doc_title
        slug = section.slug if section.level else None
        href = f"{page}#{section.slug}" if section.slug else page
        if not is_safe_href(href):
            href = page
        if not is_safe_href(href):
            raise BuildError("the document's path gives a link that is not safe", file=path)
        for part, chunk_text in enumerate(_pack(section.blocks), start=1):
            chunks.append(
                MarkdownChunk(
                    id=_chunk_id(path, slug, part),
                    title=title,
                    href=href,
                    text=chunk_text,
                    path=path,
                    heading_path=heading_path,
                    document_title=doc_title,
                )
            )
    return MarkdownDocument(path, doc_title, digest, tuple(chunks))
