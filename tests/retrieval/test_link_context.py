"""Link context: a section is found by the words other pages write where they link to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentskit_chat.retrieval import (
    MarkdownCorpus,
    SQLiteFTSRetriever,
    _corpus,
    _page_workers,
    build_index,
    load_markdown_corpus,
    read_docs_folder,
)
from agentskit_chat.retrieval._link_context import PageLink, link_context, page_links

from ._support import PROJECT_DOCS, write_corpus

pytestmark = pytest.mark.anyio

#: ``why.md`` says in its own words what ``environments.md#scripts`` is; that section never
#: writes "define", "named" or "command".
PAGES: dict[str, str] = {
    "why.md": (
        "# Why this tool\n\n"
        "Philosophy: you can define a test environment with named [scripts]"
        "(environments.md#scripts), each command as long as you wish.\n\n"
        "| Task | Where |\n| --- | --- |\n"
        "| Generate many variants | [matrix](environments.md#matrix) |\n\n"
        "Elsewhere: the [sandbox](missing.md#setup), the [site](https://example.com/x.md#scripts),"
        " [this page](#why-this-tool), [outside](../outside.md#scripts), the whole "
        "[environments page](environments.md), an [old anchor](environments.md#gone) and a "
        "[picture](diagram.png#scripts).\n"
    ),
    "tour.md": (
        "# Tour\n\n"
        "- **Versioning**\n\n"
        "    A streamlined workflow for bumping releases.\n\n"
        "    [Learn more](guides/releases.md#updating)\n"
    ),
    "environments.md": (
        "# Environments\n\n"
        "Environments isolate dependencies.\n\n"
        "## Scripts\n\n"
        "The `scripts` table maps a key to shell lines.\n\n"
        "## Matrix\n\n"
        "Matrices multiply environments.\n"
    ),
    "guides/releases.md": (
        "# Releases\n\n"
        "## Display\n\nPrint the current release with `tool release`.\n\n"
        "## Updating\n\nGive a segment to increment it: `tool release minor`.\n"
    ),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _context(corpus: MarkdownCorpus) -> dict[str, str]:
    """``href → link context`` of the corpus's sections."""
    by_id = {chunk.id: chunk.href for chunk in corpus.chunks}
    return {by_id[chunk_id]: text for chunk_id, text in link_context(corpus.documents).items()}


def test_links_resolve_to_headings_of_other_pages_in_the_folder() -> None:
    written = [
        ("../b.md#x", "up a folder"),
        ("c%20d.md#y", "percent-encoded"),
        ("./e.markdown#z", "dot slash"),
        ("f.md/#w", "a slash before the anchor"),
        ("g.md?tab=1#v", "a query"),
        ("b.md", "a whole page"),
        ("/abs.md#x", "root-relative"),
        ("https://example.com/b.md#x", "another site"),
        ("a.md#self", "the page itself"),
        ("#own-heading", "a heading of the page itself"),
        ("../../out.md#x", "outside the folder"),
        ("img.png#x", "not a page"),
    ]
    assert page_links("guides/a.md", written) == (
        PageLink("b.md", "x", "up a folder"),
        PageLink("guides/c d.md", "y", "percent-encoded"),
        PageLink("guides/e.markdown", "z", "dot slash"),
        PageLink("guides/f.md", "w", "a slash before the anchor"),
    )


def test_each_linked_section_gets_the_words_around_its_links() -> None:
    context = _context(MarkdownCorpus.from_texts(PAGES))
    # Only sections some other page links to by their heading; nothing for a missing page,
    # another site, the page itself, a page outside the folder, a whole page, an anchor that
    # names no heading, or a picture.
    assert set(context) == {
        "/docs/environments#scripts",
        "/docs/environments#matrix",
        "/docs/guides/releases#updating",
    }
    # The paragraph holding the link.
    assert "define a test environment with named scripts" in context["/docs/environments#scripts"]
    # The table row holding it.
    assert context["/docs/environments#matrix"] == "Generate many variants matrix"
    # A card's link says nothing of its own: the whole list item speaks for it.
    updating = context["/docs/guides/releases#updating"]
    assert "streamlined workflow for bumping releases" in updating


