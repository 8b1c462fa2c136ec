"""The embedded default retriever: SQLite FTS5 with BM25 over Markdown chunks.

The index lives in one file (or in memory). Beside the chunks it keeps a manifest of every
indexed document's SHA-256, so re-indexing a corpus only deletes and re-inserts the documents
that were added, changed or removed. All SQLite work runs in a worker thread, one statement
batch at a time on one connection; cancelling a search interrupts the running statement.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
import orjson

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource

from ._corpus import MarkdownCorpus
from ._query import query_phrases, query_terms
from ._results import (
    DEFAULT_TOP_K,
    IndexReport,
    RetrievedChunk,
    check_top_k,
    check_weight,
    diff_manifests,
    spread_pages,
    to_sources,
)

if TYPE_CHECKING:
    from agentskit_chat.service import RetrievalRequest

__all__ = ["INDEX_FORMAT", "SQLiteFTSRetriever", "build_index", "fts5_query"]

T = TypeVar("T")

_SCHEMA_VERSION = "1"
#: The index file's format, part of the key of a cached index (``_index_cache``).
INDEX_FORMAT = f"sqlite-fts5-{_SCHEMA_VERSION}"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    title TEXT NOT NULL,
    heading TEXT NOT NULL,
    context TEXT NOT NULL,
    href TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    heading, context, body, content='chunks', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, heading, context, body)
    VALUES (new.rowid, new.heading, new.context, new.body);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, heading, context, body)
    VALUES ('delete', old.rowid, old.heading, old.context, old.body);
END;
"""
_DROP = """
DROP TRIGGER IF EXISTS chunks_ai;
DROP TRIGGER IF EXISTS chunks_ad;
DROP TABLE IF EXISTS chunks_fts;
DROP TABLE IF EXISTS chunks;
DROP TABLE IF EXISTS files;
DROP TABLE IF EXISTS meta;
"""
#: With pages spread, this many times the hits asked for are ranked (at most ``_MAX_FETCH``).
_SPREAD_FETCH = 4
_MAX_FETCH = 200
# Ranked and cut to the limit first (a tie broken by the chunk id, as stable as the id);
# only the chunks kept are joined for their title, link and body.
_SEARCH = """
SELECT c.id, c.title, c.href, c.body, ranked.score
FROM (
    SELECT chunks_fts.rowid AS rowid, bm25(chunks_fts, ?, ?, 1.0) AS score, k.id AS id
    FROM chunks_fts JOIN chunks AS k ON k.rowid = chunks_fts.rowid
    WHERE chunks_fts MATCH ?
    ORDER BY score, k.id
    LIMIT ?
) AS ranked
JOIN chunks AS c ON c.rowid = ranked.rowid
ORDER BY ranked.score, ranked.id
"""


def fts5_query(terms: Sequence[str], phrases: Sequence[tuple[str, str]] = ()) -> str:
    """An FTS5 query that ORs ``terms`` and ``phrases``, each a quoted string, so no term is
    syntax (a quoted string of two words matches them next to each other)."""
    quoted = [*terms, *(" ".join(pair) for pair in phrases)]
    return " OR ".join('"' + text.replace('"', '""') + '"' for text in quoted)


