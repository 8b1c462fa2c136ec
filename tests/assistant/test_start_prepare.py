"""A start prepares its artifact build (the resolver's verification) while the start cache's
index is still being written, and once from a build read back from the cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from agentskit_chat.answers import ArtifactBuild, DocsFolder
from agentskit_chat.assistant._start import start_parts
from agentskit_chat.errors import BuildError
from agentskit_chat.retrieval import SQLiteFTSRetriever
from agentskit_chat.retrieval._index_cache import CACHE_DIR_ENV, StartParts, holds_entry

from ._support import NOW, write_docs


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(folder))
    return folder


T = TypeVar("T")


def _start(
    docs: Path, prepare: Callable[[ArtifactBuild], T], index_path: Path | None = None
) -> tuple[DocsFolder, StartParts, SQLiteFTSRetriever | None, T]:
    return start_parts(
        docs,
        site_id="docs",
        href_prefix="/docs",
        index_path=index_path,
        now=lambda: NOW,
        prepare=prepare,
    )


def _open(found: SQLiteFTSRetriever | None) -> SQLiteFTSRetriever:
    assert found is not None  # the start cache's index
    return found


def test_a_new_build_is_prepared_before_its_index_is_in_the_cache(
    tmp_path: Path, cache: Path
) -> None:
    docs = write_docs(tmp_path / "docs")
    seen: list[tuple[ArtifactBuild, bool]] = []

    def prepare(build: ArtifactBuild) -> str:
        seen.append((build, holds_entry(docs)))
        return "prepared"

    _, parts, found, prepared = _start(docs, prepare)
    index = _open(found)
    try:
        assert prepared == "prepared"
        assert len(seen) == 1
        build, entry_written = seen[0]
        assert build is parts.build
        assert not entry_written  # the cache entry is written after, with the index
        assert holds_entry(docs)
    finally:
        index.close()


def test_a_build_read_back_from_the_cache_is_prepared_once(tmp_path: Path, cache: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    *_, first, _ = _start(docs, lambda build: build.artifact_json)
    _open(first).close()
    assert holds_entry(docs)
    seen: list[ArtifactBuild] = []

    def prepare(build: ArtifactBuild) -> str:
        seen.append(build)
        return build.artifact_json

    _, parts, found, prepared = _start(docs, prepare)
    index = _open(found)
    try:
        assert len(seen) == 1
        assert seen[0] is parts.build
        assert prepared == seen[0].artifact_json
    finally:
        index.close()


def test_an_own_index_file_start_prepares_its_build(tmp_path: Path, cache: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    seen: list[ArtifactBuild] = []

    def prepare(build: ArtifactBuild) -> str:
        seen.append(build)
        return "ok"

    _, parts, index, prepared = _start(docs, prepare, tmp_path / "own.sqlite3")
    assert index is None
    assert prepared == "ok"
    assert [build is parts.build for build in seen] == [True]


@pytest.mark.parametrize("cached", [False, True], ids=["new-build", "cached-build"])
def test_a_failed_preparation_fails_the_start_and_caches_nothing_new(
    tmp_path: Path, cache: Path, cached: bool
) -> None:
    docs = write_docs(tmp_path / "docs")
    if cached:
        *_, found, _ = _start(docs, lambda build: None)
        _open(found).close()
    entries = sorted(path for path in cache.rglob("*") if path.is_file())

    def prepare(build: ArtifactBuild) -> None:
        raise BuildError("the artifact does not verify")

    with pytest.raises(BuildError, match="does not verify"):
        _start(docs, prepare)
    # Nothing half-written is left: the cache holds the files it held before.
    assert sorted(path for path in cache.rglob("*") if path.is_file()) == entries
    assert holds_entry(docs) is cached
