"""A large folder's pages read by child processes too: the very documents of a serial read."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import PurePosixPath
from typing import Any

import pytest

from agentskit_chat._terms import words
from agentskit_chat.answers import SourceDocument
from agentskit_chat.answers._markdown import page_reading, parse_page, read_markdown_document
from agentskit_chat.errors import BuildError
from agentskit_chat.retrieval import TermWeights, _corpus, _page_workers, read_docs_folder
from agentskit_chat.retrieval._corpus import (
    MarkdownDocument,
    read_batch,
    read_page,
    section_counts,
)
from agentskit_chat.retrieval._page_workers import children_for, read_shared
from agentskit_chat.retrieval._section_counts import SectionCounts

from ._support import PROJECT_DOCS

#: What the project's docs do not show much of: MkDocs syntax, tables, front matter, HTML.
EXTRA: dict[str, str] = {
    "material.md": (
        '---\ntitle: Material page\n---\n# Material\n\n!!! warning "Careful"\n    Body text.\n\n'
        "| Key | Value |\n| --- | --- |\n| `a` | one |\n| b | ![x](x.png) |\n\n"
        "Press ++ctrl+c++ to stop. ==Marked== text.\n\n<div>Some <b>HTML</b></div>\n"
    ),
    "shell.md": "# Shell\n\n```console\n$ pip install acme\n$ acme serve \\\n  --port 8000\n```\n",
    "zz-last.md": "No heading at all, `acme run` in a sentence.\n",
}


def _pages() -> list[SourceDocument]:
    pages = list(read_docs_folder(PROJECT_DOCS).documents)
    pages += [SourceDocument.from_text(path, text) for path, text in EXTRA.items()]
    pages.sort(key=lambda page: page.path)
    assert len(pages) > 20
    return pages


def _serial(pages: Sequence[SourceDocument]) -> list[tuple[MarkdownDocument, object]]:
    return [read_page(page, prefix="/docs") for page in pages]


def _flat(batches: list[tuple[list[Any], SectionCounts]]) -> tuple[list[Any], SectionCounts]:
    """The pages read by batches, in order, and their counts added up."""
    assert batches
    counts = SectionCounts()
    read: list[Any] = []
    for batch, counted in batches:
        read += batch
        counts.add(counted)
    return read, counts


def _counted(pages: Sequence[SourceDocument]) -> SectionCounts:
    return read_batch(pages, prefix="/docs")[1]


class _Watched(_page_workers._Handout):
    """The handout, telling when a helper thread (a child) took a batch."""

    def __init__(self, total: int) -> None:
        super().__init__(total)
        self.child_took = threading.Event()

    def take(self) -> int | None:
        index = super().take()
        if index is not None and threading.current_thread() is not threading.main_thread():
            self.child_took.set()
        return index


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of about one page, so that a small folder makes many."""
    monkeypatch.setattr(_page_workers, "_BATCH_CHARS", 1)


def _waiting_read(
    handouts: list[_Watched], seen: list[str], batch: Sequence[SourceDocument]
) -> tuple[list[Any], SectionCounts]:
    # The first batch read here waits until a child has taken one: the children read for sure.
    if not seen:
        assert handouts[0].child_took.wait(60)
    seen.extend(page.path for page in batch)
    return read_batch(batch, prefix="/docs")