def test_every_part_of_a_long_linked_section_gets_its_context() -> None:
    long_section = "\n\n".join(f"Paragraph {n} about shell lines. " * 12 for n in range(12))
    pages = {
        "why.md": "# Why\n\nDefine named commands with [scripts](env.md#scripts).\n",
        "env.md": f"# Env\n\n## Scripts\n\n{long_section}\n",
    }
    corpus = MarkdownCorpus.from_texts(pages)
    parts = [chunk.id for chunk in corpus.chunks if chunk.href == "/docs/env#scripts"]
    assert len(parts) > 1
    context = link_context(corpus.documents)
    assert all("Define named commands" in context[part] for part in parts)


async def test_a_section_is_found_by_the_words_pages_link_to_it_with() -> None:
    corpus = MarkdownCorpus.from_texts(PAGES)
    scripts = next(chunk for chunk in corpus.chunks if chunk.href == "/docs/environments#scripts")
    assert not {"define", "named", "command"} & set(scripts.text.lower().split())
    async with SQLiteFTSRetriever(corpus=corpus, per_page=None) as index:
        hits = await index.search("How do I define a named command?", 5)
    assert "/docs/environments#scripts" in [hit.href for hit in hits]


async def test_link_context_is_never_part_of_a_hit() -> None:
    corpus = MarkdownCorpus.from_texts(PAGES)
    texts = {chunk.id: chunk.text for chunk in corpus.chunks}
    context = link_context(corpus.documents)
    assert context
    async with SQLiteFTSRetriever(corpus=corpus, per_page=None) as index:
        for question in ("define a named command", "bumping releases", "generate many variants"):
            hits = await index.search(question, 10)
            linked = [hit for hit in hits if hit.id in context]
            assert linked, question
            for hit in hits:
                assert hit.text == texts[hit.id]
                source = hit.to_source()
                assert source is not None and source.excerpt == texts[hit.id]
    for hit in linked:
        assert "bumping" not in hit.text and "variants" not in hit.text


def _links_column(index_file: Path) -> dict[str, str]:
    connection = sqlite3.connect(index_file)
    try:
        return dict(connection.execute("SELECT href, links FROM chunks").fetchall())
    finally:
        connection.close()


async def test_a_changed_linking_page_changes_only_the_linked_sections_context(
    tmp_path: Path,
) -> None:
    docs = write_corpus(tmp_path / "docs", PAGES)
    index_file = tmp_path / "index.sqlite3"
    build_index(index_file, load_markdown_corpus(docs))
    assert "bumping" in _links_column(index_file)["/docs/guides/releases#updating"]

    # The card goes: the section it linked to is no longer found by its words, though the
    # section's own page did not change (and is not re-indexed).
    (docs / "tour.md").write_text("# Tour\n\nA short tour.\n", "utf-8")
    report = build_index(index_file, load_markdown_corpus(docs))
    assert (report.added, report.updated, report.removed) == ((), ("tour.md",), ())
    assert _links_column(index_file)["/docs/guides/releases#updating"] == ""
    async with await SQLiteFTSRetriever.open(index_file) as index:
        hits = await index.search("bumping", 5)
        assert "/docs/guides/releases#updating" not in [hit.href for hit in hits]

    # A new page links to it again.
    (docs / "faq.md").write_text(
        "# FAQ\n\nBumping a release: [updating](guides/releases.md#updating).\n", "utf-8"
    )
    report = build_index(index_file, load_markdown_corpus(docs))
    assert report.added == ("faq.md",) and report.updated == ()
    async with await SQLiteFTSRetriever.open(index_file) as index:
        hits = await index.search("bumping", 5)
        assert "/docs/guides/releases#updating" in [hit.href for hit in hits]


def test_pages_read_by_children_keep_their_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_page_workers, "MIN_SHARED_CHARS", 0)
    monkeypatch.setattr(_page_workers, "_BATCH_CHARS", 1)
    monkeypatch.setattr(_page_workers, "_cores", lambda: 2)
    pages = read_docs_folder(PROJECT_DOCS).documents
    assert _page_workers.children_for(pages) == 1
    shared = MarkdownCorpus.from_documents(pages)
    alone, _ = _corpus._documents(
        read_docs_folder(PROJECT_DOCS).documents, prefix="/docs", children=0
    )
    # The links are not compared with the documents: compared here.
    assert sum(len(document.links) for document in alone) > 10
    assert [d.links for d in shared.documents] == [d.links for d in alone]
    assert link_context(shared.documents) == link_context(alone)
