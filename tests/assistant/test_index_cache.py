"""The docs assistant's start: each page parsed once, the search index reused from the cache.

The cache folder is the suite's own (``tests/conftest.py`` sets ``AGENTSKIT_CACHE_DIR``); each
test here points it at a fresh folder of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.answers import _markdown
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.retrieval import MarkdownCorpus, read_docs_folder
from agentskit_chat.retrieval._index_cache import (
    CACHE_DIR_ENV,
    cached_or_memory_index,
    open_cached_index,
)

from ._support import GUIDE, NOW, write_docs


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


def test_a_damaged_cache_file_is_rebuilt_not_served(tmp_path: Path, cache: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    corpus = MarkdownCorpus.from_documents(read_docs_folder(docs).documents)
    open_cached_index(docs, corpus).close()
    (file,) = _index_files(cache)
    file.write_bytes(b"not an index")
    index = open_cached_index(docs, corpus)
    try:
        assert index.last_report is not None
        assert index.last_report.added
    finally:
        index.close()
    assert file.read_bytes().startswith(b"SQLite format 3")


def test_an_unwritable_cache_falls_back_to_memory(tmp_path: Path, cache: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    cache.write_text("a file where the cache folder should be")
    corpus = MarkdownCorpus.from_documents(read_docs_folder(docs).documents)
    index = cached_or_memory_index(docs, corpus)
    try:
        assert index.last_report is not None
        assert index.last_report.chunks == len(corpus.chunks)
    finally:
        index.close()
    assert cache.is_file()
    assert os.environ[CACHE_DIR_ENV] == str(cache)