@pytest.mark.usefixtures("small_batches")
def test_pages_read_by_children_are_the_pages_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _pages()
    handouts: list[_Watched] = []

    def watched(total: int) -> _Watched:
        handouts.append(_Watched(total))
        return handouts[-1]

    monkeypatch.setattr(_page_workers, "_Handout", watched)
    seen: list[str] = []
    batches = read_shared(pages, partial(_waiting_read, handouts, seen), prefix="/docs", children=2)
    assert handouts[0].child_took.is_set()
    assert 0 < len(seen) < len(pages)  # some pages were read by the children only
    read, counts = _flat(batches)
    assert read == _serial(pages)
    assert counts == _counted(pages)
    assert list(counts.words) == list(_counted(pages).words)  # words in the order written


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize(
    "child",
    [
        "import sys; sys.exit(3)",  # dies at once
        "import sys; sys.stdout.write('hello ' * 20); sys.stdout.flush(); sys.stdin.read()",
        "import sys; sys.stdin.buffer.read(4); sys.stdout.buffer.write(b'akc1' + b'\\xff' * 8)",
    ],
    ids=["exits", "writes-text", "writes-a-broken-message"],
)
def test_a_failing_child_leaves_its_pages_to_this_process(
    monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    monkeypatch.setattr(_page_workers, "_CHILD", child)
    pages = _pages()
    seen: list[str] = []

    def read(batch: Sequence[SourceDocument]) -> tuple[list[Any], SectionCounts]:
        seen.extend(page.path for page in batch)
        return read_batch(batch, prefix="/docs")

    read_all, counts = _flat(read_shared(pages, read, prefix="/docs", children=1))
    assert read_all == _serial(pages)
    assert counts == _counted(pages)
    assert sorted(seen) == [page.path for page in pages]


@pytest.mark.usefixtures("small_batches")
def test_a_page_that_cannot_be_read_raises_as_it_does_when_read_alone() -> None:
    pages = _pages()
    # A path too long for a safe link: the chunker refuses the page.
    bad = SourceDocument.from_text("deep/" + "x" * 2100 + ".md", "# Deep\n\nText.\n")
    pages.insert(len(pages) // 2, bad)
    with pytest.raises(BuildError) as alone:
        _serial(pages)
    with pytest.raises(BuildError) as shared:
        read_shared(pages, partial(read_batch, prefix="/docs"), prefix="/docs", children=2)
    assert str(shared.value) == str(alone.value)
    assert shared.value.file == alone.value.file == bad.path


@pytest.mark.usefixtures("small_batches")
def test_a_corpus_read_with_children_keeps_each_pages_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_page_workers, "MIN_SHARED_CHARS", 0)
    monkeypatch.setattr(_page_workers, "_cores", lambda: 2)
    pages = _pages()
    assert children_for(pages) == 1
    shared = _corpus.MarkdownCorpus.from_documents(pages)
    fresh = _pages()
    alone, uncounted = _corpus._documents(fresh, prefix="/docs", children=0)
    assert uncounted is None
    assert shared.documents == alone
    # What the assistant's term weights and vocabulary count, counted batch by batch as the
    # pages were read, is what counting every section at once gives.
    texts = [f"{chunk.title}\n{chunk.text}" for chunk in shared.chunks]
    for counts in (section_counts(shared), section_counts(_corpus.MarkdownCorpus(alone))):
        assert counts.sections == len(texts)
        assert counts.terms == TermWeights.from_texts(texts).frequencies
        vocabulary = Counter(word for text in texts for word in words(text))
        assert list(counts.words.items()) == list(vocabulary.items())
    assert shared._counts is section_counts(shared)
    for page in pages:
        kept = read_markdown_document(page, stem=PurePosixPath(page.path).stem)
        assert page._reading is not None
        assert kept == page_reading(page, parse_page(page))


def test_how_many_children_help(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _pages()
    assert children_for(pages) == 0  # the project's docs are a small folder
    monkeypatch.setattr(_page_workers, "MIN_SHARED_CHARS", 0)
    for cores, children in ((1, 0), (2, 1), (4, 3), (16, _page_workers.MAX_CHILDREN)):
        monkeypatch.setattr(_page_workers, "_cores", lambda cores=cores: cores)
        assert children_for(pages) == children
    # Inside a multiprocessing child (a uvicorn worker), or frozen: none.
    monkeypatch.setattr(_page_workers, "parent_process", object)
    assert children_for(pages) == 0
    monkeypatch.setattr(_page_workers, "parent_process", lambda: None)
    assert children_for(pages) == _page_workers.MAX_CHILDREN
    monkeypatch.setattr("sys.frozen", True, raising=False)
    assert children_for(pages) == 0
