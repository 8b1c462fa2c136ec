"""Markdown documents as data: what a docs folder holds, once read.

A :class:`SourceDocument` is one page: its path inside the folder, its text with one set of
normalizations (byte-order mark removed, every line end a LF, lone surrogates replaced), the
SHA-256 of what was read, and its front matter, already checked. A :class:`DocsFolder` is every
page of a folder plus what was not read (symbolic links). Reading files from disk is not done
here; :func:`agentskit_chat.retrieval.read_docs_folder` does it, with one rule for every
consumer, and the artifact producer and the retrieval corpus both take these values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

from agentskit_chat.errors import BuildError

from ._candidates import LeftOut
from ._front_matter import FrontMatter, read_front_matter

__all__ = ["MARKDOWN_SUFFIXES", "DocsFolder", "SourceDocument", "is_markdown_name"]

#: The file endings of Markdown pages, in any letter case.
MARKDOWN_SUFFIXES: Final = (".md", ".markdown")


def is_markdown_name(name: str) -> bool:
    """Whether a file name is a Markdown page: ``.md`` or ``.markdown`` in any case, not hidden."""
    return not name.startswith(".") and name.lower().endswith(MARKDOWN_SUFFIXES)


def normalize_text(text: str) -> str:
    """One page text as every consumer reads it: no BOM, LF line ends, no lone surrogates."""
    # In-memory text may hold lone surrogates, which no database or JSON encoder can store.
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One Markdown page of a docs folder.

    Attributes:
        path: The page's path inside the folder, with ``/`` separators (``guides/setup.md``).
        text: The page's text, normalized (no BOM, LF line ends, no lone surrogates).
        sha256: The hex SHA-256 of the bytes read (of the UTF-8 text for in-memory pages).
        display: How messages name the page (its path on disk, or ``path``).
        front_matter: The page's front matter, checked: a fallback title and declared entries.
    """

    path: str
    text: str
    sha256: str
    display: str
    front_matter: FrontMatter
    # What the artifact producer reads from the page, when the corpus chunker already read it
    # from the same parse (``answers._markdown.remember_reading``): each page is parsed once.
    _reading: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def body(self) -> str:
        """The Markdown after the front matter block (the whole text when there is none)."""
        if not self.front_matter.lines:
            return self.text
        return "\n".join(self.text.split("\n")[self.front_matter.lines :])

    @classmethod
    def from_text(
        cls, path: str, text: str, *, display: str | None = None, sha256: str | None = None
    ) -> SourceDocument:
        """A page from its text.

        Args:
            path: The relative path, ending in ``.md`` or ``.markdown``; no ``..``.
            text: The page's text.
            display: How messages name the page; by default ``path``.
            sha256: The digest of the bytes the text was read from; by default that of the
                text's UTF-8 encoding.

        Raises:
            BuildError: the path is not a relative Markdown path, or the front matter is
                malformed (unclosed, not YAML, or a declared entry that breaks a rule), naming
                the file and the line.
        """
        pure = PurePosixPath(path)
        shown = path if display is None else display
        if (
            pure.is_absolute()
            or ".." in pure.parts
            or not pure.name.lower().endswith(MARKDOWN_SUFFIXES)
        ):
            raise BuildError("a page's path must be a relative .md or .markdown path", file=shown)
        digest = sha256 or hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        normalized = normalize_text(text)
        return cls(pure.as_posix(), normalized, digest, shown, read_front_matter(normalized, shown))


@dataclass(frozen=True, slots=True)
class DocsFolder:
    """Every page of a docs folder, sorted by path, and what was not read.

    Attributes:
        root: The folder the pages were read from.
        documents: The pages, sorted by path.
        left_out: Files and folders that were not read (symbolic links), sorted by path.
    """

    root: Path
    documents: tuple[SourceDocument, ...]
    left_out: tuple[LeftOut, ...] = ()
