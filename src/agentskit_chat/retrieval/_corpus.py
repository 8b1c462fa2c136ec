"""A folder of Markdown as a corpus of heading-aware, citable chunks.

Each section under a heading becomes one chunk (long sections are split at paragraph
boundaries). A chunk knows its document title and heading path, a safe root-relative link with a
GitHub-style anchor, and a stable safe identifier, so any retriever can return it as a grounded
source as is.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.token import Token

from agentskit_chat._doclinks import HeadingSlugger, github_slug, page_href
from agentskit_chat._terms import know_stems
from agentskit_chat.answers import SourceDocument, is_markdown_name
from agentskit_chat.answers._markdown import MarkdownDocument as PageReading
from agentskit_chat.answers._markdown import keep_reading, page_reading, parse_page
from agentskit_chat.errors import BuildError, ConfigurationError
from agentskit_chat.protocol import is_safe_href
from agentskit_chat.protocol._text import js_trim, utf16_len

from ._docs_folder import read_docs_folder
from ._page_workers import children_for, read_shared
from ._section_counts import SectionCounts, count_sections

__all__ = [
    "CHUNKER_VERSION",
    "MAX_CHUNK_CHARS",
    "TITLE_SEPARATOR",
    "MarkdownChunk",
    "MarkdownCorpus",
    "MarkdownDocument",
    "chunk_markdown",
    "github_slug",
    "load_markdown_corpus",
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
_TAG = re.compile(r"<!--.*?-->|<[^>]*>", re.DOTALL)
_SPACES = re.compile(r"\s+")
_NOT_ID = re.compile(r"[^A-Za-z0-9.-]+")
#: Reads again, with GFM tables, the text of a paragraph that holds one (see ``_tokens``).
_TABLES = MarkdownIt("commonmark").enable("table")
_LANGUAGE = re.compile(r"[a-z0-9][a-z0-9+#-]{0,19}")
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


@dataclass(frozen=True, slots=True)
class MarkdownCorpus:
    """Every document of a folder, sorted by path.

    Attributes:
        documents: The documents, sorted by path.
        href_prefix: What every link starts with (``/docs``; empty for the site root).
        root: The folder the documents were read from, when they came from disk.
    """

    documents: tuple[MarkdownDocument, ...]
    href_prefix: str = "/docs"
    root: Path | None = None
    _by_path: dict[str, MarkdownDocument] = field(init=False, repr=False, compare=False)
    # Counted as the pages were read, when they were read in batches (see section_counts).
    _counts: SectionCounts | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {d.path: d for d in self.documents})

    @property
    def chunks(self) -> tuple[MarkdownChunk, ...]:
        """Every chunk of every document, in document order."""
        return tuple(chunk for document in self.documents for chunk in document.chunks)

    @property
    def manifest(self) -> dict[str, str]:
        """``path → sha256`` of every document: what an index compares to re-index incrementally."""
        return {document.path: document.sha256 for document in self.documents}

    @property
    def settings(self) -> str:
        """What, besides content, shapes the chunks; an index built with other settings rebuilds."""
        return f"chunker={CHUNKER_VERSION};href_prefix={self.href_prefix}"

    def document(self, path: str) -> MarkdownDocument | None:
        """The document at ``path``, or ``None``."""
        return self._by_path.get(path)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[SourceDocument],
        *,
        href_prefix: str = "/docs",
        root: Path | None = None,
    ) -> MarkdownCorpus:
        """A corpus from pages already read (:func:`~agentskit_chat.retrieval.read_docs_folder`).

        Raises:
            ConfigurationError: ``href_prefix`` cannot start a safe link.
            BuildError: a page yields a link that is not safe (a path over 2,048 units).
        """
        prefix = _checked_prefix(href_prefix)
        pages = sorted(documents, key=lambda page: page.path)
        chunked, counts = _documents(pages, prefix=prefix, children=children_for(pages))
        corpus = cls(chunked, prefix, root)
        object.__setattr__(corpus, "_counts", counts)
        return corpus

    @classmethod
    def from_texts(cls, texts: Mapping[str, str], *, href_prefix: str = "/docs") -> MarkdownCorpus:
        """A corpus from in-memory Markdown, keyed by relative path (``guides/setup.md``).

        Raises:
            ConfigurationError: ``href_prefix`` cannot start a safe link, or a path is not a
                relative ``.md`` or ``.markdown`` path.
            BuildError: a page's front matter is malformed, or it yields a link that is not
                safe (a path over 2,048 units).
        """
        for path in texts:
            pure = PurePosixPath(path)
            if pure.is_absolute() or ".." in pure.parts or not is_markdown_name(pure.name):
                raise ConfigurationError("corpus paths must be relative '.md' paths")
        return cls.from_documents(
            (SourceDocument.from_text(path, text) for path, text in texts.items()),
            href_prefix=href_prefix,
        )


def load_markdown_corpus(docs_dir: str | Path, *, href_prefix: str = "/docs") -> MarkdownCorpus:
    """Read every page under ``docs_dir`` with :func:`read_docs_folder` and chunk it.

    The folder is read by the same rule as the artifact producer's (``.md`` and ``.markdown``
    in any case, hidden names and symbolic links skipped, front matter checked); a front matter
    ``title`` names the document. Links are ``href_prefix`` + the path without its suffix
    (``index`` and ``README`` pages stand for their folder) + ``#anchor``.

    Args:
        docs_dir: The folder to read.
        href_prefix: What every link starts with: a root-relative path such as ``/docs``, the
            empty string for the site root, or an ``https://`` origin.

    Returns:
        The corpus, documents sorted by path.

    Raises:
        ConfigurationError: ``href_prefix`` cannot start a safe link.
        BuildError: the folder does not exist, or a page cannot be read, is not UTF-8 or has
            malformed front matter.

    Example:
        >>> corpus = load_markdown_corpus("docs")  # doctest: +SKIP
        >>> corpus.chunks[0].href  # doctest: +SKIP
        '/docs/retrieval'
    """
    _checked_prefix(href_prefix)
    folder = read_docs_folder(docs_dir)
    return MarkdownCorpus.from_documents(
        folder.documents, href_prefix=href_prefix, root=folder.root
    )


def chunk_markdown(text: str, *, path: str, href_prefix: str = "/docs") -> MarkdownDocument:
    """Chunk one Markdown text as the document at ``path`` (relative, ``.md`` or ``.markdown``).

    Raises:
        ConfigurationError: ``href_prefix`` cannot start a safe link.
        BuildError: the path is not a Markdown path, the front matter is malformed, or the
            document yields a link that is not safe.
    """
    return _document(SourceDocument.from_text(path, text), prefix=_checked_prefix(href_prefix))


# --- reading ------------------------------------------------------------------------------------


def _checked_prefix(href_prefix: str) -> str:
    prefix = href_prefix.rstrip("/")
    if "?" in prefix or "#" in prefix or not is_safe_href(prefix + "/x"):
        raise ConfigurationError(
            "href_prefix must be empty, a root-relative path or an http(s) origin"
        )
    return prefix


# --- Markdown to sections -----------------------------------------------------------------------


@dataclass(slots=True)
class _Section:
    level: int  # 0 for the text before the first heading
    heading: str
    slug: str
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)


def _code_span(code: str) -> str:
    """``code`` as a Markdown code span, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall("`+", code)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{ticks}{pad}{code}{pad}{ticks}"