class SQLiteFTSRetriever:
    """BM25 search over a corpus of Markdown chunks in an SQLite FTS5 index.

    Implements the :class:`~agentskit_chat.service.Retriever` port. In BM25 a section's own
    heading (the document title for its introduction) weighs ``title_weight`` times its body,
    and what it sits under (document title, parent headings) ``context_weight`` times, so a
    page's introduction is not outranked by every subsection that repeats the page title.
    Constructing opens the index
    file (creating it if needed) and, given a corpus, indexes it incrementally: call it at
    startup, or use :meth:`open` from async code so the event loop never blocks.

    Args:
        index_path: The index file, or ``":memory:"``.
        corpus: A corpus to index now (only changed documents are written).
        top_k: How many sources :meth:`retrieve` returns.
        title_weight: BM25 weight of the section's heading (the body weighs 1).
        context_weight: BM25 weight of the document title and parent headings.
        per_page: How many sections of one page may come before every other page's
            (:func:`spread_pages`); ``None`` keeps the plain BM25 order.

    Raises:
        ConfigurationError: ``top_k`` or a weight is out of range.
        RetrievalError: the file cannot be opened as an index.

    Example:
        >>> retriever = SQLiteFTSRetriever(".index.sqlite3", corpus=load_markdown_corpus("docs"))
        ... # doctest: +SKIP
        >>> [hit.href for hit in await retriever.search("rate limits", 3)]  # doctest: +SKIP
        ['/docs/operations#rate-limits', ...]
    """

    _last_report: IndexReport | None

    def __init__(
        self,
        index_path: str | os.PathLike[str] = ":memory:",
        *,
        corpus: MarkdownCorpus | None = None,
        top_k: int = DEFAULT_TOP_K,
        title_weight: float = 10.0,
        context_weight: float = 2.0,
        per_page: int | None = 2,
    ) -> None:
        self._configure(top_k, title_weight, context_weight, per_page)
        try:
            self._connection = sqlite3.connect(
                os.fspath(index_path), check_same_thread=False, isolation_level=None, timeout=30
            )
            self._prepare()
        except sqlite3.Error:
            raise RetrievalError("The SQLite index could not be opened.") from None
        if corpus is not None:
            self._last_report = self._locked(partial(self._index, corpus))

    def _configure(
        self, top_k: int, title_weight: float, context_weight: float, per_page: int | None
    ) -> None:
        if per_page is not None and (type(per_page) is not int or per_page < 1):
            raise ConfigurationError("per_page must be a positive integer or None")
        self._per_page = per_page
        self._top_k = check_top_k(top_k)
        self._weights = (check_weight(title_weight), check_weight(context_weight))
        self._lock = threading.Lock()
        self._guard = threading.Lock()
        self._running: object | None = None
        self._closed = False
        self._last_report = None

    @classmethod
    def read_only(
        cls,
        index_path: str | os.PathLike[str],
        *,
        corpus: MarkdownCorpus,
        top_k: int = DEFAULT_TOP_K,
        title_weight: float = 10.0,
        context_weight: float = 2.0,
        per_page: int | None = 2,
        report: IndexReport | None = None,
    ) -> SQLiteFTSRetriever:
        """Open a finished index file for searching only, if it is the index of ``corpus``.

        The file is opened read-only and immutable (no locks, no journal: it must never be
        written again, only replaced), and checked: same index format, same chunking settings,
        and the same SHA-256 for every document of ``corpus``, none more. Options are the
        constructor's; ``report`` is what :attr:`last_report` says (by default: nothing
        changed).

        Raises:
            ConfigurationError: ``top_k`` or a weight is out of range.
            RetrievalError: the file cannot be opened, or it is not the index of ``corpus``.
        """
        self = cls.__new__(cls)
        self._configure(top_k, title_weight, context_weight, per_page)
        uri = f"{Path(index_path).resolve().as_uri()}?mode=ro&immutable=1"
        try:
            self._connection = sqlite3.connect(
                uri, uri=True, check_same_thread=False, isolation_level=None
            )
            checked = self._locked(partial(self._matching, corpus))
        except (sqlite3.Error, RetrievalError):
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self._connection.close()
            raise RetrievalError("The SQLite index could not be opened.") from None
        if checked is None:
            self._connection.close()
            raise RetrievalError("The SQLite index is not the index of these documents.")
        self._last_report = checked if report is None else report
        return self

    def seal(self) -> None:
        """Close the index as one self-contained file (no write-ahead log beside it), to be
        opened :meth:`read_only` from then on."""
        with self._lock:
            if not self._closed:
                with contextlib.suppress(sqlite3.Error):
                    self._connection.execute("PRAGMA journal_mode=DELETE")
                self._closed = True
                self._connection.close()

    @classmethod
    async def open(
        cls,
        index_path: str | os.PathLike[str] = ":memory:",
        *,
        corpus: MarkdownCorpus | None = None,
        top_k: int = DEFAULT_TOP_K,
        title_weight: float = 10.0,
        context_weight: float = 2.0,
        per_page: int | None = 2,
    ) -> SQLiteFTSRetriever:
        """Construct in a worker thread: the same as the constructor, without blocking the loop."""
        build = partial(
            cls,
            index_path,
            corpus=corpus,
            top_k=top_k,
            title_weight=title_weight,
            context_weight=context_weight,
            per_page=per_page,
        )
        return await anyio.to_thread.run_sync(build)

    @property
    def last_report(self) -> IndexReport | None:
        """What the most recent indexing pass of this object changed."""
        return self._last_report

    # --- public async API ---------------------------------------------------------------------

    async def index_corpus(self, corpus: MarkdownCorpus) -> IndexReport:
        """Bring the index up to date with ``corpus``, touching only changed documents.

        Raises:
            RetrievalError: the index cannot be written (read-only file, disk full, closed).
        """
        report = await self._run(partial(self._index, corpus))
        self._last_report = report
        return report

    async def manifest(self) -> dict[str, str]:
        """``path → sha256`` of every indexed document."""
        return await self._run(self._manifest)

    async def search(self, query: str, top_k: int | None = None) -> list[RetrievedChunk]:
        """The chunks that best match ``query``, best first (at most ``top_k``).

        Any text is a valid query: it is reduced to plain search words and pairs of adjacent
        words first, so operators and quotes in it are just words. A query with no words
        returns an empty list. Sections are ranked by BM25, a pair found as written counting
        like one more word, then spread over pages (``per_page``).

        Raises:
            ConfigurationError: ``top_k`` is not in 1..100.
            RetrievalError: the index cannot be read or is closed.
        """
        limit = check_top_k(self._top_k if top_k is None else top_k)
        terms = query_terms(query)
        if not terms:
            return []
        match = fts5_query(terms, query_phrases(query))
        return await self._run(partial(self._search, match, limit))

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: the best chunks for ``request.query`` as grounded sources."""
        return to_sources(await self.search(request.query))

    async def aclose(self) -> None:
        """Close the index. Idempotent; later calls raise :class:`RetrievalError`."""
        if self._closed:
            return
        await anyio.to_thread.run_sync(self.close)

    def copy_into(self, target: sqlite3.Connection) -> None:
        """Copy the whole index into the database ``target`` (SQLite's online backup).

        Raises:
            RetrievalError: the index is closed, or the copy failed.
        """
        self._locked(partial(self._connection.backup, target))

    def close(self) -> None:
        """Close the index from synchronous code. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._connection.close()

    async def __aenter__(self) -> SQLiteFTSRetriever:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- threads ------------------------------------------------------------------------------

    async def _run(self, work: Callable[[], T]) -> T:
        token = object()

        def call() -> T:
            with self._lock:
                with self._guard:
                    self._running = token
                try:
                    return self._checked(work)
                finally:
                    with self._guard:
                        self._running = None

        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # The thread is abandoned; stop its statement so the connection frees up quickly.
            with self._guard:
                if self._running is token:
                    with contextlib.suppress(sqlite3.Error):
                        self._connection.interrupt()
            raise

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            return self._checked(work)

    def _checked(self, work: Callable[[], T]) -> T:
        if self._closed:
            raise RetrievalError("The SQLite index is closed.")
        try:
            return work()
        except sqlite3.Error:
            raise RetrievalError("The SQLite index could not be used.") from None

    # --- SQL (called with the lock held, in a worker thread) ----------------------------------

    def _prepare(self) -> None:
        connection = self._connection
        if connection.execute("PRAGMA database_list").fetchone()[2]:
            connection.execute("PRAGMA journal_mode=WAL")
        has_meta = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        version = (
            connection.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if has_meta
            else None
        )
        if version is not None and version[0] != _SCHEMA_VERSION:
            connection.executescript(_DROP)
        connection.executescript(_SCHEMA)
        connection.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (_SCHEMA_VERSION,)
        )

    def _matching(self, corpus: MarkdownCorpus) -> IndexReport | None:
        """An all-unchanged report when this index is ``corpus``'s, else ``None``."""
        meta = dict(self._connection.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != _SCHEMA_VERSION or meta.get("settings") != corpus.settings:
            return None
        manifest = corpus.manifest
        if self._manifest() != manifest:
            return None
        total = self._connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return IndexReport((), (), (), len(manifest), total, False)

    def _manifest(self) -> dict[str, str]:
        rows = self._connection.execute("SELECT path, sha256 FROM files ORDER BY path")
        return dict(rows.fetchall())

    def _index(self, corpus: MarkdownCorpus) -> IndexReport:
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
            rebuilt = row is not None and row[0] != corpus.settings
            if rebuilt:
                connection.execute("DELETE FROM chunks")
                connection.execute("DELETE FROM files")
            stored = {} if rebuilt else self._manifest()
            added, updated, removed, unchanged = diff_manifests(stored, corpus.manifest)
            for path in (*updated, *removed):
                connection.execute("DELETE FROM chunks WHERE path = ?", (path,))
                connection.execute("DELETE FROM files WHERE path = ?", (path,))
            chunks: list[tuple[str, ...]] = []
            files: list[tuple[str, ...]] = []
            for path in (*added, *updated):
                document = corpus.document(path)
                assert document is not None  # the paths come from the corpus
                chunks.extend(
                    (c.id, c.path, c.title, c.heading, c.context, c.href, c.text)
                    for c in document.chunks
                )
                files.append((path, document.sha256))
            _insert(connection, "chunks (id, path, title, heading, context, href, body)", chunks)
            _insert(connection, "files (path, sha256)", files)
            connection.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('settings', ?)",
                (corpus.settings,),
            )
            total = connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise
        return IndexReport(added, updated, removed, unchanged, total, rebuilt)

    def _search(self, match: str, limit: int) -> list[RetrievedChunk]:
        # Spreading needs more candidates than are returned: the next pages' best sections.
        fetch = limit if self._per_page is None else min(limit * _SPREAD_FETCH, _MAX_FETCH)
        rows = self._connection.execute(_SEARCH, (*self._weights, match, fetch)).fetchall()
        hits = [
            RetrievedChunk(id=i, title=t, href=h, text=b, score=0.0 - s) for i, t, h, b, s in rows
        ]
        if self._per_page is not None:
            hits = spread_pages(hits, self._per_page)
        return hits[:limit]


