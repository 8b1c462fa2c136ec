"""The PostgreSQL full-text retriever, against a real server."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource, decode_grounded_source
from agentskit_chat.retrieval import MarkdownCorpus, PostgresFTSRetriever, load_markdown_corpus
from agentskit_chat.service import Retriever

from ._support import CORPUS, HOSTILE_QUERIES, QUESTIONS, request, write_corpus


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _table() -> str:
    return f"test_chunks_{secrets.token_hex(6)}"


@pytest.fixture
async def retriever(postgres_url: str) -> AsyncIterator[PostgresFTSRetriever]:
    index = PostgresFTSRetriever(postgres_url, table=_table())
    async with index:
        await index.index_corpus(MarkdownCorpus.from_texts(CORPUS))
        try:
            yield index
        finally:
            await index.drop()


async def _xmins(url: str, table: str) -> dict[str, str]:
    """Row versions: PostgreSQL gives a rewritten row a new ``xmin``."""
    async with await psycopg.AsyncConnection.connect(url) as connection:
        query = sql.SQL("SELECT id, xmin::text FROM {}").format(sql.Identifier(table))
        cursor = await connection.execute(query)
        return dict(await cursor.fetchall())


@pytest.mark.anyio
@pytest.mark.parametrize(("question", "href"), QUESTIONS)
async def test_the_page_that_answers_ranks_first(
    retriever: PostgresFTSRetriever, question: str, href: str
) -> None:
    hits = await retriever.search(question, 3)
    assert hits[0].href == href
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


@pytest.mark.anyio
async def test_retrieve_returns_grounded_sources(retriever: PostgresFTSRetriever) -> None:
    assert isinstance(retriever, Retriever)
    sources = await retriever.retrieve(request("How do I install it with pip?"))
    assert sources and all(isinstance(source, GroundedSource) for source in sources)
    assert all(decode_grounded_source(source).ok for source in sources)
    assert sources[0].href == "/docs/install"
    assert await retriever.retrieve(request("zzqx quokkafish")) == []


@pytest.mark.anyio
async def test_hostile_queries_never_raise(retriever: PostgresFTSRetriever) -> None:
    for query in [*HOSTILE_QUERIES, "or and", "!pip & | <->", "pip:*"]:
        hits = await retriever.search(query, 5)
        assert len(hits) <= 5


@pytest.mark.anyio
async def test_reindexing_touches_only_changed_files(postgres_url: str, tmp_path: Path) -> None:
    docs = write_corpus(tmp_path)
    table = _table()
    async with PostgresFTSRetriever(postgres_url, table=table) as index:
        try:
            first = await index.index_corpus(load_markdown_corpus(docs))
            assert first.added == tuple(sorted(CORPUS))
            before = await _xmins(postgres_url, table)

            (docs / "theming.md").write_text("# Theming\n\n## Fonts\n\nUse a serif typeface.\n")
            (docs / "glossary.md").unlink()
            (docs / "faq.md").write_text("# FAQ\n\nThe quokka is the mascot.\n")
            corpus = load_markdown_corpus(docs)
            report = await index.index_corpus(corpus)
            assert (report.added, report.updated, report.removed) == (
                ("faq.md",),
                ("theming.md",),
                ("glossary.md",),
            )
            assert report.unchanged == len(CORPUS) - 2 and not report.rebuilt
            assert report.chunks == len(corpus.chunks)
            assert await index.manifest() == corpus.manifest
            assert (await index.search("quokka mascot", 1))[0].href == "/docs/faq"
            assert await index.search("glossary", 5) == []

            after = await _xmins(postgres_url, table)
            untouched = {c.id for c in corpus.chunks if c.path not in report.touched}
            assert untouched and all(after[i] == before[i] for i in untouched)
            assert (await index.index_corpus(corpus)).touched == ()
        finally:
            await index.drop()


@pytest.mark.anyio
async def test_changed_link_settings_rebuild_everything(
    retriever: PostgresFTSRetriever,
) -> None:
    report = await retriever.index_corpus(MarkdownCorpus.from_texts(CORPUS, href_prefix="/help"))
    assert report.rebuilt and report.added == tuple(sorted(CORPUS))
    assert (await retriever.search("pip install", 1))[0].href == "/help/install"


@pytest.mark.anyio
async def test_workers_indexing_at_once_agree(postgres_url: str) -> None:
    table = _table()
    corpus = MarkdownCorpus.from_texts(CORPUS)
    workers = [PostgresFTSRetriever(postgres_url, table=table) for _ in range(4)]
    reports = []

    async def index(worker: PostgresFTSRetriever) -> None:
        reports.append(await worker.index_corpus(corpus))

    try:
        async with anyio.create_task_group() as group:
            for worker in workers:
                group.start_soon(index, worker)
        # The advisory lock serializes them: exactly one wrote, the others found nothing to do.
        assert sorted(len(r.touched) for r in reports) == [0, 0, 0, len(CORPUS)]
        assert await workers[0].manifest() == corpus.manifest
    finally:
        await workers[0].drop()
        for worker in workers:
            await worker.aclose()


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_retrieval_error() -> None:
    index = PostgresFTSRetriever(
        "postgresql://nobody:secret-zq9@127.0.0.1:1/none", table=_table(), timeout=0.5
    )
    with pytest.raises(RetrievalError) as caught:
        await index.search("pip", 1)
    assert "secret-zq9" not in str(caught.value) and caught.value.__cause__ is None
    await index.aclose()


@pytest.mark.anyio
async def test_a_closed_retriever_raises(postgres_url: str) -> None:
    index = PostgresFTSRetriever(postgres_url, table=_table())
    await index.aclose()
    with pytest.raises(RetrievalError):
        await index.search("pip", 1)


@pytest.mark.parametrize(
    "options",
    [
        {"table": "bad-name"},
        {"table": "x" * 41},
        {"table": "1abc"},
        {"table": 'a"; DROP TABLE b; --'},
        {"top_k": 0},
        {"title_weight": -1},
    ],
)
def test_invalid_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        PostgresFTSRetriever("postgresql://127.0.0.1/x", **options)  # type: ignore[arg-type]
