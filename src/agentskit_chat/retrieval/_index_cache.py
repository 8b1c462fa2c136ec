"""The on-disk cache of a docs assistant's start: what it builds from the pages, reused.

One cache entry is one SQLite file: the search index of the folder's chunks, and beside it what
else the start builds from the pages (:class:`StartParts`): the chunks' structure, the
knowledge artifact's canonical JSON, the term weights, the vocabulary and its words' stems. A
start whose pages are unchanged reads and hashes them, finds the entry, and parses (and stems)
nothing.

Each entry is named by a key: the SHA-256 of the formats, the chunking settings, the site id,
``SOURCE_DATE_EPOCH``, a fingerprint of the code that builds the parts (the stemmer's too),
the version of the Markdown parser it uses, and every page's path and content hash. Nothing in
an entry is trusted as is: the artifact is verified again by the protocol decoder (its content hash
recomputed), the chunks and the index are checked against the pages' hashes, and an entry
that fails any check is built again. Any other start builds a
new file under a temporary name and renames it into place, then removes the folder's older
files. A file is never written after it is named: change one page and the key changes.

The cache lives in ``$AGENTSKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentskit-chat``, else
``~/.cache/agentskit-chat``, under ``index/<16 hex of the docs folder's absolute path>/``.
Deleting it is always safe: the next start builds everything again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import markdown_it
import orjson

from agentskit_chat._terms import know_stems, known_stems, stemmer_files
from agentskit_chat.answers import ArtifactBuild, ArtifactBuildStats, DocsFolder, LeftOut
from agentskit_chat.errors import RetrievalError
from agentskit_chat.protocol import (
    decode_deterministic_site_config,
    verify_local_knowledge_artifact,
)

from ._corpus import MarkdownChunk, MarkdownCorpus, MarkdownDocument, _checked_prefix
from ._relevance import TermWeights
from ._results import IndexReport
from ._sqlite_fts import INDEX_FORMAT, SQLiteFTSRetriever

__all__ = [
    "CACHE_DIR_ENV",
    "START_FORMAT",
    "IndexNow",
    "StartParts",
    "cache_root",
    "cached_start",
    "holds_entry",
    "start_key",
]

#: The environment variable naming the cache folder.
CACHE_DIR_ENV: Final = "AGENTSKIT_CACHE_DIR"
#: The layout of the parts kept beside the index; part of every key.
START_FORMAT: Final = "start-2"
_PREFIX: Final = "index-"
_SUFFIX: Final = ".sqlite3"
#: The package folders (and top-level ``_*.py`` modules) whose code builds the parts: an
#: edited or upgraded copy of any of them never reads an entry another copy wrote.
_BUILDERS: Final = ("_*.py", "answers/*.py", "protocol/*.py", "retrieval/*.py", "assistant/*.py")
#: The parts an entry stores beside the index (and their digest).
_PARTS: Final = ("corpus", "artifact", "site", "build", "weights", "vocabulary", "stems")
_CREATE: Final = "CREATE TABLE start (name TEXT PRIMARY KEY, value BLOB NOT NULL)"

#: What :func:`cached_start` gives its ``make``: call it with the corpus once it is chunked,
#: and the search index is written meanwhile.
IndexNow = Callable[[MarkdownCorpus], None]


@dataclass(frozen=True, slots=True)
class StartParts:
    """What a docs assistant's start builds from the pages, besides the search index.

    Attributes:
        corpus: The chunked pages.
        build: The verified knowledge artifact and its site configuration.
        weights: How rare each term is across the chunks.
        vocabulary: How often the docs write each word (typo correction).
    """

    corpus: MarkdownCorpus
    build: ArtifactBuild
    weights: TermWeights
    vocabulary: Counter[str]


def cache_root() -> Path:
    """The cache folder: ``$AGENTSKIT_CACHE_DIR``, ``$XDG_CACHE_HOME/agentskit-chat`` or
    ``~/.cache/agentskit-chat``."""
    chosen = os.environ.get(CACHE_DIR_ENV, "").strip()
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "agentskit-chat"


@functools.cache
def _code_fingerprint() -> str:
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for pattern in _BUILDERS:
        for path in sorted(package.glob(pattern)):
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            try:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                digest.update(b"?")
    # The stems kept (and the weights and vocabulary counted by them) are the Snowball code's.
    for path in stemmer_files():
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


def start_key(folder: DocsFolder, *, site_id: str, href_prefix: str) -> str:
    """The hex SHA-256 naming the cache entry of ``folder``'s start (see the module docs).

    Raises:
        ConfigurationError: ``href_prefix`` cannot start a safe link.
    """
    settings = MarkdownCorpus((), _checked_prefix(href_prefix)).settings
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    # The parser shapes the chunks and the artifact as much as our code does: an upgraded
    # markdown-it-py never reads an entry an older one wrote.
    parser = markdown_it.__version__
    head = (
        f"{INDEX_FORMAT}\n{START_FORMAT}\n{settings}\n{_code_fingerprint()}\n{parser}\n"
        f"{site_id}\n{epoch}\n"
    )
    digest = hashlib.sha256(head.encode("utf-8", "surrogatepass"))
    for page in sorted(folder.documents, key=lambda page: page.path):
        digest.update(f"{page.path}\0{page.sha256}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _folder(root: Path, docs_dir: Path) -> Path:
    where = os.fspath(docs_dir.resolve()).encode("utf-8", "surrogatepass")
    return root / "index" / hashlib.sha256(where).hexdigest()[:16]


def holds_entry(docs_dir: Path, *, root: Path | None = None) -> bool:
    """Whether the cache holds an entry of the folder at ``docs_dir`` (for any version of its
    pages): when it holds none, a start parses every page (what a first start knows before it
    reads them). ``False`` when there is no cache folder to hold one.
    """
    try:
        where = _folder(cache_root() if root is None else root, docs_dir)
        return any(where.glob(f"{_PREFIX}*{_SUFFIX}"))
    except (RuntimeError, OSError):  # no home folder, or a folder that cannot be read
        return False


def cached_start(
    folder: DocsFolder,
    *,
    site_id: str,
    href_prefix: str,
    make: Callable[[IndexNow], StartParts],
    root: Path | None = None,
) -> tuple[StartParts, SQLiteFTSRetriever]:
    """The start's parts and search index: from the cache entry of ``folder``'s pages, else
    made with ``make`` (which parses the pages) and cached for the next start.

    ``make`` is given a function to call with the corpus as soon as the pages are chunked:
    the new entry's search index is then written in a thread (SQLite works outside the
    interpreter lock) while ``make`` builds the other parts. Not calling it only costs time.

    A cache that cannot be written (a read-only home folder, a full disk, no home folder)
    falls back to an index in memory: the cache saves time, it is never required.
    Synchronous (file and SQLite work): call it in a worker thread.

    Args:
        folder: The pages as read.
        site_id: The artifact's site id.
        href_prefix: What every link starts with.
        make: Builds the parts from the pages, when no valid entry holds them; given the
            function to call with the chunked corpus (:data:`IndexNow`).
        root: The cache folder; by default :func:`cache_root`.

    Raises:
        ConfigurationError: ``href_prefix`` cannot start a safe link.
        The errors of ``make``.
    """
    key = start_key(folder, site_id=site_id, href_prefix=href_prefix)
    try:
        where = _folder(cache_root() if root is None else root, folder.root)
    except RuntimeError:  # no cache folder given and no home folder to keep one in
        parts = make(_not_now)
        return parts, SQLiteFTSRetriever(":memory:", corpus=parts.corpus)
    path = where / f"{_PREFIX}{key[:32]}{_SUFFIX}"
    try:
        cached = path.is_file()
    except OSError:
        cached = False  # a cache folder that cannot be reached: built in memory below
    if cached:
        found = _load(path, folder, site_id)
        if found is not None:
            return found
    writer = _Writer(where, path)
    try:
        parts = make(writer.start)
    except BaseException:
        writer.discard()
        raise
    try:
        return parts, writer.finish(parts)
    except RetrievalError:
        return parts, SQLiteFTSRetriever(":memory:", corpus=parts.corpus)


# --- writing ------------------------------------------------------------------------------------


def _digest(values: dict[str, Any], corpus: MarkdownCorpus) -> bytes:
    """The SHA-256 of every stored part and every chunk's text, in a fixed order."""
    digest = hashlib.sha256()
    for name in _PARTS:
        value = bytes(values[name])
        digest.update(f"{name}\0{len(value)}\0".encode())
        digest.update(value)
    for chunk in corpus.chunks:
        text = chunk.text.encode("utf-8", "surrogatepass")
        digest.update(f"{len(text)}\0".encode())
        digest.update(text)
    return digest.digest()


