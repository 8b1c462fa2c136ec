"""A start pauses the cyclic garbage collector while it builds, and gives it back as it was."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.assistant import _start, create_docs_assistant
from agentskit_chat.assistant._start import collector_paused
from agentskit_chat.retrieval import _corpus
from agentskit_chat.retrieval._index_cache import CACHE_DIR_ENV

from ._support import NOW, write_docs


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("enabled", [True, False])
async def test_a_start_builds_with_the_collector_paused_and_leaves_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector: None, enabled: bool
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    docs = write_docs(tmp_path / "docs")
    during: list[bool] = []
    real = _corpus.read_corpus

    def watched(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(_start, "read_corpus", watched)
    if enabled:
        gc.enable()
    else:
        gc.disable()
    # A cold start (the pages parsed), a warm one (read from the start cache), and a start with
    # an index file of its own (the pages parsed on every start).
    for index_path in (None, None, tmp_path / "own.sqlite3"):
        async with create_docs_assistant(docs, now=lambda: NOW, index_path=index_path) as a:
            assert a.artifact_build.stats.files > 0
        assert gc.isenabled() is enabled
    assert during == [False, False]  # parsed by the cold start and by the own-index start


def test_pauses_that_overlap_give_the_collector_back_when_the_last_ends(collector: None) -> None:
    gc.enable()
    first_in, second_done, seen = threading.Event(), threading.Event(), []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_done.wait(5)
            seen.append(gc.isenabled())  # the other start ended: still paused for this one

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(5)
    with collector_paused():
        assert not gc.isenabled()
    second_done.set()
    thread.join(5)
    assert seen == [False]
    assert gc.isenabled()


def test_a_pause_gives_the_collector_back_when_the_build_raises(collector: None) -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("the build failed")
    assert gc.isenabled()
