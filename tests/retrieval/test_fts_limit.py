"""Full-text search ranks and cuts to the limit before it reads chunk bodies (SQLite, PostgreSQL).

A query that matches thousands of chunks must not copy every body into its sort: the chunk ids
are ranked and limited in a subquery, and only the chunks kept are joined for their bodies.
The plans are read from the real engines; the hits are checked against the plain query.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agentskit_chat.retrieval import MarkdownCorpus, PostgresFTSRetriever, SQLiteFTSRetriever
from agentskit_chat.retrieval._sqlite_fts import _SEARCH, fts5_query

#: Twelve pages saying the same thing (equal scores: ties across the limit) and a few others.
TEXTS = {
    **{f"same-{n:02d}.md": "# Cache\n\nThe cache keeps answers.\n" for n in range(12)},
    "size.md": "# Cache size\n\nSet the cache size with cache_size; the cache keeps answers.\n",
    "other.md": "# Other\n\nNothing about it here.\n",
}

#: The plain query: rank every match with its body, then cut (what the subquery must equal).
PLAIN = """
SELECT c.id, c.title, c.href, c.body, bm25(chunks_fts, ?, ?, 1.0) AS score
FROM chunks_fts JOIN chunks AS c ON c.rowid = chunks_fts.rowid
WHERE chunks_fts MATCH ?
ORDER BY score, c.id
LIMIT ?
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def sqlite_index() -> Iterator[SQLiteFTSRetriever]:
    index = SQLiteFTSRetriever(corpus=MarkdownCorpus.from_texts(TEXTS), per_page=None)
    yield index
    index.close()


def test_sqlite_joins_bodies_only_after_the_limit(sqlite_index: SQLiteFTSRetriever) -> None:
    connection = sqlite_index._connection
    plan = connection.execute(
        f"EXPLAIN QUERY PLAN {_SEARCH}", (10.0, 2.0, fts5_query(["cache"]), 5)
    ).fetchall()
    parents = {node: parent for node, parent, _, _ in plan}
    details = {node: detail for node, _, _, detail in plan}
    fts = [node for node, detail in details.items() if "chunks_fts" in detail]
    bodies = [node for node, detail in details.items() if detail.startswith("SEARCH c ")]
    assert fts
    assert bodies
    # The full-text scan runs inside the ranked subquery; the body lookup outside, on its rows.
    assert all(parents[node] != 0 for node in fts)
    assert all(parents[node] == 0 for node in bodies)
    assert any("ranked" in detail for detail in details.values())


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [1, 3, 5, 13, 20])
async def test_sqlite_hits_equal_the_plain_query(
    sqlite_index: SQLiteFTSRetriever, limit: int
) -> None:
    hits = await sqlite_index.search("cache answers", limit)
    match = fts5_query(["cach", "answer"], [("cach", "answer")])
    rows = sqlite_index._connection.execute(PLAIN, (10.0, 2.0, match, limit)).fetchall()
    assert rows
    assert [(hit.id, hit.text, hit.score) for hit in hits] == [
        (row[0], row[3], 0.0 - row[4]) for row in rows
    ]


def _nodes(plan: dict[str, Any], depth: int = 0) -> Iterator[tuple[int, str]]:
    yield depth, plan["Node Type"]
    for child in plan.get("Plans", ()):
        yield from _nodes(child, depth + 1)


@pytest.mark.anyio
async def test_postgres_joins_bodies_only_after_the_limit(postgres_url: str) -> None:
    index = PostgresFTSRetriever(postgres_url, table=f"test_chunks_{secrets.token_hex(6)}")
    async with index:
        try:
            await index.index_corpus(MarkdownCorpus.from_texts(TEXTS))
            hits = await index.search("cache answers", 3)
            assert len(hits) == 3
            assert hits[0].href == "/docs/size"
            async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
                explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + index._search_sql
                cursor = await connection.execute(explain, (index._weights, "cache", 3))
                row = await cursor.fetchone()
        finally:
            await index.drop()
    assert row is not None
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = list(_nodes(document[0]["Plan"]))
    limits = [depth for depth, kind in nodes if kind == "Limit"]
    joins = [depth for depth, kind in nodes if kind in ("Nested Loop", "Hash Join", "Merge Join")]
    assert limits
    assert joins
    # The limit sits under the join that fetches the bodies, not above it.
    assert min(joins) < min(limits)