def _encoded(parts: StartParts) -> dict[str, bytes]:
    corpus, build = parts.corpus, parts.build
    documents = [
        [
            document.path,
            document.title,
            document.sha256,
            [
                [c.id, c.title, c.href, list(c.heading_path), c.document_title]
                for c in document.chunks
            ],
        ]
        for document in corpus.documents
    ]
    values = {
        "corpus": orjson.dumps({"prefix": corpus.href_prefix, "documents": documents}),
        "artifact": build.artifact_json.encode("utf-8"),
        "site": build.site_json.encode("utf-8"),
        "build": orjson.dumps(
            {
                "left_out": [[i.kind, i.file, i.label, i.reason] for i in build.left_out],
                "stats": {
                    name: getattr(build.stats, name) for name in ArtifactBuildStats.__slots__
                },
            }
        ),
        "weights": orjson.dumps(
            {"sections": parts.weights.sections, "frequencies": dict(parts.weights.frequencies)}
        ),
        "vocabulary": orjson.dumps(dict(parts.vocabulary)),
        # The words' stems this process knows (all of them when it counted the words itself):
        # a start from the entry runs the (pure Python) stemmer on none of them.
        "stems": orjson.dumps(known_stems(parts.vocabulary)),
    }
    return {**values, "digest": _digest(values, corpus)}


