"""A large folder's pages read by child processes too: the very documents of a serial read."""

from __future__ import annotations

import copyreg
import pickle
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from agentskit_chat._terms import known_stems, stem, words
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


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of about one page, so that a small folder makes many."""
    monkeypatch.setattr(_page_workers, "_BATCH_CHARS", 1)


@pytest.mark.usefixtures("small_batches")
def test_pages_read_by_children_are_the_pages_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _pages()
    folders: list[Path] = []
    real = _page_workers._read_with

    def watched(batches: Any, read: Any, folder: Path, children: Any) -> Any:
        folders.append(folder)
        return real(batches, read, folder, children)

    monkeypatch.setattr(_page_workers, "_read_with", watched)
    seen: list[str] = []

    def read(batch: Sequence[SourceDocument]) -> tuple[list[Any], SectionCounts]:
        # The first batch read here waits until a child wrote one: the children read for sure.
        waited = 0.0
        while not seen and not list(folders[0].glob("*.result")):
            assert waited < 60, "no child wrote a batch"
            time.sleep(0.01)
            waited += 0.01
        seen.extend(page.path for page in batch)
        return read_batch(batch, prefix="/docs")

    batches = read_shared(pages, read, prefix="/docs", children=2)
    assert 0 < len(seen) < len(pages)  # some pages were read by the children only
    read_all, counts = _flat(batches)
    assert read_all == _serial(pages)
    assert counts == _counted(pages)
    assert list(counts.words) == list(_counted(pages).words)  # words in the order written
    assert not folders[0].exists()  # the batches and results are gone


_CLAIM_ALL = (
    "import os, sys, time; "
    "[os.close(os.open(os.path.join(sys.argv[2], f'{i}.claim'), os.O_CREAT | os.O_WRONLY))"
    " for i in range(2000)]"
)
_GARBAGE = (
    "import os, sys\n"
    "for i in reversed(range(2000)):\n"
    "    try: os.close(os.open(os.path.join(sys.argv[2], f'{i}.claim'), os.O_CREAT | os.O_EXCL))\n"
    "    except FileExistsError: continue\n"
    "    open(os.path.join(sys.argv[2], f'{i}.result'), 'wb').write(b'not a pickle')\n"
)


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize(
    "child",
    [
        "import sys; sys.exit(3)",  # dies at once
        _CLAIM_ALL,  # claims every batch, writes none
        _GARBAGE,  # writes results that are no pickles
        _CLAIM_ALL + "; time.sleep(600)",  # claims every batch and never writes one
    ],
    ids=["exits", "claims-and-dies", "writes-garbage", "stalls"],
)
def test_a_failing_child_leaves_its_pages_to_this_process(
    monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    monkeypatch.setattr(_page_workers, "_CHILD", child)
    monkeypatch.setattr(_page_workers, "_STALLED", 1.0)
    pages = _pages()
    seen: list[str] = []

    def read(batch: Sequence[SourceDocument]) -> tuple[list[Any], SectionCounts]:
        if not seen:
            time.sleep(0.5)  # the child claims batches meanwhile
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
    assert uncounted == []
    assert shared.documents == alone
    # Counted batch by batch, added up when first asked for (a start writes its index first).
    assert shared._counts is None and len(shared._counted) > 1
    # What the assistant's term weights and vocabulary count, counted batch by batch as the
    # pages were read, is what counting every section at once gives.
    texts = [f"{chunk.title}\n{chunk.text}" for chunk in shared.chunks]
    for counts in (section_counts(shared), section_counts(_corpus.MarkdownCorpus(alone))):
        assert counts.sections == len(texts)
        assert counts.terms == TermWeights.from_texts(texts).frequencies
        vocabulary = Counter(word for text in texts for word in words(text))
        assert list(counts.words.items()) == list(vocabulary.items())
    assert shared._counts is section_counts(shared)
    # The stems of the words the children counted are known here too (the start cache keeps
    # them): each is the stem this process gives the word.
    counted = section_counts(shared)
    assert counted.stems == {word: stem(word) for word in counted.words}
    assert known_stems(counted.words) == counted.stems
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


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("failing", ["tempfile.mkdtemp", "os.replace"])
def test_no_room_for_the_batches_reads_them_here(
    monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failing, full)
    pages = _pages()
    seen: list[str] = []

    def read(batch: Sequence[SourceDocument]) -> tuple[list[Any], SectionCounts]:
        seen.extend(page.path for page in batch)
        return read_batch(batch, prefix="/docs")

    read_all, counts = _flat(read_shared(pages, read, prefix="/docs", children=1))
    assert read_all == _serial(pages)
    assert counts == _counted(pages)
    assert seen == [page.path for page in pages]


def test_an_interrupt_while_children_start_stops_those_already_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[Any] = []
    real_start = _page_workers._start

    def start(folder: Path) -> Any:
        if started:
            raise KeyboardInterrupt  # Ctrl+C while the second child starts
        child = real_start(folder)
        started.append(child)
        return child

    monkeypatch.setattr(_page_workers, "_start", start)
    with pytest.raises(KeyboardInterrupt):
        read_shared(_pages(), partial(read_batch, prefix="/docs"), prefix="/docs", children=2)
    assert len(started) == 1 and started[0] is not None
    assert started[0].poll() is not None  # stopped, not left waiting for its pages


@pytest.mark.usefixtures("small_batches")
def test_the_childrens_batches_are_taken_in_while_this_process_still_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pages = _pages()
    folders: list[Path] = []
    waited_for: list[int] = []
    real_read_with, real_written = _page_workers._read_with, _page_workers._written

    def watched(batches: Any, read: Any, folder: Path, children: Any) -> Any:
        folders.append(folder)
        return real_read_with(batches, read, folder, children)

    def written(folder: Path, index: int, children: Any) -> Any:
        waited_for.append(index)
        return real_written(folder, index, children)

    monkeypatch.setattr(_page_workers, "_read_with", watched)
    monkeypatch.setattr(_page_workers, "_written", written)
    seen: list[str] = []

    def read(batch: Sequence[SourceDocument]) -> tuple[list[Any], SectionCounts]:
        waited = 0.0
        while not seen and not list(folders[0].glob("*.result")):  # a child wrote one
            assert waited < 60, "no child wrote a batch"
            time.sleep(0.01)
            waited += 0.01
        seen.extend(page.path for page in batch)
        return read_batch(batch, prefix="/docs")

    read_all, counts = _flat(read_shared(pages, read, prefix="/docs", children=1))
    assert read_all == _serial(pages)
    assert counts == _counted(pages)
    # The last batch, the child's first, was written while this process read its first one:
    # it was taken in then, not waited for once this process had read all of its own.
    theirs = len(pages) - len(seen)
    assert theirs > 0
    assert len(pages) - 1 not in waited_for
    assert len(waited_for) < theirs


def test_a_batch_crosses_from_a_child_as_the_calls_that_make_its_objects() -> None:
    pages = _pages()
    result = read_batch(pages, prefix="/docs")
    assert pickle.loads(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)) == result
    documents = [document for document, _ in result[0]]
    readings = [reading for _, reading in result[0]]
    made: list[Any] = [*documents, *readings]
    made += [chunk for document in documents for chunk in document.chunks]
    made += [heading for reading in readings for heading in reading.headings]
    made += [command for reading in readings for command in reading.commands]
    made += [mention for reading in readings for mention in reading.mentions]
    kinds = {type(item) for item in made}
    assert len(kinds) == 6  # documents, chunks, readings, headings, commands, mentions
    for item in made:
        reduced = copyreg.dispatch_table[type(item)](item)
        assert isinstance(reduced, tuple) and len(reduced) == 2
        maker, values = reduced[0], reduced[1]
        assert maker is type(item)
        assert values == tuple(getattr(item, field.name) for field in fields(item))
        assert maker(*values) == item