def _inline_text(token: Token, *, code: bool = True, images: bool = True) -> str:
    """The inline token's text, an image read as its alt text; without ``images``, nothing
    when the token holds images and no text of its own (a logo, a row of badges, a figure:
    a section's text leaves them out, they say nothing a question asks about)."""
    if not images and _only_images(token):
        return ""
    parts: list[str] = []
    for child in token.children or ():
        if child.type == "code_inline" and code:
            parts.append(_code_span(child.content))
        elif child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
    return "".join(parts).strip()


def _table_row(cells: Sequence[str], *, header: bool) -> str:
    """A table row as Markdown (``| a | b |``); a header row carries the rule below it."""
    line = "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
    return f"{line}\n|{' --- |' * len(cells)}" if header else line


def _code_kind(info: str) -> str:
    """``code``, or ``code:<language>`` when the fence names a plain language."""
    words = info.strip().strip("{}").split()
    language = words[0].lstrip(".").lower() if words else ""
    return f"code:{language}" if _LANGUAGE.fullmatch(language) else "code"


def _tokens(tokens: Sequence[Token]) -> list[Token]:
    """The page's CommonMark tokens with each paragraph that holds a GFM table read as one.

    The page was parsed once as CommonMark (:func:`~agentskit_chat.answers._markdown.parse_page`,
    shared with exact answers), where a table is a paragraph of ``|`` lines; only such a
    paragraph's own text is read again, with the table rule.
    """
    out: list[Token] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        inline = tokens[index + 1] if index + 1 < len(tokens) else None
        if (
            token.type == "paragraph_open"
            and inline is not None
            and "|" in inline.content
            and "\n" in inline.content
        ):
            read = _TABLES.parse(inline.content)
            if any(part.type == "table_open" for part in read):
                out.extend(read)
                index += 3  # paragraph_open, inline, paragraph_close
                continue
        out.append(token)
        index += 1
    return out


def _only_images(token: Token) -> bool:
    """Whether ``token`` holds an image and no text but spaces (links around images too)."""
    children = token.children or ()
    return any(child.type == "image" for child in children) and all(
        child.type in ("image", "link_open", "link_close", "softbreak", "hardbreak")
        or (child.type == "text" and not child.content.strip())
        for child in children
    )


