"""The embedded SQLite FTS5 retriever: ranking, hostile queries, incremental indexing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource, decode_grounded_source
from agentskit_chat.retrieval import (
    MarkdownCorpus,
    SQLiteFTSRetriever,
    _sqlite_fts,
    build_index,
    load_markdown_corpus,
    query_phrases,
    query_terms,
)
from agentskit_chat.service import Retriever

from ._support import CORPUS, HOSTILE_QUERIES, PROJECT_DOCS, QUESTIONS, request, write_corpus


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def retriever() -> Iterator[SQLiteFTSRetriever]:
    index = SQLiteFTSRetriever(corpus=MarkdownCorpus.from_texts(CORPUS))
    yield index
    index.close()


def _rowids(index_file: Path) -> dict[str, int]:
    with sqlite3.connect(index_file) as connection:
        return dict(connection.execute("SELECT id, rowid FROM chunks").fetchall())


@pytest.mark.anyio
@pytest.mark.parametrize(("question", "href"), QUESTIONS)
async def test_the_page_that_answers_ranks_first(
    retriever: SQLiteFTSRetriever, question: str, href: str
) -> None:
    hits = await retriever.search(question, 3)
    assert hits[0].href == href
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


@pytest.mark.anyio
async def test_a_title_match_outranks_a_passing_mention(retriever: SQLiteFTSRetriever) -> None:
    # "palette" is in the Colors section's text and in the glossary's list; "typeface" likewise
    # for Fonts. A heading-title match must beat the glossary's passing mention.
    hits = await retriever.search("fonts", 5)
    assert hits[0].href == "/docs/theming#fonts"
    hits = await retriever.search("glossary", 5)
    assert hits[0].href == "/docs/glossary"


@pytest.mark.anyio
async def test_retrieve_returns_grounded_sources(retriever: SQLiteFTSRetriever) -> None:
    assert isinstance(retriever, Retriever)
    sources = await retriever.retrieve(request("How do I install it with pip?"))
    assert sources and all(isinstance(source, GroundedSource) for source in sources)
    assert all(decode_grounded_source(source).ok for source in sources)
    assert sources[0].href == "/docs/install"
    assert "pip install acme-widgets" in sources[0].excerpt
    assert await retriever.retrieve(request("zzqx quokkafish")) == []


@pytest.mark.anyio
@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_hostile_queries_never_raise(retriever: SQLiteFTSRetriever, query: str) -> None:
    hits = await retriever.search(query, 5)
    assert len(hits) <= 5


@pytest.mark.anyio
async def test_operators_are_searched_as_words(retriever: SQLiteFTSRetriever) -> None:
    # "NOT pip" in FTS5 syntax would exclude pip pages; here "pip" is a plain term.
    hits = await retriever.search("NOT pip", 5)
    assert hits and hits[0].href.startswith("/docs/install")


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("How do I configure the rate-limiter?", ("configure", "rate", "limiter")),
        ("what's-up?", ("what", "s", "up")),
        ('"NEAR(a b)" AND *', ("near", "b")),
        ("Pip pip PIP", ("pip",)),
        ("snake_case", ("snake", "case")),
        ("", ()),
        ("?!", ()),
    ],
)
def test_query_terms(text: str, terms: tuple[str, ...]) -> None:
    assert query_terms(text) == terms


def test_query_terms_are_capped() -> None:
    terms = query_terms(" ".join(f"word{n}" for n in range(500)) + " " + "y" * 10_000)
    assert len(terms) == 24
    assert query_terms("y" * 10_000) == ("y" * 64,)


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("How do I rate limit users?", (("rate", "limit"), ("limit", "users"))),
        (
            "set cache_size in @acme/web-ui",
            (("set", "cache"), ("cache", "size"), ("acme", "web"), ("web", "ui")),
        ),
        ("the rate of the limit", ()),  # a stop word between them: not a phrase
        ("rate limit, rate limit", (("rate", "limit"), ("limit", "rate"))),
        ("one", ()),
        ("", ()),
    ],
)
def test_query_phrases(text: str, phrases: tuple[tuple[str, str], ...]) -> None:
    assert query_phrases(text) == phrases


def test_query_phrases_are_capped() -> None:
    assert len(query_phrases(" ".join(f"word{n}" for n in range(500)))) == 24


@pytest.mark.anyio
async def test_a_phrase_as_written_outranks_its_words_apart() -> None:
    corpus = MarkdownCorpus.from_texts(
        {
            "apart.md": "# Apart\n\nThe rate of requests is high; the limit of the disk is low. "
            "Rate and limit, rate and limit.",
            "together.md": "# Together\n\nSet a rate limit per user.",
        }
    )
    async with SQLiteFTSRetriever(corpus=corpus) as index:
        hits = await index.search("rate limit", 2)
    assert [hit.href for hit in hits] == ["/docs/together", "/docs/apart"]


SPREAD = {
    "big.md": "# Big\n\n## One\n\nalpha alpha\n\n## Two\n\nalpha alpha\n\n## Three\n\n"
    "alpha alpha\n\n## Four\n\nalpha alpha",
    "small.md": "# Small\n\nalpha and many other words that dilute the one mention of it here",
}


@pytest.mark.anyio
@pytest.mark.parametrize(("per_page", "pages"), [(2, ["big", "big", "small"]), (None, ["big"] * 3)])
async def test_search_spreads_hits_over_pages(per_page: int | None, pages: list[str]) -> None:
    corpus = MarkdownCorpus.from_texts(SPREAD)
    async with SQLiteFTSRetriever(corpus=corpus, per_page=per_page) as index:
        hits = await index.search("alpha", 3)
        every = await index.search("alpha", 10)
    assert [hit.href.partition("#")[0].removeprefix("/docs/") for hit in hits] == pages
    # Nothing is dropped: the page's further sections come after the others.
    assert len(every) == 5


@pytest.mark.anyio
@settings(max_examples=200, deadline=None)
@given(query=st.text())
async def test_any_text_query_never_raises(retriever: SQLiteFTSRetriever, query: str) -> None:
    hits = await retriever.search(query, 3)
    assert all(hit.id and hit.href for hit in hits)


@pytest.mark.anyio
async def test_reindexing_touches_only_changed_files(tmp_path: Path) -> None:
    docs = write_corpus(tmp_path / "docs")
    index_file = tmp_path / "index.sqlite3"
    first = build_index(index_file, load_markdown_corpus(docs))
    assert first.added == tuple(sorted(CORPUS))
    assert (first.updated, first.removed, first.unchanged) == ((), (), 0)
    before = _rowids(index_file)

    (docs / "theming.md").write_text("# Theming\n\n## Fonts\n\nUse the serif typeface.\n")
    (docs / "glossary.md").unlink()
    (docs / "faq.md").write_text("# FAQ\n\nThe quokka is the mascot.\n")
    async with await SQLiteFTSRetriever.open(index_file) as index:
        report = await index.index_corpus(load_markdown_corpus(docs))
        assert report.added == ("faq.md",)
        assert report.updated == ("theming.md",)
        assert report.removed == ("glossary.md",)
        assert report.unchanged == len(CORPUS) - 2
        assert report.touched == ("faq.md", "glossary.md", "theming.md")
        assert not report.rebuilt
        assert (await index.search("quokka mascot", 1))[0].href == "/docs/faq"
        assert await index.search("glossary", 5) == []
        assert await index.manifest() == load_markdown_corpus(docs).manifest

    after = _rowids(index_file)
    untouched = {
        chunk.id for chunk in load_markdown_corpus(docs).chunks if chunk.path not in report.touched
    }
    # Chunks of unchanged files were not rewritten: same rows, same rowids.
    assert untouched and all(after[chunk_id] == before[chunk_id] for chunk_id in untouched)

    # Nothing changed: nothing is touched.
    again = build_index(index_file, load_markdown_corpus(docs))
    assert again.touched == () and again.unchanged == len(CORPUS)


@pytest.mark.anyio
async def test_the_index_persists_across_reopen(tmp_path: Path) -> None:
    index_file = tmp_path / "index.sqlite3"
    corpus = MarkdownCorpus.from_texts(CORPUS)
    report = build_index(index_file, corpus)
    assert report.chunks == len(corpus.chunks)
    async with await SQLiteFTSRetriever.open(index_file) as reopened:
        assert await reopened.manifest() == corpus.manifest
        hits = await reopened.search("token bucket limiter", 1)
        assert hits[0].href == "/docs/operations/rate-limits"


@pytest.mark.anyio
async def test_changed_link_settings_rebuild_everything(tmp_path: Path) -> None:
    index_file = tmp_path / "index.sqlite3"
    build_index(index_file, MarkdownCorpus.from_texts(CORPUS))
    report = build_index(index_file, MarkdownCorpus.from_texts(CORPUS, href_prefix="/help"))
    assert report.rebuilt
    assert report.added == tuple(sorted(CORPUS))
    async with await SQLiteFTSRetriever.open(index_file) as index:
        assert (await index.search("pip install", 1))[0].href == "/help/install"


@pytest.mark.anyio
async def test_concurrent_searches_share_one_index(retriever: SQLiteFTSRetriever) -> None:
    results: dict[int, str] = {}

    async def ask(n: int, question: str) -> None:
        results[n] = (await retriever.search(question, 1))[0].href

    async with anyio.create_task_group() as group:
        for n in range(40):
            group.start_soon(ask, n, QUESTIONS[n % len(QUESTIONS)][0])
    assert results == {n: QUESTIONS[n % len(QUESTIONS)][1] for n in range(40)}


@pytest.mark.anyio
async def test_cancelled_searches_leave_the_index_usable() -> None:
    async with await SQLiteFTSRetriever.open(corpus=load_markdown_corpus(PROJECT_DOCS)) as index:
        for _ in range(5):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await index.search("retrieval index", 3)
            assert scope.cancelled_caught
        for _ in range(20):
            # Cancelled while the search may be running in its worker thread.
            async with anyio.create_task_group() as group:
                group.start_soon(index.search, "retrieval index sqlite postgres", 3)
                await anyio.sleep(0)
                group.cancel_scope.cancel()
        assert await index.search("retrieval index", 3)


@pytest.mark.anyio
async def test_a_closed_index_raises_a_retrieval_error() -> None:
    index = await SQLiteFTSRetriever.open(corpus=MarkdownCorpus.from_texts(CORPUS))
    await index.aclose()
    await index.aclose()
    with pytest.raises(RetrievalError) as caught:
        await index.search("pip", 1)
    assert "pip" not in str(caught.value)


@pytest.mark.anyio
async def test_an_index_copied_into_a_file_searches_the_same(tmp_path: Path) -> None:
    built = SQLiteFTSRetriever(corpus=MarkdownCorpus.from_texts(CORPUS))
    target = sqlite3.connect(tmp_path / "copy.sqlite3")
    try:
        built.copy_into(target)
    finally:
        target.close()
    copied = SQLiteFTSRetriever(tmp_path / "copy.sqlite3")
    try:
        assert QUESTIONS
        for question, _ in QUESTIONS:
            found = [hit.id for hit in await built.search(question, 5)]
            assert found
            assert [hit.id for hit in await copied.search(question, 5)] == found
    finally:
        copied.close()
        built.close()
    target = sqlite3.connect(tmp_path / "closed.sqlite3")
    try:
        with pytest.raises(RetrievalError):
            built.copy_into(target)  # closed
    finally:
        target.close()


def test_a_file_that_is_not_an_index_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "not-sqlite"
    bogus.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RetrievalError):
        SQLiteFTSRetriever(bogus)


@pytest.mark.parametrize(
    ("options"),
    [
        {"top_k": 0},
        {"top_k": 101},
        {"top_k": True},
        {"title_weight": 0},
        {"per_page": 0},
        {"per_page": True},
        {"per_page": 1.5},
    ],
)
def test_invalid_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        SQLiteFTSRetriever(**options)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_project_docs_answer_a_question_about_retrieval() -> None:
    corpus = load_markdown_corpus(PROJECT_DOCS)
    async with await SQLiteFTSRetriever.open(corpus=corpus) as index:
        hits = await index.search("How does incremental re-indexing work?", 3)
    assert hits[0].href.startswith("/docs/retrieval")


@pytest.mark.anyio
async def test_lone_surrogates_in_memory_texts_are_indexable() -> None:
    corpus = MarkdownCorpus.from_texts({"odd.md": "# Odd \ud800\n\nQuokka \udfff text.\n"})
    assert "\ufffd" in corpus.chunks[0].text
    async with await SQLiteFTSRetriever.open(corpus=corpus) as index:
        assert (await index.search("quokka", 1))[0].href == "/docs/odd"


ODD_ROWS = [
    ("plain", "Plain words"),
    ("nul", "before\x00after"),  # NUL would not come back from JSON as it is: row by row
    ("escaped", "a literal \\u0000 and \\n"),
    ("quotes", "\"quoted\" 'single' `tick` \t tab\nline"),
    ("wide", "émoji 🚀 ∑ 中文"),
]


@pytest.mark.parametrize(
    ("rows", "in_one_statement"),
    [(ODD_ROWS, False), (ODD_ROWS[:1], True), (ODD_ROWS[3:], True), (ODD_ROWS[2:3], False)],
    # A literal backslash-u0000 in a text is written row by row too (its JSON holds the
    # escape's six characters): the quotes, tabs, newlines and wide characters go as JSON.
    ids=["nul", "one", "json", "literal-escape"],
)
def test_rows_written_in_one_statement_come_back_exactly(
    rows: list[tuple[str, str]], in_one_statement: bool
) -> None:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    _sqlite_fts._insert(connection, "t (id, body)", rows)
    _sqlite_fts._insert(connection, "t (id, body)", [])
    connection.set_trace_callback(None)
    assert statements  # the rows were written by some statement
    assert any("json_each" in statement for statement in statements) is in_one_statement
    stored = connection.execute("SELECT id, body, typeof(body) FROM t ORDER BY rowid").fetchall()
    assert stored == [(key, body, "text") for key, body in rows]


@pytest.mark.anyio
async def test_an_index_written_in_one_statement_matches_one_written_row_by_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus = load_markdown_corpus(PROJECT_DOCS)
    assert corpus.chunks
    bulk = SQLiteFTSRetriever(corpus=corpus)
    # Row by row: as when SQLite has no JSON functions.
    monkeypatch.setattr(orjson, "dumps", lambda rows: b"")
    by_row = SQLiteFTSRetriever(corpus=corpus)
    try:
        instances = []
        for index in (bulk, by_row):
            connection = index._connection
            connection.execute(
                "CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, chunks_fts, instance)"
            )
            rows = connection.execute("SELECT rowid, * FROM chunks ORDER BY rowid").fetchall()
            terms = connection.execute("SELECT * FROM temp.v ORDER BY term, doc, col, offset")
            files = connection.execute("SELECT * FROM files ORDER BY path").fetchall()
            instances.append((rows, terms.fetchall(), files))
        assert len(instances[0][0]) == len(corpus.chunks)
        assert instances[0] == instances[1]
        question = "How does incremental re-indexing work?"
        assert await bulk.search(question, 5) == await by_row.search(question, 5)
    finally:
        bulk.close()
        by_row.close()
