"""A folder of Markdown as a corpus of heading-aware, citable chunks.

Pages are read (a large folder's in batches, by child processes too: :mod:`._page_workers`),
parsed once, cut into sections (:mod:`._page_sections`) and chunked (:mod:`._chunker`); the
corpus holds the documents sorted by path, and the counts of their sections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath

from agentskit_chat._doclinks import github_slug
from agentskit_chat._terms import know_stems
from agentskit_chat.answers import SourceDocument, is_markdown_name
from agentskit_chat.answers._front_matter import DeclaredEntry
from agentskit_chat.answers._markdown import (
    Command,
    Heading,
    keep_reading,
    page_reading,
    parse_page,
)
from agentskit_chat.answers._markdown import MarkdownDocument as PageReading
from agentskit_chat.answers._mentions import Mention
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import is_safe_href

from ._chunker import (
    CHUNKER_VERSION,
    MAX_CHUNK_CHARS,
    TITLE_SEPARATOR,
    MarkdownChunk,
    MarkdownDocument,
    chunk_page,
)
from ._docs_folder import read_docs_folder
from ._page_workers import PageWorkers, children_for, pickle_by_fields
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
    "read_corpus",
]


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
    # Counted as the pages were read, when they were read in batches (see section_counts):
    # batch by batch, added up when first asked for.
    _counts: SectionCounts | None = field(default=None, init=False, repr=False, compare=False)
    _counted: Sequence[SectionCounts] = field(default=(), init=False, repr=False, compare=False)

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
        return read_corpus(documents, href_prefix=href_prefix, root=root)

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


def read_corpus(
    documents: Iterable[SourceDocument],
    *,
    href_prefix: str = "/docs",
    root: Path | None = None,
    workers: PageWorkers | None = None,
) -> MarkdownCorpus:
    """:meth:`MarkdownCorpus.from_documents`, read with ``workers`` when given (children
    started while the folder was read: they read pages with this process however large the
    folder, and are stopped when it is read).

    Raises:
        ConfigurationError: ``href_prefix`` cannot start a safe link.
        BuildError: a page yields a link that is not safe (a path over 2,048 units).
    """
    prefix = _checked_prefix(href_prefix)
    pages = sorted(documents, key=lambda page: page.path)
    chunked, counted = _documents(
        pages, prefix=prefix, children=children_for(pages), workers=workers
    )
    corpus = MarkdownCorpus(chunked, prefix, root)
    object.__setattr__(corpus, "_counted", counted)
    return corpus


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


def section_counts(corpus: MarkdownCorpus) -> SectionCounts:
    """The term and word counts of the corpus's sections (:mod:`._section_counts`): counted
    as the pages were read when they were read in batches (a large folder), else now. The
    counts are the corpus's own: do not change them.

    A corpus read in batches adds their counts up here, once (a start writes its search index
    meanwhile), and this process then knows the stems the children gave their pages' words
    (the start cache keeps those of the vocabulary)."""
    if corpus._counts is not None:
        return corpus._counts
    if not corpus._counted:
        return count_sections(_section_text(chunk) for chunk in corpus.chunks)
    counts = SectionCounts()
    for counted in corpus._counted:
        counts.add(counted)
    know_stems(counts.stems)
    object.__setattr__(corpus, "_counts", counts)
    object.__setattr__(corpus, "_counted", ())
    return counts


def _section_text(chunk: MarkdownChunk) -> str:
    return f"{chunk.title}\n{chunk.text}"


def _documents(
    pages: Sequence[SourceDocument],
    *,
    prefix: str,
    children: int,
    workers: PageWorkers | None = None,
) -> tuple[tuple[MarkdownDocument, ...], list[SectionCounts]]:
    """Every page chunked, in order; with ``children`` (or ``workers`` that started some),
    read in batches by child processes too (a large folder, :mod:`._page_workers`), which
    gives the very same documents, and the sections counted batch by batch (in order; none
    when the pages were read here one by one)."""
    helpers = PageWorkers() if workers is None else workers
    if not children and not helpers.started:
        return tuple(_document(page, prefix=prefix) for page in pages), []
    batches = helpers.read(
        pages, partial(read_batch, prefix=prefix), prefix=prefix, children=children
    )
    read_all: list[tuple[MarkdownDocument, PageReading]] = []
    for read, _ in batches:
        read_all.extend(read)
    documents: list[MarkdownDocument] = []
    for page, (document, reading) in zip(pages, read_all, strict=True):
        keep_reading(page, reading)
        documents.append(document)
    return tuple(documents), [counted for _, counted in batches]


# What read_batch gives, as a child sends it back (every class its result holds).
pickle_by_fields(
    MarkdownDocument, MarkdownChunk, PageReading, Heading, Command, Mention, DeclaredEntry
)


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
    return chunk_page(source, tokens, prefix=prefix), page_reading(source, tokens)