def _insert(connection: sqlite3.Connection, into: str, rows: Sequence[tuple[str, ...]]) -> None:
    """Insert ``rows`` into ``into`` (``table (columns)``) with one statement when it can.

    The rows go as one JSON array that SQLite reads itself: no return to Python between rows
    (a large folder's index is written several times faster, and in another thread it does not
    wait for the interpreter lock at every row). Row by row when this SQLite has no JSON
    functions, or a value would not come back from JSON as it is (a NUL character).
    """
    if not rows:
        return
    width = len(rows[0])
    try:
        array = orjson.dumps(rows)
    except orjson.JSONEncodeError:  # lone surrogates: refused row by row as before
        array = b""
    if array and b"\\u0000" not in array:
        values = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(width))
        try:
            connection.execute(f"INSERT INTO {into} SELECT {values} FROM json_each(?)", (array,))
            return
        except sqlite3.OperationalError:  # no JSON functions in this SQLite
            pass
    marks = ", ".join("?" * width)
    connection.executemany(f"INSERT INTO {into} VALUES ({marks})", rows)


def build_index(index_path: str | os.PathLike[str], corpus: MarkdownCorpus) -> IndexReport:
    """Create or update the index file at ``index_path`` for ``corpus``, then close it.

    Synchronous, for command lines and build steps.

    Raises:
        RetrievalError: the file cannot be opened or written.
    """
    retriever = SQLiteFTSRetriever(index_path, corpus=corpus)
    try:
        report = retriever.last_report
        assert report is not None  # a corpus was given
        return report
    finally:
        retriever.close()
