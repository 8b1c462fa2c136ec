"""The docs assistant's start: each page parsed once, and not at all while no page changes.

A start caches what it builds from the pages (chunks, knowledge artifact, term weights,
vocabulary) beside the search index; the next start with the same pages parses none of them.

The cache folder is the suite's own (``tests/conftest.py`` sets ``AGENTSKIT_CACHE_DIR``); each
test here points it at a fresh folder of its own.
"""

from __future__ import annotations

import os
import pwd
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import markdown_it
import pytest

from agentskit_chat import _terms
from agentskit_chat._terms import stem, term_set, words
from agentskit_chat.answers import DocsFolder, _markdown, build_local_knowledge_artifact
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.errors import BuildError
from agentskit_chat.retrieval import (
    MarkdownCorpus,
    SQLiteFTSRetriever,
    TermWeights,
    _index_cache,
    read_docs_folder,
)
from agentskit_chat.retrieval._index_cache import (
    CACHE_DIR_ENV,
    IndexNow,
    StartParts,
    cached_start,
)

from ._support import GUIDE, NOW, write_docs

STAMP = "2026-07-13T00:00:00.000Z"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(folder))
    return folder


def _index_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("index/*/index-*.sqlite3"))


@pytest.mark.anyio
async def test_opening_the_assistant_parses_each_page_once(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = write_docs(tmp_path / "docs")
    pages = sorted(path.name for path in docs.rglob("*.md"))
    assert pages
    parsed: list[int] = []
    real = _markdown._PARSER.parse

    def counting(text: str, env: Any = None) -> Any:
        parsed.append(len(text))
        return real(text, env)

    monkeypatch.setattr(_markdown._PARSER, "parse", counting)
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        assert assistant.artifact_build.stats.files == len(pages)
    assert len(parsed) == len(pages)


def test_the_shared_parse_builds_the_same_artifact() -> None:
    from agentskit_chat.answers import build_local_knowledge_artifact  # noqa: PLC0415

    docs = Path(__file__).resolve().parents[2] / "docs"
    alone = build_local_knowledge_artifact(
        read_docs_folder(docs), site_id="docs", generated_at="2026-07-13T00:00:00.000Z"
    )
    folder = read_docs_folder(docs)
    MarkdownCorpus.from_documents(folder.documents)  # parses, and keeps the artifact's reading
    shared = build_local_knowledge_artifact(
        folder, site_id="docs", generated_at="2026-07-13T00:00:00.000Z"
    )
    assert shared.artifact_json == alone.artifact_json


@pytest.mark.anyio
async def test_the_second_start_reuses_the_cached_index(tmp_path: Path, cache: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    async with create_docs_assistant(docs, now=lambda: NOW) as first:
        report = first.index_report
        assert report is not None
        assert report.added
    files = _index_files(cache)
    assert len(files) == 1
    built = files[0].stat().st_mtime_ns
    async with create_docs_assistant(docs, now=lambda: NOW) as second:
        again = second.index_report
        assert again is not None
        assert (again.added, again.updated, again.removed) == ((), (), ())
        assert again.unchanged == len(report.added)
        hits = await second.retrieve("cache size", 1)
        assert hits[0].href.startswith("/docs/guide")
    assert _index_files(cache) == files
    assert files[0].stat().st_mtime_ns == built


@pytest.mark.anyio
async def test_a_changed_page_gets_a_new_index_never_the_stale_one(
    tmp_path: Path, cache: Path
) -> None:
    docs = write_docs(tmp_path / "docs")
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        assert not await assistant.retrieve("zeppelin", 3)
    old = _index_files(cache)
    (docs / "guide.md").write_text(GUIDE + "\n## Zeppelin mode\n\nThe zeppelin floats.\n")
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        report = assistant.index_report
        assert report is not None
        assert report.added
        hits = await assistant.retrieve("zeppelin", 3)
        assert hits
        assert "zeppelin" in hits[0].text.lower()
    new = _index_files(cache)
    assert len(old) == len(new) == 1
    assert old != new


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every parse of a page (by the one page parser), as the length of the text parsed."""
    parsed: list[int] = []
    real = _markdown._PARSER.parse

    def counting(text: str, env: Any = None) -> Any:
        parsed.append(len(text))
        return real(text, env)

    monkeypatch.setattr(_markdown._PARSER, "parse", counting)
    return parsed


def _make(folder: DocsFolder, index_now: IndexNow = lambda corpus: None) -> StartParts:
    """The parts a start builds, made as the assistant makes them (parsing every page); the
    search index is written meanwhile, from when the corpus is chunked."""
    corpus = MarkdownCorpus.from_documents(folder.documents, root=folder.root)
    index_now(corpus)
    texts = [f"{chunk.title}\n{chunk.text}" for chunk in corpus.chunks]
    build = build_local_knowledge_artifact(folder, site_id="docs", generated_at=STAMP)
    vocabulary = Counter(word for text in texts for word in words(text))
    return StartParts(corpus, build, TermWeights.from_texts(texts), vocabulary)


def _start(folder: DocsFolder, cache: Path) -> tuple[StartParts, SQLiteFTSRetriever]:
    return cached_start(
        folder, site_id="docs", href_prefix="/docs", make=partial(_make, folder), root=cache
    )


def _entry(cache: Path) -> Path:
    (file,) = _index_files(cache)
    return file


def _same(first: StartParts, second: StartParts) -> None:
    assert first.corpus.chunks
    assert second.corpus == first.corpus
    assert second.corpus.chunks == first.corpus.chunks
    assert second.build.artifact_json == first.build.artifact_json
    assert second.build.site_json == first.build.site_json
    assert second.build.left_out == first.build.left_out
    assert second.build.stats == first.build.stats
    assert second.build.artifact.verified
    assert dict(second.weights.frequencies) == dict(first.weights.frequencies)
    assert second.weights.sections == first.weights.sections
    assert second.vocabulary == first.vocabulary


def test_a_warm_start_reads_every_part_back_and_parses_nothing(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    first, index = _start(folder, cache)
    index.close()
    assert len(parses) == len(folder.documents)
    parses.clear()
    second, again = _start(read_docs_folder(folder.root), cache)
    try:
        assert parses == []
        _same(first, second)
        report = again.last_report
        assert report is not None
        assert (report.added, report.chunks) == ((), len(first.corpus.chunks))
    finally:
        again.close()


@pytest.mark.anyio
async def test_a_warm_start_of_the_assistant_parses_no_page(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    docs = write_docs(tmp_path / "docs")
    async with create_docs_assistant(docs, now=lambda: NOW) as first:
        built = first.artifact_build.artifact_json
        answer = await first.ask("How do I set the cache size?")
    assert parses
    parses.clear()
    async with create_docs_assistant(docs, now=lambda: NOW) as second:
        assert parses == []
        assert second.artifact_build.artifact_json == built
        assert second.artifact_build.artifact.verified
        assert await second.ask("How do I set the cache size?") == answer
        assert second.page("/docs/guide") is not None


def _tamper(file: Path, name: str, change: Callable[[bytes], bytes]) -> None:
    connection = sqlite3.connect(file)
    try:
        (value,) = connection.execute("SELECT value FROM start WHERE name = ?", (name,)).fetchone()
        changed = change(bytes(value))
        assert changed != value
        connection.execute("UPDATE start SET value = ? WHERE name = ?", (changed, name))
        connection.commit()
    finally:
        connection.close()


def test_a_tampered_cached_artifact_is_rejected_and_rebuilt(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    first, index = _start(folder, cache)
    index.close()
    original = first.build.artifact_json
    assert "MIT license" in original
    # The answer changed, the declared content hash kept: only verification can tell.
    _tamper(_entry(cache), "artifact", lambda v: v.replace(b"MIT license", b"GPL license"))
    parses.clear()
    second, again = _start(folder, cache)
    again.close()
    assert len(parses) == len(folder.documents)
    assert second.build.artifact_json == original
    parses.clear()
    third, last = _start(folder, cache)  # the entry was written again, whole
    last.close()
    assert parses == []
    assert third.build.artifact_json == original


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("corpus", lambda v: v.replace(b'"Setup guide"', b'"Setup guides"', 1)),
        ("corpus", lambda v: v[: len(v) // 2]),
        ("site", lambda v: v.replace(b'"siteId":"docs"', b'"siteId":"other"')),
        ("weights", lambda v: b"[]"),
        ("vocabulary", lambda v: v.replace(b'"widget":', b'"widgets":', 1)),
        ("digest", lambda v: bytes(32)),
    ],
)
def test_a_damaged_cache_entry_is_rebuilt_not_served(
    tmp_path: Path, cache: Path, parses: list[int], name: str, change: Callable[[bytes], bytes]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    first, index = _start(folder, cache)
    index.close()
    _tamper(_entry(cache), name, change)
    parses.clear()
    second, again = _start(folder, cache)
    again.close()
    assert len(parses) == len(folder.documents)
    _same(first, second)


def test_a_changed_chunk_text_is_rebuilt_not_served(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    first, index = _start(folder, cache)
    index.close()
    connection = sqlite3.connect(_entry(cache))
    try:
        changed = connection.execute(
            "UPDATE chunks SET body = replace(body, 'MIT', 'GPL') WHERE body LIKE '%MIT%'"
        ).rowcount
        connection.commit()
    finally:
        connection.close()
    assert changed == 1
    parses.clear()
    second, again = _start(folder, cache)
    again.close()
    assert len(parses) == len(folder.documents)
    _same(first, second)


def test_a_file_that_is_no_index_is_rebuilt_not_served(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    _start(folder, cache)[1].close()
    file = _entry(cache)
    file.write_bytes(b"not an index")
    parses.clear()
    _, index = _start(folder, cache)
    try:
        assert len(parses) == len(folder.documents)
        assert index.last_report is not None
        assert index.last_report.added
    finally:
        index.close()
    assert file.read_bytes().startswith(b"SQLite format 3")


def test_a_changed_page_or_site_gets_a_new_entry(
    tmp_path: Path, cache: Path, parses: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = write_docs(tmp_path / "docs")
    _start(read_docs_folder(docs), cache)[1].close()
    old = _entry(cache)
    (docs / "guide.md").write_text(GUIDE + "\n## Zeppelin mode\n\nThe zeppelin floats.\n")
    parses.clear()
    changed, index = _start(read_docs_folder(docs), cache)
    index.close()
    assert parses
    assert "Zeppelin mode" in changed.build.artifact_json
    assert any("zeppelin" in chunk.text for chunk in changed.corpus.chunks)
    assert _entry(cache) != old  # the old entry is gone, a new one holds the new pages
    # SOURCE_DATE_EPOCH decides generatedAt, so an entry is kept per value of it.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    parses.clear()
    folder = read_docs_folder(docs)
    parts, index = cached_start(
        folder,
        site_id="docs",
        href_prefix="/docs",
        make=lambda index_now: _make_stamped(folder),
        root=cache,
    )
    index.close()
    assert parses
    assert parts.build.artifact.generated_at == "2023-11-14T22:13:20.000Z"


def _make_stamped(folder: DocsFolder) -> StartParts:
    made = _make(folder)
    build = build_local_knowledge_artifact(folder, site_id="docs")
    return StartParts(made.corpus, build, made.weights, made.vocabulary)


def _built_in_memory(
    parts: StartParts, index: SQLiteFTSRetriever, folder: DocsFolder, parses: list[int]
) -> None:
    """A start that kept nothing on disk: every page parsed once (never twice) and the whole
    corpus indexed; the index is closed."""
    try:
        assert len(parses) == len(folder.documents)
        assert index.last_report is not None
        assert index.last_report.chunks == len(parts.corpus.chunks)
    finally:
        index.close()


def test_an_unwritable_cache_falls_back_to_memory(
    tmp_path: Path, cache: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    cache.write_text("a file where the cache folder should be")
    _built_in_memory(*_start(folder, cache), folder, parses)
    assert cache.is_file()
    assert os.environ[CACHE_DIR_ENV] == str(cache)


def test_an_unreachable_cache_folder_falls_back_to_memory(
    tmp_path: Path, parses: list[int]
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    # A name no file system takes: looking the entry up fails with ENAMETOOLONG, as it
    # fails with EACCES in a folder the user may not search.
    unreachable = tmp_path / ("x" * 300)
    _built_in_memory(*_start(folder, unreachable), folder, parses)


def test_no_home_folder_falls_back_to_memory(
    tmp_path: Path, parses: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    for name in (CACHE_DIR_ENV, "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def unknown(uid: int) -> Any:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", unknown)  # an account without a passwd entry
    with pytest.raises(RuntimeError):
        _index_cache.cache_root()
    started = cached_start(folder, site_id="docs", href_prefix="/docs", make=partial(_make, folder))
    _built_in_memory(*started, folder, parses)


def test_other_builder_code_never_reads_an_entry(
    tmp_path: Path, cache: Path, parses: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    _start(folder, cache)[1].close()
    first = _entry(cache)
    assert _index_cache._code_fingerprint() == _index_cache._code_fingerprint.__wrapped__()
    # An edited or upgraded copy of the code that builds the parts: another key.
    monkeypatch.setattr(_index_cache, "_code_fingerprint", lambda: "0" * 64)
    parses.clear()
    _start(folder, cache)[1].close()
    assert len(parses) == len(folder.documents)
    assert _entry(cache) != first


def test_another_markdown_parser_version_never_reads_an_entry(
    tmp_path: Path, cache: Path, parses: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    _start(folder, cache)[1].close()
    first = _entry(cache)
    # An upgraded markdown-it-py may chunk the same pages otherwise: another key.
    monkeypatch.setattr(markdown_it, "__version__", "0.0.0-test")
    parses.clear()
    _start(folder, cache)[1].close()
    assert len(parses) == len(folder.documents)
    assert _entry(cache) != first


def test_an_index_started_with_another_corpus_is_written_again(tmp_path: Path, cache: Path) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    other = MarkdownCorpus.from_texts({"other.md": "# Other\n\nNothing of the docs.\n"})

    def make(index_now: IndexNow) -> StartParts:
        index_now(other)  # started with a corpus the parts do not hold
        return _make(folder)

    parts, index = cached_start(folder, site_id="docs", href_prefix="/docs", make=make, root=cache)
    try:
        assert index.last_report is not None
        assert index.last_report.chunks == len(parts.corpus.chunks) > 1
        assert anyio.run(index.manifest) == parts.corpus.manifest
    finally:
        index.close()
    assert _index_files(cache) == [_entry(cache)]
    assert not [p for p in _entry(cache).parent.iterdir() if p.name.endswith(".tmp")]


def test_parts_that_cannot_be_made_leave_no_file_behind(tmp_path: Path, cache: Path) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))

    def make(index_now: IndexNow) -> StartParts:
        index_now(MarkdownCorpus.from_documents(folder.documents, root=folder.root))
        raise BuildError("the artifact could not be built")

    with pytest.raises(BuildError, match="artifact could not be built"):
        cached_start(folder, site_id="docs", href_prefix="/docs", make=make, root=cache)
    written = [path for path in cache.rglob("*") if path.is_file()]
    assert written == []  # the index the thread wrote is gone with its temporary name


@pytest.mark.anyio
async def test_the_assistant_writes_the_index_while_it_builds_the_rest(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real = _index_cache._write_index

    def recorded(where: Path, temporary: Path, corpus: MarkdownCorpus) -> Any:
        written.append(threading.current_thread().name)
        return real(where, temporary, corpus)

    monkeypatch.setattr(_index_cache, "_write_index", recorded)
    async with create_docs_assistant(write_docs(tmp_path / "docs"), now=lambda: NOW) as assistant:
        report = assistant.index_report
        assert report is not None
        assert report.chunks > 1
    # Written once, in the cache's own thread (started as soon as the pages were chunked).
    assert written == ["agentskit-index"]
    assert _entry(cache).is_file()


def test_a_warm_start_stems_no_word_and_knows_each_stem_right(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    _start(folder, cache)[1].close()
    real = _terms._STEMMER
    stemmed: list[str] = []

    class Counting:
        def stemWord(self, word: str) -> str:
            stemmed.append(word)
            return real.stemWord(word)

    monkeypatch.setattr(_terms, "_STEMS", {})
    monkeypatch.setattr(_terms, "_STEMMER", Counting())
    parts, index = _start(folder, cache)
    index.close()
    texts = [f"{chunk.title}\n{chunk.text}" for chunk in parts.corpus.chunks]
    assert texts
    known = [term_set(text) for text in texts]
    assert stemmed == []  # every word of the pages was known from the entry
    expected = [frozenset(w if w.isdigit() else real.stemWord(w) for w in words(t)) for t in texts]
    assert known == expected


def test_a_tampered_stem_is_never_known(
    tmp_path: Path, cache: Path, parses: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = read_docs_folder(write_docs(tmp_path / "docs"))
    _start(folder, cache)[1].close()
    monkeypatch.setattr(_terms, "_STEMS", {})
    _tamper(_entry(cache), "stems", lambda v: v.replace(b'"widget":"widget"', b'"widget":"gadget"'))
    parses.clear()
    _start(folder, cache)[1].close()
    assert len(parses) == len(folder.documents)  # the digest failed: built again
    assert stem("widget") == "widget"
