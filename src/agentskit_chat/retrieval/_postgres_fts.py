"""Shared full-text retrieval in PostgreSQL, for many workers on many machines.

Chunks live in one table with a generated ``tsvector`` column (the section's heading with
weight A, the document title and parent headings B, the body C) and a GIN index; a manifest
table holds each indexed document's SHA-256 so re-indexing only rewrites changed documents.
Queries are ``websearch_to_tsquery('english', ...)`` over an OR-list of plain words (never the
user's raw text), ranked with ``ts_rank_cd`` (no length normalization: it ranked best on our
question sets). psycopg 3 and ``psycopg_pool`` are imported when a retriever is built (the
``postgres`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio

from agentskit_chat._drivers import postgres_pool, require_extra
from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource

from ._corpus import MarkdownCorpus
from ._query import query_terms
from ._results import (
    DEFAULT_TOP_K,
    IndexReport,
    RetrievedChunk,
    check_top_k,
    check_weight,
    diff_manifests,
    to_sources,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composed
    from psycopg_pool import AsyncConnectionPool

    from agentskit_chat.service import RetrievalRequest

__all__ = ["DEFAULT_CHUNK_TABLE", "PostgresFTSRetriever"]

P = ParamSpec("P")
T = TypeVar("T")

#: The default chunk table; the manifest and settings tables add ``_files`` and ``_meta``.
DEFAULT_CHUNK_TABLE = "agentskit_chunks"

# Short enough that every derived name (``<table>_document_idx``) fits PostgreSQL's 63 bytes.
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {chunks} (
        id text PRIMARY KEY,
        path text NOT NULL,
        title text NOT NULL,
        heading text NOT NULL,
        context text NOT NULL,
        href text NOT NULL,
        body text NOT NULL,
        document tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english', heading), 'A')
            || setweight(to_tsvector('english', context), 'B')
            || setweight(to_tsvector('english', body), 'C')
        ) STORED
    )""",
    "CREATE INDEX IF NOT EXISTS {document_idx} ON {chunks} USING GIN (document)",
    "CREATE INDEX IF NOT EXISTS {path_idx} ON {chunks} (path)",
    "CREATE TABLE IF NOT EXISTS {files} (path text PRIMARY KEY, sha256 text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
)
_DROP = "DROP TABLE IF EXISTS {chunks}, {files}, {meta}"
_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"
# Ranked and cut to the limit first; only the chunks kept are joined for their bodies.
_SEARCH = """SELECT c.id, c.title, c.href, c.body, ranked.score
FROM (
    SELECT id, ts_rank_cd(%s::float4[], document, query) AS score
    FROM {chunks}, websearch_to_tsquery('english', %s) AS query
    WHERE document @@ query
    ORDER BY score DESC, id
    LIMIT %s
) AS ranked
JOIN {chunks} AS c ON c.id = ranked.id
ORDER BY ranked.score DESC, c.id"""


def _failure(exc: Exception) -> RetrievalError | None:
    import psycopg  # noqa: PLC0415
    import psycopg_pool  # noqa: PLC0415

    if isinstance(exc, psycopg.Error | psycopg_pool.PoolTimeout):
        return RetrievalError("The PostgreSQL search index could not be used.")
    return None