def _not_now(corpus: MarkdownCorpus) -> None:
    """No entry is written: nothing to start."""


class _Writer:
    """A new entry: its search index written under a temporary name from when the corpus is
    ready (in a thread), then the other parts; renamed into place, opened read-only."""

    def __init__(self, where: Path, path: Path) -> None:
        self._where, self._path = where, path
        self._temporary = where / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        self._corpus: MarkdownCorpus | None = None
        self._thread: threading.Thread | None = None
        self._indexed: IndexReport | BaseException | None = None

    def start(self, corpus: MarkdownCorpus) -> None:
        """Start writing the index of ``corpus`` (once; later calls do nothing)."""
        if self._thread is None:
            self._corpus = corpus
            self._thread = threading.Thread(target=self._index, name="agentskit-index")
            self._thread.start()

    def _index(self) -> None:
        assert self._corpus is not None  # set before the thread starts
        try:
            self._indexed = _write_index(self._where, self._temporary, self._corpus)
        except BaseException as error:  # raised again by finish(), in the caller's thread
            self._indexed = error

    def _joined(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def finish(self, parts: StartParts) -> SQLiteFTSRetriever:
        """Write the other parts beside the index, rename the file into place, open it.

        Raises:
            RetrievalError: the cache folder or the file could not be written.
        """
        # Encoded while the thread may still write the index (SQLite works outside the GIL).
        encoded = _encoded(parts)
        self._joined()
        try:
            if self._corpus is not parts.corpus:  # started with no corpus, or another one
                self._remove_temporary()
                self._indexed = _write_index(self._where, self._temporary, parts.corpus)
            if isinstance(self._indexed, BaseException):
                raise self._indexed
            assert self._indexed is not None  # written above, or by the thread
            report = self._indexed
            connection = sqlite3.connect(self._temporary, isolation_level=None)
            try:
                connection.execute("BEGIN")
                connection.execute(_CREATE)
                connection.executemany(
                    "INSERT INTO start (name, value) VALUES (?, ?)", encoded.items()
                )
                connection.execute("COMMIT")
            finally:
                connection.close()
            os.replace(self._temporary, self._path)
        except (OSError, sqlite3.Error):
            raise RetrievalError("The index cache file could not be written.") from None
        finally:
            self._remove_temporary()
        for stale in self._where.glob(f"{_PREFIX}*{_SUFFIX}"):
            if stale != self._path:
                # A process still searching an older file keeps it open; it is not written again.
                with contextlib.suppress(OSError):
                    stale.unlink()
        return SQLiteFTSRetriever.read_only(self._path, corpus=parts.corpus, report=report)

    def discard(self) -> None:
        """Nothing is cached after all (the parts could not be made): remove what was written."""
        self._joined()
        self._remove_temporary()

    def _remove_temporary(self) -> None:
        temporary = self._temporary
        for leftover in (temporary, *(temporary.with_name(temporary.name + s) for s in _SIDE)):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _write_index(where: Path, temporary: Path, corpus: MarkdownCorpus) -> IndexReport:
    """The search index of ``corpus``, written whole to ``temporary`` (no journal beside it).

    Raises:
        RetrievalError: the cache folder or the file could not be written.
    """
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise RetrievalError("The index cache folder could not be created.") from None
    # Built in memory and copied into the file whole (SQLite's backup, no journal): the
    # file is renamed into place only when finished, and writing it in place (a write-ahead
    # log folded back into the file) took a fifth longer.
    built = SQLiteFTSRetriever(":memory:", corpus=corpus)
    try:
        report = built.last_report
        target = sqlite3.connect(temporary)
        try:
            target.execute("PRAGMA journal_mode=OFF")
            built.copy_into(target)
        finally:
            target.close()
    except (sqlite3.Error, RetrievalError):
        raise RetrievalError("The index cache file could not be written.") from None
    finally:
        built.close()
    assert report is not None  # a corpus was given
    return report


# --- reading ------------------------------------------------------------------------------------


def _load(
    path: Path, folder: DocsFolder, site_id: str
) -> tuple[StartParts, SQLiteFTSRetriever] | None:
    """The entry at ``path``, every part checked; ``None`` when anything does not hold."""
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    try:
        connection = sqlite3.connect(uri, uri=True)
        try:
            stored = dict(connection.execute("SELECT name, value FROM start").fetchall())
            bodies = dict(connection.execute("SELECT id, body FROM chunks").fetchall())
        finally:
            connection.close()
        parts = _decoded(stored, bodies, folder, site_id)
        if parts is None:
            return None
        return parts, SQLiteFTSRetriever.read_only(path, corpus=parts.corpus)
    except (sqlite3.Error, RetrievalError, ValueError, TypeError, KeyError, AttributeError):
        # orjson and pydantic errors are ValueErrors; a damaged entry is built again.
        return None


def _decoded(
    stored: dict[str, Any], bodies: dict[str, str], folder: DocsFolder, site_id: str
) -> StartParts | None:
    corpus = _corpus(orjson.loads(stored["corpus"]), bodies, folder)
    # The artifact proves itself (below); the other parts are checked against their digest.
    if corpus is None or bytes(stored["digest"]) != _digest(stored, corpus):
        return None
    build = _build(stored, site_id)
    if build is None:
        return None
    # Their digest matched: these are the values this module wrote (JSON keys are strings).
    weights = orjson.loads(stored["weights"])
    frequencies: Counter[str] = Counter(weights["frequencies"])
    vocabulary: Counter[str] = Counter(orjson.loads(stored["vocabulary"]))
    know_stems(orjson.loads(stored["stems"]))
    return StartParts(corpus, build, TermWeights(frequencies, int(weights["sections"])), vocabulary)


def _corpus(data: Any, bodies: dict[str, str], folder: DocsFolder) -> MarkdownCorpus | None:
    # Read as written: the caller checks the digest of every text before it uses the corpus.
    documents: list[MarkdownDocument] = []
    for path, title, sha256, chunks in data["documents"]:
        made = tuple(
            MarkdownChunk(chunk_id, chunk_title, href, bodies[chunk_id], path, tuple(heads), name)
            for chunk_id, chunk_title, href, heads, name in chunks
        )
        documents.append(MarkdownDocument(path, title, sha256, made))
    corpus = MarkdownCorpus(tuple(documents), data["prefix"], folder.root)
    manifest = {page.path: page.sha256 for page in folder.documents}
    if corpus.manifest != manifest or sum(len(d.chunks) for d in documents) != len(bodies):
        return None
    return corpus


def _build(stored: dict[str, Any], site_id: str) -> ArtifactBuild | None:
    site_json = bytes(stored["site"]).decode("utf-8")
    site = decode_deterministic_site_config(site_json)
    if not site.ok or site.value.site_id != site_id:
        return None
    artifact_json = bytes(stored["artifact"]).decode("utf-8")
    verified = verify_local_knowledge_artifact(
        artifact_json,
        expected_content_hash=site.value.artifact.content_hash,
        expected_site_id=site_id,
    )
    if not verified.ok:
        return None
    extra = orjson.loads(stored["build"])  # as written: the caller checked its digest
    left_out = tuple(LeftOut(*item) for item in extra["left_out"])
    stats = ArtifactBuildStats(**extra["stats"])
    return ArtifactBuild(verified.value, site.value, artifact_json, site_json, left_out, stats)


#: What SQLite may leave beside a database file.
_SIDE: Final = ("-wal", "-shm", "-journal")