def _sections(page_tokens: Sequence[Token]) -> list[_Section]:
    slugger = HeadingSlugger()
    sections = [_Section(0, "", "")]
    tokens = _tokens(page_tokens)
    marker: str | None = None
    row: list[str] | None = None
    row_images = False  # whether a cell held only images (a row of badges)
    head_at: int | None = None  # where the open table's header row is, in its section
    in_head = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        blocks = sections[-1].blocks
        if token.type == "heading_open":
            heading = _inline_text(tokens[index + 1], code=False) if index + 1 < len(tokens) else ""
            sections.append(_Section(int(token.tag[1]), heading, slugger.slug(heading)))
            index += 3  # heading_open, inline, heading_close
            continue
        if token.type == "list_item_open":
            marker = f"{token.info}{token.markup} " if token.info else "- "
        elif token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row, row_images = [], False
        elif token.type == "tr_close" and row is not None:
            # A row of badges or logos (images beside at most a label) says nothing.
            badges = row_images and sum(1 for cell in row if cell) <= 1
            if in_head:
                head_at = len(blocks)
                blocks.append(("row", _table_row(row, header=True)))
            elif any(row) and not badges:
                blocks.append(("row", _table_row(row, header=False)))
            row = None
        elif token.type == "table_close":
            # A table whose every row was left out goes with its header.
            if head_at is not None and head_at == len(blocks) - 1:
                blocks.pop()
            head_at = None
        elif token.type == "inline":
            text = _inline_text(token, images=False)
            if row is not None:
                row.append(text)
                row_images = row_images or _only_images(token)
            elif text:
                blocks.append(("item", marker + text) if marker else ("para", text))
            marker = None
        elif token.type in ("fence", "code_block"):
            code = token.content.rstrip("\n")
            if code.strip():
                blocks.append((_code_kind(token.info if token.type == "fence" else ""), code))
            marker = None
        elif token.type == "html_block":
            html = _SPACES.sub(" ", _TAG.sub(" ", token.content)).strip()
            if html:
                blocks.append(("para", html))
        index += 1
    return sections


# --- sections to chunks -------------------------------------------------------------------------


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


def section_counts(corpus: MarkdownCorpus) -> SectionCounts:
    """The term and word counts of the corpus's sections (:mod:`._section_counts`): counted
    as the pages were read when they were read in batches (a large folder), else now. The
    counts are the corpus's own: do not change them."""
    if corpus._counts is not None:
        return corpus._counts
    return count_sections(_section_text(chunk) for chunk in corpus.chunks)


def _section_text(chunk: MarkdownChunk) -> str:
    return f"{chunk.title}\n{chunk.text}"


def _documents(
    pages: Sequence[SourceDocument], *, prefix: str, children: int
) -> tuple[tuple[MarkdownDocument, ...], SectionCounts | None]:
    """Every page chunked, in order; with ``children``, read in batches by child processes
    too (a large folder, :mod:`._page_workers`), which gives the very same documents, and the
    sections counted batch by batch."""
    if not children:
        return tuple(_document(page, prefix=prefix) for page in pages), None
    batches = read_shared(
        pages, partial(read_batch, prefix=prefix), prefix=prefix, children=children
    )
    counts = SectionCounts()
    read_all: list[tuple[MarkdownDocument, PageReading]] = []
    for read, counted in batches:
        read_all.extend(read)
        counts.add(counted)
    # The children stemmed their pages' words: this process knows the stems now (the start
    # cache keeps those of the vocabulary).
    know_stems(counts.stems)
    documents: list[MarkdownDocument] = []
    for page, (document, reading) in zip(pages, read_all, strict=True):
        keep_reading(page, reading)
        documents.append(document)
    return tuple(documents), counts


def read_batch(
    pages: Sequence[SourceDocument], *, prefix: str
) -> tuple[list[tuple[MarkdownDocument, PageReading]], SectionCounts]:
    """:func:`read_page` of each page, and the counts of their sections. Pure.

    Raises:
        BuildError: a page yields a link that is not safe.
    """
    read = [read_page(page, prefix=prefix) for page in pages]
    texts = (_section_text(chunk) for document, _ in read for chunk in document.chunks)
    return read, count_sections(texts)


def _document(source: SourceDocument, *, prefix: str) -> MarkdownDocument:
    # One parse of the page: the chunks come from it, and so does what the artifact producer
    # reads, kept on the page for it.
    document, reading = read_page(source, prefix=prefix)
    keep_reading(source, reading)
    return document


def read_page(source: SourceDocument, *, prefix: str) -> tuple[MarkdownDocument, PageReading]:
    """The page as chunks, and what the artifact producer reads from it: one parse of the page.

    Pure (the page is left as it is), so that pages can be read in other processes.

    Raises:
        BuildError: the page yields a link that is not safe.
    """
    tokens = parse_page(source)
    return _chunked(source, tokens, prefix=prefix), page_reading(source, tokens)


def _chunked(source: SourceDocument, tokens: Sequence[Token], *, prefix: str) -> MarkdownDocument:
    path, digest, front_title = source.path, source.sha256, source.front_matter.title
    sections = _sections(tokens)
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