class PostgresFTSRetriever:
    """Full-text search over Markdown chunks in a PostgreSQL table, shared by every worker.

    Implements the :class:`~agentskit_chat.service.Retriever` port with the same ``search`` and
    ``retrieve`` API as :class:`SQLiteFTSRetriever`. The pool opens and the tables are created
    on first use (or on ``async with``); :meth:`index_corpus` is safe to run from several
    workers at once (an advisory lock serializes it).

    Args:
        url_or_pool: A libpq URL (``postgresql://user:pass@host/db``) or an open
            ``psycopg_pool.AsyncConnectionPool`` (borrowed, left open).
        table: The chunk table, a plain identifier of at most 40 characters.
        top_k: How many sources :meth:`retrieve` returns.
        title_weight: Rank weight of the section's heading, relative to its body (as in
            :class:`SQLiteFTSRetriever`).
        context_weight: Rank weight of the document title and parent headings.
        min_size: Connections an owned pool keeps open.
        max_size: Connections an owned pool may open.
        timeout: Seconds an operation waits for a pooled connection.

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        ConfigurationError: ``table``, ``top_k`` or a weight is invalid.

    Example:
        >>> async with PostgresFTSRetriever("postgresql://app@127.0.0.1/app") as retriever:
        ...     await retriever.index_corpus(load_markdown_corpus("docs"))  # doctest: +SKIP
        ...     hits = await retriever.search("rate limits", 3)
    """

    def __init__(
        self,
        url_or_pool: str | AsyncConnectionPool[Any],
        *,
        table: str = DEFAULT_CHUNK_TABLE,
        top_k: int = DEFAULT_TOP_K,
        title_weight: float = 10.0,
        context_weight: float = 2.0,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        require_extra("PostgresFTSRetriever", "postgres", "psycopg", "psycopg_pool")
        from psycopg import sql  # noqa: PLC0415

        if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
            raise ConfigurationError("table must be a plain identifier of at most 40 characters")
        self._top_k = check_top_k(top_k)
        heading, context = check_weight(title_weight), check_weight(context_weight)
        top = max(heading, context, 1.0)
        # ts_rank_cd weights are {D, C, B, A} in 0..1: body C, context B, heading A.
        self._weights = [0.0, 1.0 / top, context / top, heading / top]
        self._table = table
        names = {
            "chunks": sql.Identifier(table),
            "files": sql.Identifier(f"{table}_files"),
            "meta": sql.Identifier(f"{table}_meta"),
            "document_idx": sql.Identifier(f"{table}_document_idx"),
            "path_idx": sql.Identifier(f"{table}_path_idx"),
        }

        def compose(template: str) -> Composed:
            return sql.SQL(template).format(**names)

        self._schema = tuple(compose(statement) for statement in _SCHEMA)
        self._drop = compose(_DROP)
        self._search_sql = compose(_SEARCH)
        self._q = {
            "settings": compose("SELECT value FROM {meta} WHERE key = 'settings'"),
            "manifest": compose("SELECT path, sha256 FROM {files} ORDER BY path"),
            "clear": compose("TRUNCATE {chunks}, {files}"),
            "delete_chunks": compose("DELETE FROM {chunks} WHERE path = %s"),
            "delete_file": compose("DELETE FROM {files} WHERE path = %s"),
            "insert_chunk": compose(
                "INSERT INTO {chunks} (id, path, title, heading, context, href, body)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)"
            ),
            "insert_file": compose("INSERT INTO {files} (path, sha256) VALUES (%s, %s)"),
            "settle": compose(
                "INSERT INTO {meta} (key, value) VALUES ('settings', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            "count": compose("SELECT count(*) FROM {chunks}"),
        }
        self._pool, self._owns_pool = postgres_pool(
            url_or_pool,
            user="PostgresFTSRetriever",
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        self._ready = False
        self._ready_lock = anyio.Lock()
        self._closed = False

    # --- public API ---------------------------------------------------------------------------

    async def index_corpus(self, corpus: MarkdownCorpus) -> IndexReport:
        """Bring the table up to date with ``corpus``, touching only changed documents.

        Raises:
            RetrievalError: the server is unreachable or the retriever is closed.
        """
        return await self._guarded(self._index, corpus)

    async def manifest(self) -> dict[str, str]:
        """``path → sha256`` of every indexed document."""
        return await self._guarded(self._manifest)

    async def search(self, query: str, top_k: int | None = None) -> list[RetrievedChunk]:
        """The chunks that best match ``query``, best first (at most ``top_k``).

        Any text is a valid query; a query with no words returns an empty list.

        Raises:
            ConfigurationError: ``top_k`` is not in 1..100.
            RetrievalError: the server is unreachable or the retriever is closed.
        """
        limit = check_top_k(self._top_k if top_k is None else top_k)
        terms = query_terms(query)
        if not terms:
            return []
        return await self._guarded(self._search, " or ".join(terms), limit)

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: the best chunks for ``request.query`` as grounded sources."""
        return to_sources(await self.search(request.query))

    async def drop(self) -> None:
        """Drop the chunk, manifest and settings tables (the next use recreates them)."""

        async def work() -> None:
            async with self._pool.connection() as connection:
                await connection.execute(self._drop)
            self._ready = False

        await self._guarded(work)

    async def aclose(self) -> None:
        """Stop using the pool, and close it if this retriever opened it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> PostgresFTSRetriever:
        """Open the pool and create the tables now, so a bad configuration fails at startup."""
        await self._guarded(self._noop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- internals ----------------------------------------------------------------------------

    async def _guarded(
        self, work: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        if self._closed:
            raise RetrievalError("The PostgreSQL retriever is closed.")
        try:
            await self._ensure_ready()
            return await work(*args, **kwargs)
        except Exception as exc:
            error = _failure(exc)
            if error is None:
                raise
            raise error from None

    async def _noop(self) -> None:
        return None

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            if self._owns_pool:
                await self._pool.open(wait=False)
            async with self._pool.connection() as connection, connection.transaction():
                await self._lock(connection)
                for statement in self._schema:
                    await connection.execute(statement)
            self._ready = True

    async def _lock(self, connection: AsyncConnection[Any]) -> None:
        await connection.execute(_LOCK, (f"agentskit-chat:retrieval:{self._table}",))

    async def _manifest(self) -> dict[str, str]:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(self._q["manifest"])
            return dict(await cursor.fetchall())

    async def _index(self, corpus: MarkdownCorpus) -> IndexReport:
        q = self._q
        async with self._pool.connection() as connection, connection.transaction():
            await self._lock(connection)
            row = await (await connection.execute(q["settings"])).fetchone()
            rebuilt = row is not None and row[0] != corpus.settings
            if rebuilt:
                await connection.execute(q["clear"])
            cursor = await connection.execute(q["manifest"])
            stored = dict(await cursor.fetchall())
            added, updated, removed, unchanged = diff_manifests(stored, corpus.manifest)
            async with connection.cursor() as batch:
                for path in (*updated, *removed):
                    await batch.execute(q["delete_chunks"], (path,))
                    await batch.execute(q["delete_file"], (path,))
                for path in (*added, *updated):
                    document = corpus.document(path)
                    assert document is not None  # the paths come from the corpus
                    if document.chunks:
                        await batch.executemany(
                            q["insert_chunk"],
                            [
                                (c.id, c.path, c.title, c.heading, c.context, c.href, c.text)
                                for c in document.chunks
                            ],
                        )
                    await batch.execute(q["insert_file"], (path, document.sha256))
            await connection.execute(q["settle"], (corpus.settings,))
            total_row = await (await connection.execute(q["count"])).fetchone()
        total = int(total_row[0]) if total_row else 0
        return IndexReport(added, updated, removed, unchanged, total, rebuilt)

    async def _search(self, text: str, limit: int) -> list[RetrievedChunk]:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(self._search_sql, (self._weights, text, limit))
            rows = await cursor.fetchall()
        return [
            RetrievedChunk(id=i, title=t, href=h, text=b, score=float(s)) for i, t, h, b, s in rows
        ]
