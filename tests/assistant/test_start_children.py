"""A start of a large folder starts its page-reading children while it still reads the folder.

When the pages will be parsed (nothing cached yet for the folder, or an index file of the
assistant's own), the children start as soon as the pages read so far are large enough for
them; they read pages with the start, and they are stopped whatever happens: the start done,
the pages found in the start cache, or a page that cannot be read.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentskit_chat.answers import build_local_knowledge_artifact
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.errors import BuildError
from agentskit_chat.retrieval import MarkdownCorpus, _docs_folder, _page_workers, read_docs_folder
from agentskit_chat.retrieval._corpus import read_corpus
from agentskit_chat.retrieval._index_cache import CACHE_DIR_ENV

from ._support import NOW

PROJECT_DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Children:
    """The children started, each with how many pages had been read when it started."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.read_before: list[int] = []
        self.folders: list[Path] = []
        self.pages_read = 0


@pytest.fixture
def children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Children:
    """A machine of two cores where any folder is large, one batch per page, a fresh cache;
    the children started are recorded."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(_page_workers, "MIN_SHARED_CHARS", 1)
    monkeypatch.setattr(_page_workers, "_BATCH_CHARS", 1)
    monkeypatch.setattr(_page_workers, "_cores", lambda: 2)
    seen = Children()
    real_start, real_read = _page_workers._start, _docs_folder._read_page

    def start(folder: Path) -> subprocess.Popen[bytes] | None:
        child = real_start(folder)
        assert child is not None
        seen.started.append(child)
        seen.read_before.append(seen.pages_read)
        seen.folders.append(folder)
        return child

    def read_page(root: Path, rel: str, path: Path) -> tuple[object, int]:
        seen.pages_read += 1
        return real_read(root, rel, path)

    monkeypatch.setattr(_page_workers, "_start", start)
    monkeypatch.setattr(_docs_folder, "_read_page", read_page)
    return seen


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(PROJECT_DOCS, docs)
    return docs


def _stopped(children: Children) -> bool:
    return all(child.poll() is not None for child in children.started) and not any(
        folder.exists() for folder in children.folders
    )


@pytest.mark.anyio
@pytest.mark.parametrize("own_index", [False, True], ids=["start-cache", "own-index"])
async def test_a_first_start_starts_its_children_while_it_reads_the_folder(
    tmp_path: Path, children: Children, own_index: bool
) -> None:
    docs = _docs(tmp_path)
    pages = len(read_docs_folder(docs).documents)
    assert pages > 20
    children.pages_read = 0
    index_path = tmp_path / "own.sqlite3" if own_index else None
    async with create_docs_assistant(docs, now=lambda: NOW, index_path=index_path) as assistant:
        report = assistant.index_report
        artifact = assistant.artifact_build.artifact_json
    # One child (two cores), started after the first page, long before the last was read;
    # it read pages with the start, and it is stopped.
    assert len(children.started) == 1
    assert children.read_before == [1]
    assert _stopped(children)
    # What the start built is what a serial read builds.
    serial = read_docs_folder(docs)
    corpus = MarkdownCorpus.from_documents(serial.documents)
    assert report is not None and report.chunks == len(corpus.chunks)
    assert artifact == (
        build_local_knowledge_artifact(serial, site_id="docs", now=lambda: NOW).artifact_json
    )


@pytest.mark.anyio
async def test_a_start_that_finds_its_pages_cached_starts_no_child(
    tmp_path: Path, children: Children
) -> None:
    docs = _docs(tmp_path)
    async with create_docs_assistant(docs, now=lambda: NOW):
        pass
    assert len(children.started) == 1
    async with create_docs_assistant(docs, now=lambda: NOW):
        pass
    assert len(children.started) == 1  # the second start parsed nothing: no child at all
    assert _stopped(children)


@pytest.mark.anyio
async def test_children_started_for_a_folder_that_cannot_be_read_are_stopped(
    tmp_path: Path, children: Children
) -> None:
    docs = _docs(tmp_path)
    (docs / "zz-last.md").write_bytes(b"# Last\n\nNot UTF-8: \xff\xfe\n")
    with pytest.raises(BuildError, match="not valid UTF-8"):
        async with create_docs_assistant(docs, now=lambda: NOW):
            pass
    assert len(children.started) == 1  # started while the folder was read, before it failed
    assert children.read_before == [1]
    assert _stopped(children)  # stopped and reaped before the error reached the caller


def test_a_read_of_a_small_folder_starts_no_child(
    children: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_page_workers, "MIN_SHARED_CHARS", 10**9)
    with _page_workers.PageWorkers() as workers:
        folder = _docs_folder.read_docs_pages(PROJECT_DOCS, reading=workers.reading)
        assert folder.documents
        assert workers.started == 0
    assert children.started == []


def test_no_room_for_children_is_found_once_and_the_pages_are_read_here(
    children: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[str] = []

    def full(prefix: str) -> str:
        tries.append(prefix)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tempfile.mkdtemp", full)
    with _page_workers.PageWorkers() as workers:
        folder = _docs_folder.read_docs_pages(PROJECT_DOCS, reading=workers.reading)
        assert len(folder.documents) > 20
        assert len(tries) == 1  # tried when the folder was large enough, not for every page
        corpus = read_corpus(folder.documents, root=folder.root, workers=workers)
    assert children.started == []
    serial = MarkdownCorpus.from_documents(read_docs_folder(PROJECT_DOCS).documents)
    assert corpus.documents == serial.documents
